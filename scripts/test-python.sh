#!/usr/bin/env bash
# The Python package's tests, from a fresh clone, as a Python user gets it:
#   0. builds the wheel once (scripts/build-wheel.sh: maturin --zig for manylinux2014; the
#      binding, the `agentstate` command and the spill daemon in one extension; checked there
#      by auditwheel, scripts/check-glibc.sh and twine, the sdist by twine), creates a fresh
#      venv and installs the pinned tools and frameworks (python/tests/requirements.txt) and
#      the wheel into it with no cargo on PATH; everything below runs from that installed
#      wheel, cargo off PATH, and the spill daemon the tests start is the wheel's own
#      `agentstate` command,
# then runs
#   1. our tests (python/tests: binding, first contact, Redis-loss survival with a real
#      `agentstate spill`, two processes interleaving), and a user's test file
#      (python/examples) with our pytest plugin (`pytest -p agentstate.testing`),
#   2. openai-agents' own tests/memory suite from its sdist, SQLiteSession swapped for
#      AgentStateSession,
#   3. strands-agents' own session-manager and agent tests from its sdist, the mocked
#      repository swapped for AgentStateSessionRepository,
#   4. LangGraph's checkpointer conformance suite (langgraph-checkpoint-conformance: 81 cases)
#      against AgentStateSaver, on a single node and on the 3-master cluster fixture, and
#      LangGraph's store tests (tests/test_store.py from the langgraph-checkpoint sdist) with
#      InMemoryStore swapped for AgentStateStore,
#   5. Google ADK's session contract tests (tests/unittests/sessions/test_session_service.py
#      with its _conformance.py backend registry, fetched from github.com/google/adk-python at
#      a pinned commit: the google-adk sdist ships no tests) with AgentStateSessionService
#      registered as one more backend; ADK_SUITE=<folder holding tests/unittests/...> runs a
#      local copy instead (a machine that cannot reach GitHub says SKIPPED without one); and
#      its memory-service tests (tests/unittests/memory/test_in_memory_memory_service.py, at
#      ADK_MEMORY_TESTS_COMMIT) with InMemoryMemoryService swapped for
#      AgentStateMemoryService; ADK_MEMORY_SUITE=<folder holding tests/unittests/memory>
#      runs a local copy instead,
#   6. pydantic-ai-harness' step-persistence tests (tests/step_persistence, fetched from
#      github.com/pydantic/pydantic-ai-harness at a pinned commit: its sdist ships no tests)
#      with InMemoryStepStore and SqliteStepStore swapped for AgentStateStepStore;
#      HARNESS_SUITE=<folder holding tests/step_persistence> runs a local copy instead (a
#      machine that cannot reach GitHub says SKIPPED without one; python/tests/test_pydantic_ai.py
#      still ran). agent-framework-redis ships no tests and its repository's history-provider
#      tests drive a mocked Redis client, so python/tests/test_agent_framework.py covers what
#      they check,
#   7. those suites again with a deliberately broken stand-in, which must fail (the swap is live).
# Deselected framework tests are listed with reasons in python/tests/frameworks/*_deselected.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OPENAI_AGENTS=0.24.0
STRANDS_AGENTS=1.61.1   # 1.62.0's sdist no longer ships tests/
GOOGLE_ADK=2.13.0
ADK_TESTS_COMMIT=11cc093158fed8ad72b40fce0d0bf3d8b2f8aa18   # google/adk-python, with _conformance.py
ADK_MEMORY_TESTS_COMMIT=2049ee68b54ba8b3bc562bbfdc489a1190c852f6   # google/adk-python, its 42 pass on 2.13.0
LANGGRAPH_CHECKPOINT=4.3.2   # as pinned in python/tests/requirements.txt
HARNESS_TESTS_COMMIT=1297012524c80dc4b67eb3b193691ffe9a0f815a   # pydantic/pydantic-ai-harness, run against 0.62.0

scripts/ensure-tools.sh redis-server redis-cli
command -v python3 >/dev/null || { echo "error: python3 (>= 3.9) is required" >&2; exit 1; }
if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
  scripts/ensure-tools.sh python3-venv >/dev/null 2>&1 || true
  python3 -c 'import venv, ensurepip' || { echo "error: python3 venv is missing: sudo apt-get install -y python3-venv" >&2; exit 1; }
fi
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
WORK="$CARGO_TARGET_DIR/python"
VENV="$WORK/venv"               # the user's environment, made afresh each run
PIP="python -m pip --disable-pip-version-check -q"
mkdir -p "$WORK/sdists"

echo "== build: the wheel for manylinux2014 and its checks (scripts/build-wheel.sh)"
rm -rf "$WORK/wheels"
scripts/build-wheel.sh "$WORK/wheels"
WHEEL=$(ls "$WORK"/wheels/agentstate_redis-*.whl)

echo "== install: a fresh venv, the frameworks and the wheel, with no cargo on PATH"
export PATH
PATH=$(printf '%s' "$PATH" | tr ':' '\n' | grep -v '/\.cargo/' | paste -sd: -)
if command -v cargo >/dev/null; then
  echo "error: cargo is still on PATH ($(command -v cargo)): the wheel must install without it" >&2
  exit 1
fi
rm -rf "$VENV"
python3 -m venv "$VENV"
export VIRTUAL_ENV="$VENV" PATH="$VENV/bin:$PATH"
$PIP install -r python/tests/requirements.txt
$PIP install --no-deps --no-index "$WHEEL"
# The tests import the installed package, never the source folder; the daemon they start is
# the wheel's own command.
(cd / && python -c 'import agentstate, sys; f = agentstate.__file__; sys.exit(0 if "site-packages" in f else "agentstate imported from " + f)')
export AGENTSTATE_BIN="$VENV/bin/agentstate"
"$AGENTSTATE_BIN" --version

# A framework's sdist, unpacked once per version: prints its folder.
sdist() { # name version dir
  local dir="$WORK/sdists/$3"
  if [ ! -d "$dir/tests" ]; then
    $PIP download --no-deps --no-binary :all: "$1==$2" -d "$WORK/sdists" >/dev/null
    tar -xzf "$WORK/sdists/$3.tar.gz" -C "$WORK/sdists"
  fi
  echo "$dir"
}
OPENAI_DIR=$(sdist openai-agents "$OPENAI_AGENTS" "openai_agents-$OPENAI_AGENTS")
STRANDS_DIR=$(sdist strands-agents "$STRANDS_AGENTS" "strands_agents-$STRANDS_AGENTS")
STRANDS_TESTS=(tests/strands/session/test_repository_session_manager.py
  tests/strands/agent/test_agent.py tests/strands/agent/test_agent_delegation.py
  tests/strands/models/routing/test_router.py)
# google-adk's sdist (its pytest settings, the library at the pinned version) plus its session
# contract tests from GitHub at ADK_TESTS_COMMIT (or a local copy in $ADK_SUITE): prints the
# folder, or nothing when the tests cannot be had.
adk_suite() {
  local dir="$WORK/sdists/google_adk-$GOOGLE_ADK" raw="https://raw.githubusercontent.com/google/adk-python/$ADK_TESTS_COMMIT"
  [ -f "$dir/pyproject.toml" ] || {
    $PIP download --no-deps --no-binary :all: "google-adk==$GOOGLE_ADK" -d "$WORK/sdists" >/dev/null
    tar -xzf "$WORK/sdists/google_adk-$GOOGLE_ADK.tar.gz" -C "$WORK/sdists"
  }
  if [ -n "${ADK_SUITE:-}" ]; then
    rm -rf "$dir/tests" && cp -r "$ADK_SUITE/tests" "$dir/tests"
  elif [ ! -f "$dir/tests/unittests/sessions/test_session_service.py" ]; then
    local f
    for f in __init__.py unittests/__init__.py unittests/sessions/__init__.py \
        unittests/sessions/_conformance.py unittests/sessions/test_session_service.py \
        unittests/integrations/__init__.py unittests/integrations/redis/__init__.py \
        unittests/integrations/redis/_fake_redis.py; do
      mkdir -p "$(dirname "$dir/tests/$f")"
      curl -fsSL --max-time 30 "$raw/tests/$f" -o "$dir/tests/$f" || { rm -rf "$dir/tests"; return 0; }
    done
  fi
  echo "$dir"
}
ADK_DIR=$(adk_suite)
ADK_TESTS=(tests/unittests/sessions/test_session_service.py)
# ADK's memory-service tests at ADK_MEMORY_TESTS_COMMIT (or a local copy in
# $ADK_MEMORY_SUITE), into the google-adk sdist's folder (after adk_suite, which may replace
# its tests/): prints that folder, or nothing when they cannot be had.
adk_memory_suite() {
  local dir="$WORK/sdists/google_adk-$GOOGLE_ADK" raw="https://raw.githubusercontent.com/google/adk-python/$ADK_MEMORY_TESTS_COMMIT"
  local f files=(__init__.py unittests/__init__.py unittests/memory/__init__.py
    unittests/memory/test_in_memory_memory_service.py)
  [ -f "$dir/pyproject.toml" ] || {
    $PIP download --no-deps --no-binary :all: "google-adk==$GOOGLE_ADK" -d "$WORK/sdists" >/dev/null
    tar -xzf "$WORK/sdists/google_adk-$GOOGLE_ADK.tar.gz" -C "$WORK/sdists"
  }
  if [ -n "${ADK_MEMORY_SUITE:-}" ]; then
    for f in "${files[@]}"; do
      mkdir -p "$(dirname "$dir/tests/$f")"
      if [ -f "$ADK_MEMORY_SUITE/tests/$f" ]; then cp "$ADK_MEMORY_SUITE/tests/$f" "$dir/tests/$f"; else touch "$dir/tests/$f"; fi
    done
  elif [ ! -f "$dir/tests/unittests/memory/test_in_memory_memory_service.py" ]; then
    for f in "${files[@]}"; do
      mkdir -p "$(dirname "$dir/tests/$f")"
      curl -fsSL --max-time 30 "$raw/tests/$f" -o "$dir/tests/$f" || { rm -rf "$dir/tests/unittests/memory"; return 0; }
    done
  fi
  echo "$dir"
}
ADK_MEMORY_DIR=$(adk_memory_suite)
ADK_MEMORY_TESTS=(tests/unittests/memory/test_in_memory_memory_service.py)
LG_CHECKPOINT_DIR=$(sdist langgraph-checkpoint "$LANGGRAPH_CHECKPOINT" "langgraph_checkpoint-$LANGGRAPH_CHECKPOINT")
LG_STORE_TESTS=(tests/test_store.py)
# pydantic-ai-harness' step-persistence tests at HARNESS_TESTS_COMMIT (or a local copy in
# $HARNESS_SUITE), run against the pinned pydantic-ai-harness: prints their folder, or
# nothing when they cannot be had.
harness_suite() {
  local dir="$WORK/sdists/pydantic_ai_harness-tests-$HARNESS_TESTS_COMMIT" repo
  if [ -n "${HARNESS_SUITE:-}" ]; then
    dir="$WORK/sdists/pydantic_ai_harness-tests-local"
    rm -rf "$dir" && mkdir -p "$dir/tests"
    cp "$HARNESS_SUITE"/tests/__init__.py "$HARNESS_SUITE"/tests/conftest.py "$dir/tests/"
    cp -r "$HARNESS_SUITE/tests/step_persistence" "$dir/tests/"
  elif [ ! -f "$dir/tests/step_persistence/test_step_persistence.py" ]; then
    # The commit is upstream's; a fork that mirrors it (where it was found) is the fallback.
    for repo in pydantic/pydantic-ai-harness itsakhilyou/pydantic-ai-harness; do
      local f raw="https://raw.githubusercontent.com/$repo/$HARNESS_TESTS_COMMIT"
      for f in __init__.py conftest.py step_persistence/__init__.py \
          step_persistence/test_step_persistence.py step_persistence/test_sqlite_and_media.py; do
        mkdir -p "$(dirname "$dir/tests/$f")"
        curl -fsSL --max-time 30 "$raw/tests/$f" -o "$dir/tests/$f" || { rm -rf "$dir"; continue 2; }
      done
      break
    done
    [ -d "$dir" ] || return 0
  fi
  echo "$dir"
}
HARNESS_DIR=$(harness_suite)
HARNESS_TESTS=(tests/step_persistence)
export PYTHONPATH="$ROOT/python/tests/frameworks"
PYTEST="python -m pytest -p no:cacheprovider -p no:warnings -q"

echo "== agentstate's Python tests (PostgreSQL: the tests' own server, as scripts/test.sh finds or starts it)"
eval "$(scripts/test-postgres.sh)"
$PYTEST python/tests

echo "== a user's own tests with the pytest plugin (pytest -p agentstate.testing)"
(cd python/examples && $PYTEST -p agentstate.testing test_my_agent.py)

echo "== openai-agents $OPENAI_AGENTS: tests/memory with SQLiteSession -> AgentStateSession"
(cd "$OPENAI_DIR" && $PYTEST -p agentstate_openai_swap tests/memory)

echo "== strands-agents $STRANDS_AGENTS: session manager and agent tests with MockedSessionRepository -> AgentStateSessionRepository"
(cd "$STRANDS_DIR" && $PYTEST -p agentstate_strands_swap "${STRANDS_TESTS[@]}")

echo "== langgraph-checkpoint-conformance: AgentStateSaver on a single node, then on the 3-master cluster"
python python/tests/frameworks/langgraph_conformance.py
python python/tests/frameworks/langgraph_conformance.py --cluster

echo "== langgraph-checkpoint $LANGGRAPH_CHECKPOINT: its store tests with InMemoryStore -> AgentStateStore"
(cd "$LG_CHECKPOINT_DIR" && $PYTEST -p agentstate_langgraph_store_swap "${LG_STORE_TESTS[@]}")

if [ -n "$ADK_DIR" ]; then
  echo "== google-adk $GOOGLE_ADK: its session contract tests with AgentStateSessionService in _conformance.BACKENDS"
  (cd "$ADK_DIR" && $PYTEST -p agentstate_adk_swap "${ADK_TESTS[@]}")
else
  echo "SKIPPED google-adk session contract suite: github.com unreachable and no ADK_SUITE (python/tests/test_adk.py still ran)"
fi
if [ -n "$ADK_MEMORY_DIR" ]; then
  echo "== google-adk $GOOGLE_ADK: its memory-service tests with InMemoryMemoryService -> AgentStateMemoryService"
  (cd "$ADK_MEMORY_DIR" && $PYTEST -p agentstate_adk_memory_swap "${ADK_MEMORY_TESTS[@]}")
else
  echo "SKIPPED google-adk memory-service suite: github.com unreachable and no ADK_MEMORY_SUITE (python/tests/test_memory.py still ran)"
fi

if [ -n "$HARNESS_DIR" ]; then
  echo "== pydantic-ai-harness: its step-persistence tests with InMemoryStepStore, SqliteStepStore -> AgentStateStepStore"
  (cd "$HARNESS_DIR" && $PYTEST -o anyio_mode=auto -p agentstate_harness_swap "${HARNESS_TESTS[@]}")
else
  echo "SKIPPED pydantic-ai-harness step-persistence suite: github.com unreachable and no HARNESS_SUITE (python/tests/test_pydantic_ai.py still ran)"
fi

echo "== the swap is live: the same suites with a deliberately broken stand-in must fail"
# A suite rejects a broken stand-in only when (check_broken.py): the run ended in failed tests
# (exit 1, not a crash or a collection error), at least MIN_USED tests used the stand-in
# (constructed it; for LangGraph: called the saver), at least MIN_FAILED failed, and every
# failed test is one that used it. The floors are what the pinned suites measure (a drop
# means the swap reaches less of a suite: find out why before lowering one):
#   openai-agents 0.24.0 tests/memory:           94 tests construct the session, 73 fail
#   strands-agents 1.61.1 (the four files above): 64 tests construct the repository, 15 fail
#   langgraph-checkpoint-conformance 0.0.2:       81 cases call the saver, 3 fail
#   langgraph-checkpoint 4.3.2 tests/test_store.py: 86 tests construct the store, 3 fail
#   google-adk 2.13.0 session contract tests:     31 tests construct the service, 5 fail
#   google-adk 2.13.0 memory-service tests:       35 tests construct the service, 4 fail
#   pydantic-ai-harness 0.62.0 tests/step_persistence: 52 tests construct the store, 17 fail
CHECK_BROKEN="python $ROOT/python/tests/frameworks/check_broken.py"
broken() { # label dir plugin min_used min_failed tests...
  local label=$1 dir=$2 plugin=$3 min_used=$4 min_failed=$5; shift 5
  local log="$WORK/broken-$label.log" record="$WORK/broken-$label" rc=0
  rm -rf "$record"
  (cd "$dir" && AGENTSTATE_SWAP_BROKEN=1 AGENTSTATE_SWAP_RECORD="$record" $PYTEST -p "$plugin" "$@" >"$log" 2>&1) || rc=$?
  $CHECK_BROKEN "$label" "$record" "$rc" "$min_used" "$min_failed" "$log"
}
broken openai-agents "$OPENAI_DIR" agentstate_openai_swap 94 73 tests/memory
broken strands-agents "$STRANDS_DIR" agentstate_strands_swap 64 15 "${STRANDS_TESTS[@]}"
LG_LOG="$WORK/broken-langgraph.log" LG_RECORD="$WORK/broken-langgraph" LG_RC=0
rm -rf "$LG_RECORD"
AGENTSTATE_SWAP_BROKEN=1 AGENTSTATE_SWAP_RECORD="$LG_RECORD" python python/tests/frameworks/langgraph_conformance.py >"$LG_LOG" 2>&1 || LG_RC=$?
$CHECK_BROKEN langgraph-conformance "$LG_RECORD" "$LG_RC" 81 3 "$LG_LOG"
broken langgraph-store "$LG_CHECKPOINT_DIR" agentstate_langgraph_store_swap 86 3 "${LG_STORE_TESTS[@]}"
if [ -n "$ADK_DIR" ]; then
  broken google-adk "$ADK_DIR" agentstate_adk_swap 31 5 "${ADK_TESTS[@]}"
fi
if [ -n "$ADK_MEMORY_DIR" ]; then
  broken google-adk-memory "$ADK_MEMORY_DIR" agentstate_adk_memory_swap 35 4 "${ADK_MEMORY_TESTS[@]}"
fi
if [ -n "$HARNESS_DIR" ]; then
  PYTEST="$PYTEST -o anyio_mode=auto" broken pydantic-ai-harness "$HARNESS_DIR" agentstate_harness_swap 52 17 "${HARNESS_TESTS[@]}"
fi
