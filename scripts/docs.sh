#!/usr/bin/env bash
# Builds the documentation site (book.toml: README, docs/, ARCHITECTURE, BENCHMARKS) into
# target/book/html and checks every link between its pages and to their headings
# (mdbook-linkcheck2); exit 1 names each broken link. Installs the pinned mdbook and
# mdbook-linkcheck2 into target/tools from crates.io when they are not there yet.
# Usage: scripts/docs.sh            then open target/book/html/index.html
set -euo pipefail
cd "$(dirname "$0")/.."
tools=$PWD/target/tools
export PATH=$tools/bin:$PATH
install() { # crate version
  if ! "$1" --version 2>/dev/null | grep -q "$2"; then
    cargo install --quiet --locked --root "$tools" "$1" --version "$2" \
      ${3:+--no-default-features}
  fi
}
install mdbook 0.5.4 no-default-features
install mdbook-linkcheck2 0.13.0
# The site's sources in the repository's own layout, so relative links need no rewriting.
src=target/book-src
rm -rf "$src" && mkdir -p "$src/python"
cp book/SUMMARY.md README.md ARCHITECTURE.md BENCHMARKS.md "$src/"
cp -r docs "$src/docs"
cp python/README.md "$src/python/"
mdbook build
echo "docs: target/book/html/index.html"
