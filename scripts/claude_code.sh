#!/usr/bin/env bash
# Installs (once) the real Claude Code, pinned, into target/claude-code and
# prints its binary's path: the tests drive it offline against a scripted
# Messages API on loopback (tests/python/test_claude_code.py).
set -euo pipefail
cd "$(dirname "$0")/.."
version=2.1.332
prefix=target/claude-code
bin="$PWD/$prefix/node_modules/.bin/claude"
if [ ! -x "$bin" ] || ! "$bin" --version 2>/dev/null | grep -q "^$version "; then
  mkdir -p "$prefix"
  npm install --prefix "$prefix" --silent --no-audit --no-fund "@anthropic-ai/claude-code@$version" >&2
fi
echo "$bin"
