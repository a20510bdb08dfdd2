#!/usr/bin/env bash
# Runs the whole test suite. Each integration test starts its own private redis-server on a
# free loopback port (the cluster tests three, joined with redis-cli), so the requirements
# are redis-server and redis-cli on PATH (installed if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-tools.sh redis-server redis-cli openssl
scripts/check-architecture.sh
scripts/check-code-map.sh
cargo test --locked "$@"
