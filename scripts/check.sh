#!/usr/bin/env bash
# The quick check, for a change before the full suite: minutes, no root, and
# no network once cargo has fetched the crates (it runs --offline when it
# can). The style gates, then every Rust test that mounts nothing: unit and
# property tests, the real binary through exec, stdio, the socket, MCP and
# the CLI, the journal, power loss on the in-memory disk, hostile input.
#
# Left out (scripts/test.sh runs them, as CI does): everything through a FUSE
# mount or a tmpfs (the mount tests, editors, full and read-only disks), the
# failpoints build, the soak, conformance against the Python SDK, the
# integrations under their real clients (MCP, the SDKs, Claude Code,
# PostgreSQL, the page in chromium), the benchmarks' smoke runs, and POSIX
# conformance (pjdfstest, fsx).
set -euo pipefail
cd "$(dirname "$0")/.."
export PROPTEST_RNG_SEED="${PROPTEST_RNG_SEED:-2026120125}"
# Nothing mounted, whoever runs it (tests/common: can_fuse, can_mount); and
# not CI's rule that a skipped test fails.
export MEMFS_QUICK=1
unset CI
offline=()
cargo fetch --locked --offline >/dev/null 2>&1 && offline=(--offline)
started=$(date +%s)
cargo fmt --all -- --check
cargo clippy --locked "${offline[@]}" --workspace --all-targets --quiet -- -D warnings
python3 scripts/layers.py
python3 scripts/long_functions.py
python3 scripts/design_refs.py
mkdir -p target
status=0
cargo test --locked "${offline[@]}" --workspace --quiet > target/check-test.log 2>&1 || status=$?
grep -E 'test result|FAILED|panicked|^error' target/check-test.log || true
if [ "$status" != 0 ]; then
  echo "quick check: cargo test failed (the whole output is in target/check-test.log)" >&2
  exit 1
fi
echo "left out here: every test that mounts (MEMFS_QUICK=1), and what scripts/test.sh runs after cargo test"
echo "quick check passed in $(( $(date +%s) - started )) s; scripts/test.sh runs the full suite"
