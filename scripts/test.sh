#!/usr/bin/env bash
# The whole test suite, as CI runs it: style gates, the Rust tests (unit,
# property, and the real binary through exec, stdio, restarts, kill -9, full
# and read-only disks), then differential conformance against the Python SDK.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --all-targets --quiet -- -D warnings
cargo test --quiet
scripts/conformance.sh
