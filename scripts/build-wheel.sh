#!/usr/bin/env bash
# Builds the Python wheel once, on a machine with cargo, for machines without it:
#   scripts/build-wheel.sh            # -> dist/agentstate-<version>-cp39-abi3-<platform>.whl
# then, anywhere with a compatible CPython (>= 3.9, same OS and architecture, glibc at least
# as new): pip install "dist/agentstate-...whl[langgraph]". A release build of the Rust core:
# about 10 minutes on 2 cores and 1.5 GB of disk under target/ (the wheel itself is ~11 MB).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "error: cargo is required to build the wheel (https://rustup.rs)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "error: python3 (>= 3.9) is required" >&2; exit 1; }
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
VENV="$CARGO_TARGET_DIR/python/build-venv"   # maturin only, kept between runs (as scripts/test-python.sh)
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip --disable-pip-version-check -q install "$(grep '^maturin==' python/tests/requirements.txt)"
mkdir -p dist
echo "building the wheel (a release build of the Rust core: about 10 minutes on 2 cores)..." >&2
(cd python && "$VENV/bin/maturin" build --release --locked --out ../dist)
ls -1 dist/agentstate-*.whl
