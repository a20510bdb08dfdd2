#!/usr/bin/env bash
# Checks the invariants of ARCHITECTURE.md ("## Invariants") that a grep can check. Exit 1, naming
# the offending lines, when one is broken.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
fail() { echo "architecture: $1" >&2; echo "$2" >&2; status=1; }

# Only src/scripts/ builds an EVALSHA: `ScriptCall` cannot be constructed elsewhere, and this
# catches a raw EVALSHA command built beside it.
hits=$(grep -rn '"EVALSHA"\|prepare_invoke\|invoke_script\|invoke_async\|Script::new' src \
  | grep -v "^src/scripts/" | grep -v '^src/cli/bench/measure.rs:.*== "EVALSHA"' || true)
[ -z "$hits" ] || fail "only src/scripts/ may build EVALSHA calls" "$hits"

# Only src/keys.rs formats key names: a partition's hash tag `:{p}` is `:{{{p}}}` in a
# format string.
hits=$(grep -rnE 'format!\(.*:\{\{\{' src | grep -v '^src/keys.rs:' || true)
[ -z "$hits" ] || fail "only src/keys.rs may format key names" "$hits"

# Nothing outside the durable tier's SQLite backend (and `db copy`, which reads a SQLite
# file), the spill daemon and the CLI opens SQLite.
hits=$(grep -rln 'rusqlite' src | grep -v '^src/durable/sqlite/\|^src/durable/copy.rs$\|^src/spill/\|^src/cli/\|^src/error.rs$' || true)
[ -z "$hits" ] || fail "only src/durable/sqlite/, src/durable/copy.rs, src/spill/ and the CLI may use SQLite" "$hits"
if grep -n 'rusqlite' src/error.rs | grep -qv 'cfg(feature = "spill")\|impl From<rusqlite::Error>\|fn from(err: rusqlite::Error)'; then
  fail "src/error.rs may name rusqlite only behind the spill feature" "$(grep -n rusqlite src/error.rs)"
fi

# The web console and the metrics endpoint only read: no Store write, script or restore
# request under src/web/.
hits=$(grep -rnE '\.(append|append_with|append_many|pop_message|replace_message|create_session|close_session|archive|touch|set_pending|set_round_index|set_working|set_working_if_version|delete_working|clear_working|compact|record_usage|checkpoint|put_checkpoint|record_decision|record_outcome|set_user_value|delete_user_value|forget_user|save_state|request_restore|restore_session|wipe_namespace|invoke|invoke_session|graph_put|fork)\(' src/web || true)
[ -z "$hits" ] || fail "src/web/ may only read" "$hits"

# An agent-only build (no spill feature) links no SQLite.
if cargo tree --locked --no-default-features --features tls -e normal --prefix none \
    | grep -q '^rusqlite '; then
  fail "the library without the spill feature must not depend on rusqlite" \
    "cargo tree --no-default-features --features tls -e normal | grep rusqlite"
fi
exit $status
