#!/usr/bin/env python3
"""What keeping history costs the tool's write path: the library door
(examples/bench_tool) on a fresh data dir with history and without
(MEMFS_BENCH_NO_HISTORY=1, the peer), alternating in one run; medians of
the per-command p50 latencies, and their ratio.

    scripts/bench_history.py target/release/examples/bench_tool [--runs 5] [--rounds 400]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile


def once(bench, rounds, history):
    env = dict(os.environ, MEMFS_BENCH_NO_HISTORY="0" if history else "1")
    with tempfile.TemporaryDirectory(dir=".") as d:
        out = subprocess.run([bench, os.path.join(d, "data"), str(rounds), "1"],
                             env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("bench")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--rounds", type=int, default=400)
    a = p.parse_args()
    runs = {True: [], False: []}
    for _ in range(a.runs):
        for history in (False, True):
            runs[history].append(once(a.bench, a.rounds, history))
    kinds = sorted(runs[True][0]["kinds"])
    print(f"| command | p50 without history (µs) | p50 with history (µs) | with / without |")
    print("|---|---|---|---|")
    for k in kinds:
        off = statistics.median(r["kinds"][k]["p50_us"] for r in runs[False])
        on = statistics.median(r["kinds"][k]["p50_us"] for r in runs[True])
        print(f"| {k} | {off:.0f} | {on:.0f} | {on / off:.2f} |")
    off = statistics.median(r["ops_per_s"] for r in runs[False])
    on = statistics.median(r["ops_per_s"] for r in runs[True])
    print(f"| all (ops/s) | {off:.0f} | {on:.0f} | {on / off:.2f} |")


if __name__ == "__main__":
    main()
