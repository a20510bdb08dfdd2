#!/usr/bin/env bash
# Makes sure the commands named as arguments are on PATH (default: redis-server), installing
# Debian's package that provides each (its own name; redis-cli and redis-benchmark come in
# redis-tools) when one is missing and we can (root or sudo), and otherwise saying exactly
# what to run (node comes in nodejs, objdump in binutils). Used by scripts/test.sh, scripts/demo.sh, .ci/run.
set -euo pipefail
missing=()
for tool in "${@:-redis-server}"; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
[ ${#missing[@]} -eq 0 ] && exit 0
packages=()
for tool in "${missing[@]}"; do
  case "$tool" in
    redis-cli|redis-benchmark) packages+=(redis-tools) ;;
    node) packages+=(nodejs) ;;
    objdump|ar) packages+=(binutils) ;;
    *) packages+=("$tool") ;;
  esac
done
echo "not on PATH: ${missing[*]}; installing Debian's package(s) ${packages[*]}..." >&2
if [ "$(id -u)" = 0 ]; then
  apt-get update -qq && apt-get install -y -qq "${packages[@]}" >/dev/null
elif command -v sudo >/dev/null 2>&1; then
  sudo apt-get update -qq && sudo apt-get install -y -qq "${packages[@]}" >/dev/null
fi
for tool in "${missing[@]}"; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "error: could not install $tool. Run: sudo apt-get install -y ${packages[*]}" >&2
    echo "       (on macOS: brew install redis openssl), then run this command again." >&2
    exit 1
  fi
done
