#!/usr/bin/env bash
# Differential conformance against the Python SDK's BetaLocalFilesystemMemoryTool.
# Uses the venv of scripts/pyenv.sh (pinned `anthropic`), builds memfs, and runs the
# same command sequences through both. Fails on any difference that
# docs/SEMANTICS.md does not list.
#   usage: scripts/conformance.sh [--random N] [--seed S] [--show]
set -euo pipefail
cd "$(dirname "$0")/.."
python=$(scripts/pyenv.sh)   # the pinned anthropic package, among others
cargo build --locked --release --quiet
exec "$python" scripts/conformance.py target/release/memfs docs/SEMANTICS.md "$@"
