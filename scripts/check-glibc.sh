#!/usr/bin/env bash
# Fails when a built binary needs a newer glibc than the floor we promise:
#   scripts/check-glibc.sh FLOOR FILE...   # e.g. 2.17 dist/*.whl node/npm/linux-x64-gnu/*.node
# A FILE is a shared object (the Node addon) or a wheel (each .so inside is checked). The
# dynamic loader refuses a library that names a symbol version newer than the machine's
# glibc (`version GLIBC_2.34 not found`), so the highest GLIBC_ version among the symbols a
# file imports is the oldest glibc it runs on; `objdump -T` lists them.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 FLOOR FILE..." >&2; exit 2; }
floor=$1; shift
command -v objdump >/dev/null || { echo "error: objdump is missing: sudo apt-get install -y binutils" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
status=0
check() { # label so
  local label=$1 so=$2 versions highest
  versions=$(objdump -T "$so" | grep -o 'GLIBC_[0-9][0-9.]*' | sort -u -V || true)
  [ -n "$versions" ] || { echo "error: $label imports no GLIBC_ symbol: not a glibc binary?" >&2; status=1; return; }
  highest=$(printf '%s\n' "$versions" | tail -1)
  if [ "$(printf '%s\n%s\n' "${highest#GLIBC_}" "$floor" | sort -V | tail -1)" = "$floor" ]; then
    echo "$label: highest glibc symbol version $highest (floor $floor): ok"
  else
    echo "error: $label needs $highest, newer than the glibc $floor floor; the symbols:" >&2
    objdump -T "$so" | grep -E "GLIBC_[0-9.]+" | awk -v f="$floor" '{
      v = $0; sub(/.*GLIBC_/, "", v); sub(/[^0-9.].*/, "", v)
      split(v, a, "."); split(f, b, ".")
      if (a[1] > b[1] || (a[1] == b[1] && a[2] + 0 > b[2] + 0)) print "  " $NF " (GLIBC_" v ")"
    }' >&2
    echo "       build it with zig for that floor: scripts/build-wheel.sh (the wheel) or scripts/build-node.sh (the addon), not plain cargo or maturin" >&2
    status=1
  fi
}
for f in "$@"; do
  case "$f" in
    *.whl)
      rm -rf "$tmp/whl" && mkdir -p "$tmp/whl"
      python3 -m zipfile -e "$f" "$tmp/whl"
      found=0
      while IFS= read -r so; do
        found=1; check "$(basename "$f"):${so#"$tmp/whl/"}" "$so"
      done < <(find "$tmp/whl" -name '*.so' | sort)
      [ "$found" = 1 ] || { echo "error: $f holds no .so" >&2; status=1; } ;;
    *) check "$f" "$f" ;;
  esac
done
exit $status
