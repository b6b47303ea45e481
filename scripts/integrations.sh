#!/usr/bin/env bash
# The integrations, driven by the real client packages (pinned in
# tests/python/requirements.txt): memfs mcp with the official `mcp` client,
# and the Python adapter under the `anthropic` SDK's tool runner against a
# mock Messages API on loopback (through a live mount when root with FUSE),
# the demo, and the TypeScript adapter under @anthropic-ai/sdk's tool runner
# (versions pinned in packages/npm/memfs-memory/package.json; skipped
# without node), and the Python and npm packages installed from what
# scripts/package_python.sh and package_npm.sh build.
set -euo pipefail
cd "$(dirname "$0")/.."
python=$(scripts/pyenv.sh)
cargo build --locked --release --quiet
# A failpoints build, for the tests that stop a host at a chosen step.
cargo build --locked --release --quiet --features failpoints --target-dir target/failpoints
if command -v npm >/dev/null 2>&1; then
  (cd packages/npm/memfs-memory && npm install --silent --no-audit --no-fund && MEMFS_BIN="$OLDPWD/target/release/memfs" npm test --silent)
elif [ "${CI:-}" = true ]; then
  echo "the TypeScript adapter test must run under CI=true, but node and npm are not installed" >&2
  exit 1
else
  echo "SKIPPED the TypeScript adapter test: node and npm are not installed"
fi
# The packages, built as a user installs them (tests/python/test_package.py
# installs the wheel into a clean venv, test_npm_package.py the tarballs into
# a clean npm project).
wheel=$(scripts/package_python.sh)
npm_dir=
claude=
if command -v npm >/dev/null 2>&1; then
  scripts/package_npm.sh >/dev/null
  npm_dir="$PWD/target/npm"
  # The real Claude Code, driven by a scripted model (tests/python/test_claude_code.py).
  claude=$(scripts/claude_code.sh)
fi
CLAUDE_BIN="$claude" MEMFS_WHEEL="$wheel" MEMFS_NPM="$npm_dir" MEMFS_BIN="$PWD/target/release/memfs" "$python" -m pytest -q -p no:cacheprovider tests/python "$@"
