#!/usr/bin/env python3
"""What a neighbour's I/O costs memfs' write path: the library door
(examples/bench_tool, one call at a time) on a quiet disk, then while another
program writes a few GiB (buffered, as most programs do) to the same file
system. Two builds side by side in one run: this one (each batch made durable
with fdatasync/fsync of what it wrote) and a peer build whose barrier is
`syncfs` (the design before: it flushes every dirty page on the disk, the
neighbour's included). Build the peer from commit 0b6c102, for example:

    git worktree add /tmp/peer 0b6c102 && (cd /tmp/peer && cargo build --release --example bench_tool)
    scripts/bench_neighbour.py target/release/examples/bench_tool /tmp/peer/target/release/examples/bench_tool
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile


def once(bench, rounds, neighbour_gib):
    with tempfile.TemporaryDirectory(dir=".") as d:
        dd = None
        if neighbour_gib:
            dd = subprocess.Popen(["dd", "if=/dev/zero", f"of={os.path.join(d, 'neighbour.bin')}", "bs=1M",
                                   f"count={neighbour_gib * 1024}"], stderr=subprocess.DEVNULL)
        out = subprocess.run([bench, os.path.join(d, "data"), str(rounds), "1"],
                             check=True, capture_output=True, text=True).stdout
        if dd is not None:
            dd.kill()
            dd.wait()
        subprocess.run(["sync"])
    return json.loads(out)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("bench")
    p.add_argument("peer")
    p.add_argument("--rounds", type=int, default=100)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--neighbour-gib", type=int, default=4)
    a = p.parse_args()
    rows = []
    for label, gib in (("quiet disk", 0), (f"neighbour writing {a.neighbour_gib} GiB", a.neighbour_gib)):
        for name, bench in (("memfs (fdatasync/fsync)", a.bench), ("peer (syncfs)", a.peer)):
            runs = [once(bench, a.rounds, gib) for _ in range(a.runs)]
            create = [r["kinds"]["create"] for r in runs]
            delete = [r["kinds"]["delete"] for r in runs]
            rows.append((label, name,
                         statistics.median(c["p50_us"] for c in create), statistics.median(c["p99_us"] for c in create),
                         statistics.median(x["p50_us"] for x in delete), statistics.median(x["p99_us"] for x in delete)))
    print("| disk | build | create p50 (µs) | create p99 (µs) | delete p50 (µs) | delete p99 (µs) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]:.0f} | {r[3]:.0f} | {r[4]:.0f} | {r[5]:.0f} |")


if __name__ == "__main__":
    main()
