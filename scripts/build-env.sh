# Sourced by scripts/build-wheel.sh and scripts/build-node.sh: the build venv with the pinned
# tools (maturin, zig, cargo-zigbuild, auditwheel, twine) and what both builds share.
# Both link for glibc 2.17 (manylinux2014: RHEL/CentOS 7 and everything newer) whatever glibc
# the build machine has: zig links against 2.17's symbol versions and its C headers.
command -v cargo >/dev/null || { echo "error: cargo is required to build the packages (https://rustup.rs)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "error: python3 (>= 3.9) is required for the build tools" >&2; exit 1; }
# AGENTSTATE_TARGET picks the Rust target (the release workflow builds each; this machine has
# only x86_64-unknown-linux-gnu's standard library): its zig target (a glibc target names its
# glibc floor), the platform tag auditwheel must report, and the Node platform package.
TARGET="${AGENTSTATE_TARGET:-x86_64-unknown-linux-gnu}"
GLIBC_FLOOR=2.17
case "$TARGET" in
  x86_64-unknown-linux-gnu)   ZIG="$TARGET.$GLIBC_FLOOR" COMPAT=manylinux2014 TAG=manylinux_2_17_x86_64 NPM=linux-x64-gnu ;;
  aarch64-unknown-linux-gnu)  ZIG="$TARGET.$GLIBC_FLOOR" COMPAT=manylinux2014 TAG=manylinux_2_17_aarch64 NPM=linux-arm64-gnu ;;
  x86_64-unknown-linux-musl)  ZIG="$TARGET" COMPAT=musllinux_1_2 TAG=musllinux_1_2_x86_64 NPM=linux-x64-musl ;;
  aarch64-unknown-linux-musl) ZIG="$TARGET" COMPAT=musllinux_1_2 TAG=musllinux_1_2_aarch64 NPM=linux-arm64-musl ;;
  *) echo "error: AGENTSTATE_TARGET=$TARGET is not one of the Linux targets in scripts/build-env.sh (macOS builds: docs/releasing.md)" >&2; exit 1 ;;
esac
case "$TARGET" in *-gnu) GLIBC=yes ;; *) GLIBC=no ;; esac
ENV_TARGET=${TARGET//-/_}
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
BUILD_VENV="$CARGO_TARGET_DIR/python/build-venv"   # kept between runs
[ -x "$BUILD_VENV/bin/python" ] || python3 -m venv "$BUILD_VENV"
"$BUILD_VENV/bin/python" -m pip --disable-pip-version-check -q install \
  "$(grep '^maturin==' python/tests/requirements.txt)" -r scripts/build-requirements.txt
# maturin and cargo-zigbuild run zig as `python3 -m ziglang`: the venv's python3 first.
export PATH="$BUILD_VENV/bin:$PATH"
# Their zig wrappers (cc, c++, ranlib: scripts that call zig with the glibc version) live here,
# where scripts/build-node.sh finds the wheel build's to reuse them.
export CARGO_ZIGBUILD_CACHE_DIR="$CARGO_TARGET_DIR/zig"
# The C archives (sqlite, ring) go through the system ar in both builds: cargo-zigbuild would
# otherwise set zig's and maturin would not, and a changed AR_<target> rebuilds them and
# everything above them, the core included.
export "AR_$ENV_TARGET=$(printenv "AR_$ENV_TARGET" || echo ar)"
