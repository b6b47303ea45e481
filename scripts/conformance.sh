#!/usr/bin/env bash
# Differential conformance against the Python SDK's BetaLocalFilesystemMemoryTool.
# Makes a venv with the pinned `anthropic` package, builds memfs, and runs the
# same command sequences through both. Fails on any difference that
# docs/SEMANTICS.md does not list.
#   usage: scripts/conformance.sh [--random N] [--seed S]
set -euo pipefail
cd "$(dirname "$0")/.."
ANTHROPIC_VERSION=2.14.0
venv=${MEMFS_CONFORMANCE_VENV:-target/conformance-venv}
if ! "$venv/bin/python" -c "import anthropic, sys; sys.exit(anthropic.__version__ != '$ANTHROPIC_VERSION')" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "anthropic==$ANTHROPIC_VERSION"
fi
cargo build --release --quiet
exec "$venv/bin/python" scripts/conformance.py target/release/memfs docs/SEMANTICS.md "$@"
