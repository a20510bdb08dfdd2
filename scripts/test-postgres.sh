#!/usr/bin/env bash
# Prints an admin URL of a PostgreSQL server the tests may create and drop databases on
# (the tests never use an existing database as it is: each creates its own). Order:
#   1. AGENTSTATE_TEST_PG when set (checked with pg_isready);
#   2. a server answering on 127.0.0.1:5432 (user postgres, trust auth), unless
#      AGENTSTATE_TEST_PG_PRIVATE=1;
#   3. a private server: initdb + pg_ctl, as the postgres user when run as root, on a free
#      port in a temp dir (Debian's postgresql package is installed first when there is no
#      initdb). Its directory is printed on stderr; the printed lines include an EXIT trap
#      that stops it and removes the directory.
# Usage: eval "$(scripts/test-postgres.sh)"   # sets AGENTSTATE_TEST_PG (and the trap)
set -euo pipefail
say() { echo "test-postgres: $*" >&2; }
pg_bin() {
  local found
  found=$(command -v "$1" 2>/dev/null || ls /usr/lib/postgresql/*/bin/"$1" 2>/dev/null | sort -V | tail -1 || true)
  [ -n "$found" ] && echo "$found"
}
if [ -n "${AGENTSTATE_TEST_PG:-}" ]; then
  echo "export AGENTSTATE_TEST_PG='$AGENTSTATE_TEST_PG'"
  exit 0
fi
isready=$(pg_bin pg_isready || true)
if [ -z "${AGENTSTATE_TEST_PG_PRIVATE:-}" ] && [ -n "$isready" ] && "$isready" -q -h 127.0.0.1 -p 5432 -U postgres; then
  echo "export AGENTSTATE_TEST_PG='postgres://postgres@127.0.0.1:5432/postgres'"
  exit 0
fi
if [ -z "$(pg_bin initdb || true)" ]; then
  say "no PostgreSQL answers on 127.0.0.1:5432 and initdb is missing; installing Debian's postgresql"
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq postgresql >/dev/null
  else
    sudo apt-get update -qq && sudo apt-get install -y -qq postgresql >/dev/null
  fi
fi
initdb=$(pg_bin initdb); pg_ctl=$(pg_bin pg_ctl)
dir=$(mktemp -d /tmp/agentstate-pg.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
as_pg=()
if [ "$(id -u)" = 0 ]; then
  chown postgres "$dir"
  as_pg=(runuser -u postgres --)
fi
"${as_pg[@]}" "$initdb" -D "$dir/data" -U postgres -A trust >/dev/null
"${as_pg[@]}" "$pg_ctl" -D "$dir/data" -l "$dir/log" -w \
  -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off" start >/dev/null
say "started a private PostgreSQL on 127.0.0.1:$port in $dir"
echo "export AGENTSTATE_TEST_PG='postgres://postgres@127.0.0.1:$port/postgres'"
echo "trap '${as_pg[*]} $pg_ctl -D $dir/data -m immediate stop >/dev/null 2>&1 || true; rm -rf $dir' EXIT"
