#!/usr/bin/env bash
# The whole test suite, as CI runs it: style gates, the Rust tests (unit,
# property, the real binary through exec, stdio, the socket and the mount,
# editors, restarts, kill -9, full and read-only disks), differential
# conformance against the Python SDK, the integrations under their real
# client packages (MCP, the SDK's tool runner), and POSIX conformance of the mount
# (pjdfstest, fsx; needs root and /dev/fuse, and says so when skipped).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --all-targets --quiet -- -D warnings
cargo test --quiet
scripts/conformance.sh
scripts/integrations.sh
scripts/posix.sh
