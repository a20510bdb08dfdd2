#!/usr/bin/env bash
# Makes sure `redis-server` is on PATH: installs Debian's package when it is missing and we
# can (root or sudo), otherwise says exactly what to run. Sourced by scripts/test.sh,
# scripts/demo.sh and .ci/run.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1; then
  exit 0
fi
echo "redis-server is not on PATH; installing Debian's redis-server package..." >&2
if [ "$(id -u)" = 0 ]; then
  apt-get update -qq && apt-get install -y -qq redis-server >/dev/null
elif command -v sudo >/dev/null 2>&1; then
  sudo apt-get update -qq && sudo apt-get install -y -qq redis-server >/dev/null
fi
if ! command -v redis-server >/dev/null 2>&1; then
  echo "error: could not install redis-server. Run: sudo apt-get install -y redis-server" >&2
  echo "       (or on macOS: brew install redis), then run this command again." >&2
  exit 1
fi
