#!/usr/bin/env bash
# The whole test suite, as CI runs it: style gates, the Rust tests (unit,
# property, the real binary through exec, stdio, the socket and the mount,
# editors, restarts, kill -9, full and read-only disks), differential
# conformance against the Python SDK, the integrations under their real
# client packages (MCP, the SDK's tool runner), and POSIX conformance of the mount
# (pjdfstest, fsx; needs root and /dev/fuse, and says so when skipped). The
# benchmarks run in their seconds-long smoke size, so the script cannot rot.
set -euo pipefail
cd "$(dirname "$0")/.."
# Property tests draw their cases from one fixed seed, so that CI is
# deterministic: a failure here is the code's, not the draw's. The longer
# randomized runs are scripts/soak.sh (below, when the store changed).
export PROPTEST_RNG_SEED="${PROPTEST_RNG_SEED:-2026120125}"
# CI builds once from a clean clone: incremental state (13 GB of the debug
# target) would only take disk.
if [ "${CI:-}" = true ]; then export CARGO_INCREMENTAL=0; fi
echo "property tests: PROPTEST_RNG_SEED=$PROPTEST_RNG_SEED"
cargo fmt --all -- --check
cargo clippy --locked --workspace --all-targets --quiet -- -D warnings
cargo clippy --locked --workspace --all-targets --quiet --features failpoints -- -D warnings
# No new import circle between modules (the known ones are in .ci/layers-baseline).
python3 scripts/layers.py
# No function over 60 lines without a reason (the known ones are in .ci/long-functions-baseline).
python3 scripts/long_functions.py
# docs/DESIGN.md names code by item, never by line, and every item it names exists.
python3 scripts/design_refs.py
cargo test --locked --workspace --quiet
# Every disk step failing, once and repeatedly, with a fake kernel checking
# the caches (bounded here; MEMFS_FAILPOINT_CASES=N and MEMFS_FUZZ_CASES=N
# run the property tests longer).
cargo test --locked --quiet --features failpoints --test failpoints
# A change to the store, the persister, the journal or the history since the
# last soak (.ci/soaked) gets the randomized runs, with a fresh seed.
MEMFS_SOAK_POWER_CASES="${MEMFS_SOAK_POWER_CASES:-10000}" scripts/soak.sh --if-changed
scripts/conformance.sh
scripts/integrations.sh
# The binary and the wheel are no more than 20% over the sizes README.md
# states (so that the figures cannot go stale silently).
python3 scripts/sizes.py
if [ "$(id -u)" = 0 ] && [ -e /dev/fuse ]; then
  scripts/bench.sh --smoke > target/bench-smoke.log 2>&1 || { cat target/bench-smoke.log; exit 1; }
  echo "bench smoke run: ok (target/bench-smoke.md)"
else
  echo "SKIPPED the bench smoke run: it mounts, so it needs root and /dev/fuse"
fi
# Many memories on one machine, in its seconds-long smoke size.
"$(scripts/pyenv.sh)" scripts/bench_memories.py target/release/memfs "$(scripts/pyenv.sh)" --memories 10 --runs 2 > target/bench-memories-smoke.md
echo "bench memories smoke run: ok (target/bench-memories-smoke.md)"
# The HTTP door beside the local doors, and many stores in one server, smoke size.
"$(scripts/pyenv.sh)" scripts/bench_http.py target/release/memfs --calls 10 --stores 30 --open 10 --seconds 2 > target/bench-http-smoke.md
echo "bench http smoke run: ok (target/bench-http-smoke.md)"
# A memory store over HTTP as the data dir: one fault trial of each kind
# (server killed, a machine cut off, answers lost, a 409 storm, a machine
# killed, its token revoked); scripts/remote_faults.py --trials 102 is the
# long run (docs/BENCHMARKS-HTTP.md).
python3 scripts/remote_faults.py target/release/memfs --trials 6 > target/remote-faults-smoke.md
echo "store over HTTP fault trials: ok (target/remote-faults-smoke.md)"
# The shared store (PostgreSQL): fault trials (with a failpoints build as one
# host, so that COMMIT answers are lost too), many hosts on one counter, and
# its bench, in bounded sizes; scripts/shared_faults.py --trials 200 and
# scripts/shared_counter.py --hosts 8 --agents 4 are the long runs.
if [ "$(id -u)" = 0 ] && [ -e /dev/fuse ]; then
  cargo build --locked --release --quiet --features failpoints --target-dir target/failpoints
  "$(scripts/pyenv.sh)" scripts/shared_faults.py target/release/memfs --trials 8 \
    --failpoints target/failpoints/release/memfs > target/shared-faults-smoke.md
  echo "shared store fault trials: ok (target/shared-faults-smoke.md)"
  "$(scripts/pyenv.sh)" scripts/shared_counter.py target/release/memfs --hosts 3 --agents 2 --seconds 5 > target/shared-counter-smoke.md
  echo "shared store counter run: ok (target/shared-counter-smoke.md)"
  "$(scripts/pyenv.sh)" scripts/bench_shared.py target/release/memfs --calls 50 --rate 200 --seconds 2 > target/bench-shared-smoke.md
  echo "bench shared smoke run: ok (target/bench-shared-smoke.md)"
  # Search and import (issue 36), smoke size; the full runs are in docs/BENCHMARKS.md section 15.
  python3 scripts/bench_search.py target/release/memfs --files 300 --bytes 3000000 --runs 5 --grep-runs 1 --saves 6 \
    > target/bench-search-smoke.md 2> target/bench-search-smoke.log
  echo "bench search smoke run: ok (target/bench-search-smoke.md)"
  python3 scripts/bench_import.py target/release/memfs --files 300 --bytes 3000000 --runs 1 --commits 50 > target/bench-import-smoke.md
  echo "bench import smoke run: ok (target/bench-import-smoke.md)"
  # Every door at once (API, mount, stdio agent, MCP over HTTP, search,
  # memfs log) for a minute, compaction on: 0 errors and the plain files
  # what the doors wrote (no flatness judged at this size; the hour's run
  # is scripts/soak_doors.py --seconds 3600, docs/BENCHMARKS.md section 11).
  python3 scripts/soak_doors.py --seconds 60 --sample-every 5 --json target/soak-doors-smoke.json \
    > target/soak-doors-smoke.log 2>&1 || { tail -40 target/soak-doors-smoke.log; exit 1; }
  echo "soak through every door, one minute: ok (target/soak-doors-smoke.json)"
elif [ "${CI:-}" = true ]; then
  echo "the shared store's fault trials must run under CI=true, but they need root and /dev/fuse" >&2
  exit 1
else
  echo "SKIPPED the shared store's fault trials: they need root and /dev/fuse"
fi
scripts/posix.sh
