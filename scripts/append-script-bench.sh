#!/usr/bin/env bash
# Redis CPU (INFO cpu) and commands (INFO commandstats) per call of append_message.lua as it
# was at BASE (default f75ce83, before the sliding idle TTL: eight EXPIREs per append) and as it is in the
# working tree, next to a plain SET of the same message, by redis-benchmark at -c 1, 8 and 64
# (-P 1, N requests each) on a private redis-server. Figures only; nothing is asserted.
# Usage: scripts/append-script-bench.sh   (PORT, N, BASE from the environment)
set -euo pipefail
PORT=${PORT:-6411}; N=${N:-50000}
cd "$(dirname "$0")/.."
BASE=${BASE:-f75ce83}
TMP=$(mktemp -d)
# BASE prepended the whole prelude; the working tree's script is built by the library's loader.
git show "$BASE:lua/_prelude.lua" > "$TMP/old.lua"; git show "$BASE:lua/append_message.lua" >> "$TMP/old.lua"
cargo run --quiet --locked --bin agentstate -- bench --print-script append_message > "$TMP/new.lua"
redis-server --port $PORT --save '' --appendonly no --daemonize yes --pidfile "$TMP/rs.pid" --logfile "$TMP/rs.log"
sleep 0.5
R="redis-cli -p $PORT"
trap '$R SHUTDOWN NOSAVE >/dev/null 2>&1 || true; rm -rf "$TMP"' EXIT
BODY='{"role":"user","content":"'$(head -c 192 /dev/urandom | base64 -w0 | tr -dc a-z | head -c 256)'"}'
cpu() { $R INFO cpu | awk -F: '/used_cpu_(user|sys):/{s+=$2} END{printf "%.6f", s}'; }
calls() { $R INFO commandstats | awk -F'[=,:]' '/^cmdstat_/{s+=$3} END{print s}'; }
run() { # name clients cmd...
  local name=$1 c=$2; shift 2
  $R CONFIG RESETSTAT >/dev/null
  local c0; c0=$(cpu)
  local out; out=$(redis-benchmark -p $PORT -c $c -P 1 -q -n $N "$@" 2>/dev/null | tr '\r' '\n' | grep -v '^$' | tail -1)
  local c1; c1=$(cpu); local k; k=$(calls)
  local rate; rate=$(echo "$out" | awk -F': ' '{print $2}' | awk '{print $1}')
  awk -v n=$name -v c=$c -v r=$rate -v a=$c0 -v b=$c1 -v k=$k -v N=$N 'BEGIN{printf "%-8s c=%-3d %10.0f/s  cpu %6.1f us/call  %5.1f commands/call\n", n, c, r, (b-a)*1e6/N, (k-2)/N}'
}
for v in old new; do
  sha=$($R SCRIPT LOAD "$(cat "$TMP/$v.lua")")
  eval "SHA_$v=$sha"
done
for c in 1 8 64; do
  for v in old new; do
    sid="raw_${v}_$c"
    K="as:{0}:s:$sid"
    $R HSET "$K" next_seq 1 ttl 3600 >/dev/null
    sha_var=SHA_$v
    body=$BODY   # the script as it is takes the body without its opening brace
    [ "$v" = new ] && body=${BODY#\{}
    run "$v" $c EVALSHA ${!sha_var} 9 "$K" "$K:work" "$K:msgs" "$K:ckpt" "$K:idem" "$K:compactions" "$K:usage" "$K:children" "as:{0}:wal" "$sid" "$body" "" "" 65536
  done
  run SET $c SET "as:{0}:bench:set" "$BODY"
done
