#!/usr/bin/env bash
# The integrations, driven by the real client packages (pinned in
# tests/python/requirements.txt): memfs mcp with the official `mcp` client,
# and the Python adapter under the `anthropic` SDK's tool runner against a
# mock Messages API on loopback (through a live mount when root with FUSE).
set -euo pipefail
cd "$(dirname "$0")/.."
python=$(scripts/pyenv.sh)
cargo build --release --quiet
MEMFS_BIN="$PWD/target/release/memfs" "$python" -m pytest -q -p no:cacheprovider tests/python "$@"
