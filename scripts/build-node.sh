#!/usr/bin/env bash
# Builds the Node packages once, on a machine with cargo, for machines without it:
#   scripts/build-node.sh [OUT]   # -> OUT (default dist/): agentstate-node-<version>.tgz and
#                                 #    agentstate-node-linux-x64-gnu-<version>.tgz
# The addon is linked with zig for glibc 2.17 (`cargo zigbuild`), as the wheel is, into the
# platform package node/npm/linux-x64-gnu (napi-rs' layout: @agentstate/node names it as an
# optional dependency, npm installs it where os, cpu and libc match); scripts/check-glibc.sh
# must find no GLIBC_ symbol newer than 2.17. `npm install` of the two tarballs then needs
# no cargo. scripts/test-node.sh tests what this makes.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=$(mkdir -p "${1:-dist}" && cd "${1:-dist}" && pwd)
. scripts/build-env.sh
scripts/ensure-tools.sh objdump ar node npm
PLATFORM="node/npm/$NPM"
ADDON="$PLATFORM/agentstate.$NPM.node"

# The wheel's build (maturin --zig, scripts/build-wheel.sh) leaves zig wrappers in
# CARGO_ZIGBUILD_CACHE_DIR. Naming the same ones here lets cargo reuse what that build
# compiled for both (sqlite, ring and the crates above them whose features agree): a C
# compiler of another path would rebuild those, and the next wheel build rebuild them again.
# Without them cargo-zigbuild makes its own.
cc=$(grep -l '/maturin" zig cc ' "$CARGO_ZIGBUILD_CACHE_DIR"/cargo-zigbuild/*/wrappers/*/zigcc-"$ZIG"-*.sh 2>/dev/null | head -1 || true)
if [ -n "$cc" ]; then
  export "CC_$ENV_TARGET=$cc" "CXX_$ENV_TARGET=${cc/zigcc-/zigcxx-}" \
    "RANLIB_$ENV_TARGET=$(dirname "$cc")/zigranlib.sh" \
    "CARGO_TARGET_$(echo "$ENV_TARGET" | tr a-z A-Z)_LINKER=$cc"
fi

# A musl target links the C runtime statically by default, which a cdylib cannot (maturin
# turns it off for the wheel the same way).
case "$TARGET" in *-musl) export "CARGO_TARGET_$(echo "$ENV_TARGET" | tr a-z A-Z)_RUSTFLAGS=-C target-feature=-crt-static" ;; esac
echo "building the addon (a release build of the Rust core unless the wheel's build made it)..." >&2
# The release profile keeps line tables for profiling (debug = 1): 150 MB of them here. The
# linker drops them from the addon alone (a rustc flag of the last crate only, so the units
# the wheel's build compiled are still reused), for every target with no target's strip.
cargo-zigbuild rustc --release --locked -p agentstate-node --lib --target "$ZIG" -- -C strip=debuginfo
cp "$CARGO_TARGET_DIR/$TARGET/release/libagentstate_node.so" "$ADDON"
[ "$GLIBC" = no ] || scripts/check-glibc.sh "$GLIBC_FLOOR" "$ADDON"

# The main package's ESM declarations (index.d.mts, ...) come from scripts/install.js.
(cd node && AGENTSTATE_NODE_SKIP_BUILD=1 node scripts/install.js)
rm -f "$OUT"/agentstate-node-*.tgz
for dir in "$PLATFORM" node; do
  (cd "$dir" && npm pack --silent --pack-destination "$OUT" >/dev/null)
done
ls -1 "$OUT"/agentstate-node-*.tgz
