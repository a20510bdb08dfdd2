#!/usr/bin/env bash
# Runs the whole test suite. Each integration test starts its own private redis-server on a
# free loopback port, so the only requirement is redis-server on PATH (installed if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-tools.sh redis-server openssl
scripts/check-architecture.sh
cargo test --locked "$@"
