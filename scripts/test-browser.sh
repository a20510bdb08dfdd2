#!/usr/bin/env bash
# The console (`agentstate ui`) in a real headless Chromium: Debian's `chromium` (installed
# when missing) driven by Playwright for Python from a venv, with `executable_path` set to
# it (Playwright's own browser download is never used). Runs tests/browser against the
# debug `agentstate` binary (built here when missing) with a private redis-server and a real
# spill daemon; screenshots go to $CARGO_TARGET_DIR/screenshots.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
scripts/ensure-tools.sh redis-server redis-cli chromium
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
cargo build --locked --quiet
VENV="$CARGO_TARGET_DIR/browser-venv"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip --disable-pip-version-check -q install -r tests/browser/requirements.txt
export AGENTSTATE_BIN="$CARGO_TARGET_DIR/debug/agentstate"
export CHROMIUM="${CHROMIUM:-$(command -v chromium)}"
export SCREENSHOTS="$CARGO_TARGET_DIR/screenshots"
"$VENV/bin/python" -m pytest -p no:cacheprovider -q tests/browser "$@"
echo "screenshots: $SCREENSHOTS"
