#!/usr/bin/env bash
# The Node package's tests, as a Node user gets it:
#   0. builds the packages once (scripts/build-node.sh: the addon linked for glibc 2.17 in the
#      platform package @agentstate/node-linux-x64-gnu, both packed with `npm pack`); a fresh
#      temp project installs the two tarballs and the pinned test-time frameworks
#      (node/test/package.json) with no cargo on PATH, and the addon must load from the
#      platform package; everything below runs from that installed copy,
# then runs
#   1. our tests (node/test/*.test.mjs, node's test runner: store, typed errors, 8 worker
#      processes on one session, Redis loss and restore, the LangGraph.js graph across two
#      processes, the OpenAI Agents JS session, the installed `agentstate` command and `npx
#      agentstate` signalled), each file on its own private redis-server;
#      the cross-language test (crosslang.test.mjs) runs with the Python venv that
#      scripts/test-python.sh leaves in $CARGO_TARGET_DIR/python/venv (or AGENTSTATE_PYTHON),
#      and says SKIPPED without one,
#   2. strict `tsc --noEmit` of node/test/types.ts against the package's declared types, as ESM
#      and as CommonJS (a copy named types.cts), on the TypeScript npm installs by default and
#      on the previous major (node/test/package.json: typescript, typescript-prev),
#   3. LangGraph.js' checkpointer validation suite (@langchain/langgraph-checkpoint-validation)
#      against AgentStateSaver, through vitest,
#   4. that suite again with a deliberately broken saver, which must fail (the suite is live),
#   5. LangGraph.js' own store tests (libs/checkpoint/src/tests/{store,vector,namespace}.test.ts
#      of github.com/langchain-ai/langgraphjs at LGJS_TESTS_COMMIT, or of a local checkout in
#      $LGJS_SUITE: the npm package ships no tests) against AgentStateStore through vitest
#      (node/test/lgjs-store.vitest.config.mjs; deselected: node/test/lgjs_store_deselected.txt),
#      says SKIPPED when they cannot be had,
#   6. that suite again with a deliberately broken store, which must fail.
# BENCH=1 then runs node/bench/bench.mjs (the adapters beside MemorySaver / MemorySession).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
scripts/ensure-tools.sh redis-server redis-cli node npm
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
WORK="$CARGO_TARGET_DIR/node"
mkdir -p "$WORK"
start=$(date +%s)

echo "== build: the addon for glibc 2.17 and the tarballs (scripts/build-node.sh)"
scripts/build-node.sh "$WORK"
VERSION=$(node -p 'require("./node/package.json").version')
TARBALL="$WORK/agentstate-node-$VERSION.tgz"
PLATFORM_TARBALL="$WORK/agentstate-node-linux-x64-gnu-$VERSION.tgz"
echo "   $TARBALL ($(du -h "$TARBALL" | cut -f1)), $PLATFORM_TARBALL ($(du -h "$PLATFORM_TARBALL" | cut -f1))"

echo "== install: the two tarballs into a fresh project, no cargo on PATH"
PROJECT=$(mktemp -d "${TMPDIR:-/tmp}/agentstate-node-test.XXXXXX")
trap 'rm -rf "$PROJECT"' EXIT
cp node/test/package.json node/test/tsconfig.json node/test/*.mjs node/test/types.ts \
  node/test/crosslang.py node/test/lgjs_store_deselected.txt node/bench/bench.mjs "$PROJECT/"
PY="${AGENTSTATE_PYTHON:-$CARGO_TARGET_DIR/python/venv/bin/python}"
if [ -x "$PY" ] && "$PY" -c 'import agentstate.openai_agents, agentstate.langgraph' 2>/dev/null; then
  export AGENTSTATE_PYTHON="$PY"
else
  echo "   cross-language: SKIPPED (no Python with the agentstate wheel: run scripts/test-python.sh first)"
  unset AGENTSTATE_PYTHON
fi
# LangGraph.js' store tests: the newest commit of langgraphjs this project could read (its
# libs/checkpoint is 1.1.5; the store API they test is 1.2.2's too).
LGJS_TESTS_COMMIT=f8bdf16d4fe23a79e945ea5dc6f86bbf09abb77d
LGJS_TESTS=(store vector namespace)
mkdir -p "$PROJECT/lgjs-suite/src/tests"
for t in "${LGJS_TESTS[@]}"; do
  f="libs/checkpoint/src/tests/$t.test.ts"
  if [ -n "${LGJS_SUITE:-}" ]; then
    cp "$LGJS_SUITE/$f" "$PROJECT/lgjs-suite/src/tests/"
  elif ! curl -fsSL --max-time 30 "https://raw.githubusercontent.com/langchain-ai/langgraphjs/$LGJS_TESTS_COMMIT/$f" \
      -o "$PROJECT/lgjs-suite/src/tests/$t.test.ts"; then
    rm -rf "$PROJECT/lgjs-suite"
    break
  fi
done
NOCARGO_PATH=$(printf '%s' "$PATH" | tr ':' '\n' | grep -v -e '\.cargo/bin' -e '/rustup' | paste -sd: -)
(
  cd "$PROJECT"
  export PATH="$NOCARGO_PATH"
  ! command -v cargo >/dev/null || { echo "error: cargo is still on PATH" >&2; exit 1; }
  npm install --silent --no-audit --no-fund "$TARBALL" "$PLATFORM_TARBALL"
  npm install --silent --no-audit --no-fund
  # The addon is the platform package's: the main package carries none.
  [ ! -e node_modules/@agentstate/node/agentstate.node ] || { echo "error: the main tarball carries an addon" >&2; exit 1; }
  node -e 'const p = require.resolve("@agentstate/node-linux-x64-gnu"); require("@agentstate/node"); console.log("   addon: " + p)'
)

cd "$PROJECT"
export PATH="$NOCARGO_PATH"
echo "== 1. our tests (node --test)"
node --test --test-concurrency=2 ./*.test.mjs
echo "== 2. tsc --noEmit against the declared types (ESM and CommonJS; two TypeScript majors)"
cp types.ts types.cts
for tsc in node_modules/typescript/bin/tsc node_modules/typescript-prev/bin/tsc; do
  echo "   TypeScript $(node "$tsc" --version)"
  node "$tsc" -p tsconfig.json
done
echo "== 3. @langchain/langgraph-checkpoint-validation against AgentStateSaver"
npx --no-install vitest run --globals validation.spec.mjs --reporter=dot
echo "== 4. the validation suite with a broken saver must fail"
SAVER=node_modules/@agentstate/node/lib/saver.js
cp "$SAVER" saver.orig
sed -i "s|if (stored.startsWith('json:')) return JSON.parse(stored.slice(5));|if (stored.startsWith('json:')) return null;|" "$SAVER"
grep -q "return null;" "$SAVER" || { echo "error: could not plant the defect" >&2; exit 1; }
if npx --no-install vitest run --globals validation.spec.mjs --reporter=dot >/dev/null 2>&1; then
  echo "error: the validation suite passed a saver that decodes every value as null" >&2
  exit 1
fi
echo "   failed, as it must"
cp saver.orig "$SAVER"
if [ -d lgjs-suite ]; then
  echo "== 5. LangGraph.js' store tests against AgentStateStore"
  npx --no-install vitest run --globals --config lgjs-store.vitest.config.mjs --reporter=dot
  echo "== 6. the store tests with a broken store must fail"
  STORE=node_modules/@agentstate/node/lib/memory-store.js
  cp "$STORE" store.orig
  sed -i "s|const it = { value: r.value,|const it = { value: {},|" "$STORE"
  grep -q "const it = { value: {}," "$STORE" || { echo "error: could not plant the defect" >&2; exit 1; }
  if npx --no-install vitest run --globals --config lgjs-store.vitest.config.mjs --reporter=dot >/dev/null 2>&1; then
    echo "error: LangGraph.js' store tests passed a store that reads every value as {}" >&2
    exit 1
  fi
  echo "   failed, as it must"
  cp store.orig "$STORE"
else
  echo "SKIPPED LangGraph.js' store tests: github.com unreachable and no LGJS_SUITE (a langgraphjs checkout at $LGJS_TESTS_COMMIT)"
fi
if [ "${BENCH:-}" = 1 ]; then
  echo "== bench: the adapters beside MemorySaver / MemorySession"
  node bench.mjs
fi
echo "== node: all passed in $(( $(date +%s) - start ))s"
