#!/usr/bin/env bash
# One command for every benchmark: installs what it needs (fio, rclone, fuse3,
# the pinned Python packages), builds, runs scripts/bench.py in one run, prints
# the table and writes docs/BENCHMARKS.md. Needs root (it mounts tmpfs).
#   usage: scripts/bench.sh [--smoke] [--runs N]
# --smoke is CI's seconds-long version: it writes target/bench-smoke.md, not the docs.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
for pkg in fio:fio rclone:rclone fuse3:fusermount3 git:git; do
  command -v "${pkg#*:}" >/dev/null 2>&1 || need+=("${pkg%%:*}")
done
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
python=$(scripts/pyenv.sh)
cargo build --locked --release --quiet --bin memfs --example bench_tool --example bench_floor --example floorfs
out=docs/BENCHMARKS.md
case " $* " in *" --smoke "*) out=target/bench-smoke.md ;; esac
"$python" scripts/bench.py --memfs target/release/memfs --lib-bench target/release/examples/bench_tool --disk-floor target/release/examples/bench_floor --floor target/release/examples/floorfs --python "$python" --out "$out" "$@"
