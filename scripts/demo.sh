#!/usr/bin/env bash
# Builds agentstate and runs the demo on the embedded default (a private redis-server when
# nothing answers on 127.0.0.1:6379).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-tools.sh redis-server
cargo run --locked --release --quiet -- demo "$@"
