#!/usr/bin/env bash
# Checks that ARCHITECTURE.md names only what exists. Exit 1, naming the offenders, when:
# - a path in backticks (`src/...`, `lua/...`, `python/...`, `tests/...`, `scripts/...`,
#   `examples/...`, or a top-level file such as `README.md`) does not exist;
# - an item named as `path::item` (or `path::a::b`: each name in turn) is not defined in that
#   file, or in a file under that folder: Rust `fn|struct|enum|const|static|type|mod|trait|
#   union NAME` or `macro_rules! NAME`, Lua `local function NAME`, Python `def|class NAME`.
#   Tests are named the same way (`tests/it/x.rs::test_fn`, `src/x.rs::tests::test_fn`,
#   `python/tests/test_x.py::test_name`), so a renamed or removed test fails here;
# - a bare file name in the code map (`sessions.rs`) is not a file under the folder its
#   entry's heading names (or, under a heading naming none, a file the repository tracks);
# - a bullet of "## Invariants" names no test (`path::item` under a test path, or a
#   `src/...::tests::...`) and no `scripts/check-*.sh`; ARCHITECTURE.md must have that
#   section, another document (docs/architecture-*.md) is checked only if it has one.
# Usage: scripts/check-code-map.sh [FILE]   (default ARCHITECTURE.md)
set -euo pipefail
cd "$(dirname "$0")/.."
doc=${1:-ARCHITECTURE.md}
status=0
fail() { echo "code map: $1" >&2; status=1; }

# The document without its fenced code blocks.
prose=$(awk '/^```/ { fence = !fence; next } !fence' "$doc")

# Every backticked span that names a path of the repository.
spans=$(grep -o '`[^`]*`' <<<"$prose" | tr -d '`' \
  | grep -E '^((src|lua|python|tests|scripts|examples)/[A-Za-z0-9_./-]*|README\.md|BENCHMARKS\.md|ARCHITECTURE\.md|Cargo\.toml|Dockerfile|docker-compose\.yml)(::[A-Za-z_][A-Za-z0-9_]*)*$' \
  | sort -u || true)

# defined FILE-OR-FOLDER NAME: NAME is defined there.
defined() {
  local where=$1 name=$2
  local rs="\\b(fn|struct|enum|const|static|type|mod|trait|union)[[:space:]]+${name}\\b|macro_rules![[:space:]]*${name}\\b"
  local lua="(^|[[:space:]])(local[[:space:]]+)?function[[:space:]]+${name}\\b"
  local py="^[[:space:]]*((async[[:space:]]+)?def|class)[[:space:]]+${name}\\b"
  local files
  if [ -d "$where" ]; then files=$(find "$where" -type f \( -name '*.rs' -o -name '*.lua' -o -name '*.py' -o -name '*.pyi' \)); else files=$where; fi
  local f
  for f in $files; do
    case $f in
      *.rs) grep -qE "$rs" "$f" && return 0 ;;
      *.lua) grep -qE "$lua" "$f" && return 0 ;;
      *.py | *.pyi) grep -qE "$py" "$f" && return 0 ;;
    esac
  done
  return 1
}

while IFS= read -r span; do
  [ -n "$span" ] || continue
  path=${span%%::*}
  if [ ! -e "$path" ]; then
    fail "\`$span\`: no such path $path"
    continue
  fi
  [ "$path" != "$span" ] || continue
  rest=${span#*::}
  IFS=':' read -r -a names <<<"${rest//::/:}"
  for name in "${names[@]}"; do
    defined "$path" "$name" || fail "\`$span\`: $name is not defined in $path"
  done
done <<<"$spans"

# In the code map, a bare file name (`sessions.rs`) is a file under the folder its entry's
# heading names (`### `src/scripts/``), or, under a heading naming no folder, one the
# repository tracks; a bare `name.lua` is `lua/name.lua`, a bare `README.md` a top-level file.
codemap=$(awk '/^## / { on = ($0 == "## Code map"); next } on' <<<"$prose")
dirs=""
while IFS= read -r line; do
  if [[ $line == "### "* ]]; then
    dirs=$(grep -o '`[^`]*/`' <<<"$line" | tr -d '`' || true)
    continue
  fi
  for name in $(grep -o '`[A-Za-z0-9_.-]*\.\(rs\|lua\|py\|pyi\|sh\|txt\|toml\|md\)`' <<<"$line" | tr -d '`'); do
    found=""
    # A script is named by its file name anywhere; a top-level file by its name.
    { [[ $name == *.lua ]] && [ -f "lua/$name" ]; } && found=1
    [ -f "$name" ] && found=1
    if [ -n "$found" ]; then
      :
    elif [ -n "$dirs" ]; then
      for d in $dirs; do
        [ -n "$(find "$d" -name "$name" -print -quit 2>/dev/null)" ] && found=1
      done
    else
      git ls-files | grep -q "\(^\|/\)${name//./\\.}\$" && found=1
    fi
    [ -n "$found" ] || fail "\`$name\`: no such file${dirs:+ under $(echo $dirs)}"
  done
done <<<"$codemap"

# Every invariant names what checks it.
invariants=$(awk '/^## / { on = ($0 == "## Invariants"); next } on' <<<"$prose")
[ -n "$invariants" ] || [ "$(basename "$doc")" != ARCHITECTURE.md ] || fail "no \"## Invariants\" section"
bullets=$(awk '/^- / { if (b != "") print b; b = $0; next } /^  / && b != "" { b = b " " $0; next } { if (b != "") print b; b = "" } END { if (b != "") print b }' <<<"$invariants")
untested=$(grep -vE '`((tests|python/tests)/[^`]*::[A-Za-z_][A-Za-z0-9_]*|src/[^`]*::tests::[A-Za-z_][A-Za-z0-9_]*|scripts/check-[a-z-]+\.sh)`' <<<"$bullets" || true)
while IFS= read -r bullet; do
  [ -z "$bullet" ] || fail "an invariant names no test: ${bullet:0:100}..."
done <<<"$untested"

exit $status
