#!/usr/bin/env bash
# The Python package's tests (issues 12, 23), from a fresh clone, as a Python user gets it:
#   0. builds the wheel once (`maturin build --release`: the binding, the `agentstate`
#      command and the spill daemon in one extension), creates a fresh venv and installs the
#      pinned tools and frameworks (python/tests/requirements.txt) and the wheel into it with
#      no cargo on PATH; everything below runs from that installed wheel, cargo off PATH,
#      and the spill daemon the tests start is the wheel's own `agentstate` command,
# then runs
#   1. our tests (python/tests: binding, first contact, Redis-loss survival with a real
#      `agentstate spill`, two processes interleaving), and a user's test file
#      (python/examples) with our pytest plugin (`pytest -p agentstate.testing`),
#   2. openai-agents' own tests/memory suite from its sdist, SQLiteSession swapped for
#      AgentStateSession,
#   3. strands-agents' own session-manager and agent tests from its sdist, the mocked
#      repository swapped for AgentStateSessionRepository,
#   4. LangGraph's checkpointer conformance suite (langgraph-checkpoint-conformance: 81 cases)
#      against AgentStateSaver, on a single node and on the 3-master cluster fixture,
#   5. those suites again with a deliberately broken stand-in, which must fail (the swap is live).
# Deselected framework tests are listed with reasons in python/tests/frameworks/*_deselected.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OPENAI_AGENTS=0.24.0
STRANDS_AGENTS=1.61.1   # 1.62.0's sdist no longer ships tests/

scripts/ensure-tools.sh redis-server redis-cli
command -v python3 >/dev/null || { echo "error: python3 (>= 3.9) is required" >&2; exit 1; }
if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
  scripts/ensure-tools.sh python3-venv >/dev/null 2>&1 || true
  python3 -c 'import venv, ensurepip' || { echo "error: python3 venv is missing: sudo apt-get install -y python3-venv" >&2; exit 1; }
fi
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
WORK="$CARGO_TARGET_DIR/python"
BUILD_VENV="$WORK/build-venv"   # maturin only, kept between runs
VENV="$WORK/venv"               # the user's environment, made afresh each run
PIP="python -m pip --disable-pip-version-check -q"
mkdir -p "$WORK/sdists"

echo "== build: the wheel (maturin build --release)"
[ -x "$BUILD_VENV/bin/python" ] || python3 -m venv "$BUILD_VENV"
"$BUILD_VENV/bin/python" -m pip --disable-pip-version-check -q install "$(grep '^maturin==' python/tests/requirements.txt)"
rm -rf "$WORK/wheels"
(cd python && "$BUILD_VENV/bin/maturin" build --release --locked --quiet --out "$WORK/wheels")
WHEEL=$(ls "$WORK"/wheels/agentstate-*.whl)

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
export PYTHONPATH="$ROOT/python/tests/frameworks"
PYTEST="python -m pytest -p no:cacheprovider -p no:warnings -q"

echo "== agentstate's Python tests"
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

echo "== the swap is live: the same suites with a deliberately broken stand-in must fail"
broken() { # label dir plugin tests...
  local label=$1 dir=$2 plugin=$3; shift 3
  local log="$WORK/broken-$label.log"
  if (cd "$dir" && AGENTSTATE_SWAP_BROKEN=1 $PYTEST -p "$plugin" "$@" >"$log" 2>&1); then
    echo "error: $label's suite passed with a broken stand-in: the swap is not live ($log)" >&2
    exit 1
  fi
  grep -q "constructed the BROKEN" "$log" || { echo "error: $label: broken stand-in not loaded ($log)" >&2; exit 1; }
  echo "ok: $label's suite rejects the broken stand-in ($(grep -Eo '[0-9]+ failed' "$log" | tail -1) tests; log $log)"
}
broken openai-agents "$OPENAI_DIR" agentstate_openai_swap tests/memory
broken strands-agents "$STRANDS_DIR" agentstate_strands_swap "${STRANDS_TESTS[@]}"
LG_LOG="$WORK/broken-langgraph.log"
if AGENTSTATE_SWAP_BROKEN=1 python python/tests/frameworks/langgraph_conformance.py >"$LG_LOG" 2>&1; then
  echo "error: the LangGraph conformance suite passed with a broken saver: the run is not live ($LG_LOG)" >&2
  exit 1
fi
grep -q "constructed the BROKEN" "$LG_LOG" || { echo "error: langgraph: broken saver not loaded ($LG_LOG)" >&2; exit 1; }
echo "ok: the LangGraph conformance suite rejects the broken saver ($(grep -Eo '[0-9]+ failed' "$LG_LOG" | tail -1) cases; log $LG_LOG)"
