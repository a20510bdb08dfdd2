#!/usr/bin/env bash
# Builds the Python wheel and the sdist once, on a machine with cargo, for machines without it:
#   scripts/build-wheel.sh [OUT]   # -> OUT (default dist/): agentstate_redis-<version>-cp39-abi3-
#                                  #    manylinux2014_x86_64.manylinux_2_17_x86_64.whl and .tar.gz
# The wheel installs with pip alone on any x86_64 Linux with glibc 2.17 or newer and CPython
# >= 3.9: maturin --zig links it for manylinux2014. It then checks what it made: auditwheel
# show must call it manylinux2014, scripts/check-glibc.sh must find no GLIBC_ symbol newer
# than 2.17, twine check must accept the wheel's and the sdist's metadata. A release build of
# the Rust core: about 10 minutes on 2 cores and 1.5 GB of disk under target/ (the wheel
# itself is ~11 MB). scripts/test-python.sh tests the wheel this makes.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=$(mkdir -p "${1:-dist}" && cd "${1:-dist}" && pwd)
. scripts/build-env.sh
scripts/ensure-tools.sh objdump ar
rm -f "$OUT"/agentstate_redis-*.whl "$OUT"/agentstate_redis-*.tar.gz
echo "building the wheel (a release build of the Rust core: about 10 minutes on 2 cores)..." >&2
(cd python && maturin build --release --locked --zig --compatibility "$COMPAT" \
  --target "$TARGET" --quiet --out "$OUT")
(cd python && maturin sdist --out "$OUT") >&2
WHEEL=$(ls "$OUT"/agentstate_redis-*.whl)
SDIST=$(ls "$OUT"/agentstate_redis-*.tar.gz)
echo "checking $(basename "$WHEEL")" >&2
report=$(auditwheel show "$WHEEL")
echo "$report" >&2
# auditwheel wraps its sentences: compare with the line breaks as spaces.
tr '\n' ' ' <<<"$report" | grep -q "is consistent with the following platform tag: \"$TAG\"" || {
  echo "error: auditwheel does not call $WHEEL $TAG: see above" >&2
  exit 1
}
[ "$GLIBC" = no ] || scripts/check-glibc.sh "$GLIBC_FLOOR" "$WHEEL"
twine check --strict "$WHEEL" "$SDIST" >&2
ls -1 "$WHEEL" "$SDIST"
