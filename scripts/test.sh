#!/usr/bin/env bash
# Runs the whole test suite. Each integration test starts its own private redis-server on a
# free loopback port (the cluster tests three, joined with redis-cli), so the requirements
# are redis-server and redis-cli on PATH (installed if missing). Tests of the PostgreSQL
# durable tier create and drop databases of their own on AGENTSTATE_TEST_PG, which
# scripts/test-postgres.sh finds or starts (a private server, stopped on exit).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-tools.sh redis-server redis-cli openssl
scripts/check-architecture.sh
for doc in ARCHITECTURE.md docs/architecture-*.md; do scripts/check-code-map.sh "$doc"; done
# The API's docs build without a warning (missing docs, broken links); `cargo test` below
# runs their examples.
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --locked
eval "$(scripts/test-postgres.sh)"
cargo test --locked "$@"
