#!/usr/bin/env bash
# Builds the documentation site (book.toml: README, docs/, ARCHITECTURE, BENCHMARKS,
# CHANGELOG) into target/book and checks, offline, every link of the built pages to another
# page and to a heading's anchor (lychee); exit 2 names each broken link. Installs the pinned
# mdbook and lychee into target/tools from crates.io when they are not there yet.
# Usage: scripts/docs.sh            then open target/book/index.html
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
install lychee 0.24.2 no-default-features   # no TLS: the check never leaves the machine
# The site's sources in the repository's own layout, so relative links need no rewriting.
src=target/book-src
rm -rf "$src" && mkdir -p "$src/python"
cp book/SUMMARY.md README.md CHANGELOG.md ARCHITECTURE.md BENCHMARKS.md "$src/"
cp -r docs "$src/docs"
cp python/README.md "$src/python/"
mdbook build
lychee --offline --include-fragments --no-progress --root-dir "$PWD/target/book" \
  'target/book/**/*.html'
echo "docs: target/book/index.html"
