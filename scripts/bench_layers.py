#!/usr/bin/env python3
"""BENCHMARKS sections 1, 4 and 10 for two builds side by side in one run:
the tool calls through the library and `serve --stdio` against the
durability floor (scripts/bench_tool.py), and the journal's start-up with a
tail past the checkpoint and a directory of 10,000 files deleted
(scripts/bench.py's journal_tail and dir_delete). Issue 49 asks that the
workspace's layers cost nothing: NEW is this tree, OLD the tree before the
workspace (f70eac6), each built in release with its examples.

The builds take turns (new, old, old, new, ...), so that a slow moment of
the disk falls on both alike; each figure is the median of its turns.
Nothing here is a test.

usage: bench_layers.py --new DIR --old DIR --python PY [--turns N] [--rounds N] [--tail N]
  (DIR: a target/release holding memfs, examples/bench_tool, examples/bench_floor)
"""
import argparse
import importlib.util
import json
import statistics
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
OPS = ["view_file", "view_dir", "create", "str_replace", "insert", "rename", "delete"]


def bench_module():
    spec = importlib.util.spec_from_file_location("bench", HERE / "bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tool_turn(python, build, rounds):
    """One turn of bench_tool.py (one run) for `build`: p50 (µs) per op of
    the library and of stdio, and the floor's p50 per write."""
    out = subprocess.run([python, str(HERE / "bench_tool.py"), str(build / "memfs"),
                          str(build / "examples" / "bench_tool"), str(build / "examples" / "bench_floor"),
                          "--rounds", str(rounds), "--runs", "1"], check=True, capture_output=True, text=True)
    rows = [json.loads(l) for l in out.stdout.splitlines() if l.strip()]
    got = {}
    for r in rows:
        if r["mode"] == "one at a time" and r["door"] in ("library", "stdio"):
            for op in OPS:
                got[(r["door"], op)] = r["kinds"][op]["p50_us"]
        if r["door"] == "floor":
            got[("floor", r["op"])] = r["kinds"]["append"]["p50_us"]
    return got


class Args:
    def __init__(self, memfs, runs, smoke):
        self.memfs, self.runs, self.smoke = memfs, runs, smoke


def journal_turn(bench, build, tail, work):
    args = Args(str(build / "memfs"), 3, False)
    edits = bench.journal_tail(args, work, tail, False)
    creates = bench.journal_tail(args, work, tail, True)
    delete = bench.dir_delete(args, work, 10_000)
    return {("replay", "edits"): edits["replay_s"], ("start", "edits"): edits["start_s"],
            ("replay", "creates"): creates["replay_s"], ("start", "creates"): creates["start_s"],
            ("delete", "10,000 files"): delete["seconds"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--new", required=True, type=Path)
    ap.add_argument("--old", required=True, type=Path)
    ap.add_argument("--python", required=True)
    ap.add_argument("--turns", type=int, default=2, help="turns of each build (alternating)")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--tail", type=int, default=20_000)
    ap.add_argument("--journal-only", action="store_true", help="the journal's rows alone")
    a = ap.parse_args()
    bench = bench_module()
    order = []
    for t in range(a.turns):
        order += [("new", a.new), ("old", a.old)] if t % 2 == 0 else [("old", a.old), ("new", a.new)]
    tool, journal = {"new": [], "old": []}, {"new": [], "old": []}
    with tempfile.TemporaryDirectory(prefix="memfs-layers-") as work:
        for name, build in order:
            if not a.journal_only:
                tool[name].append(tool_turn(a.python, build, a.rounds))
            journal[name].append(journal_turn(bench, build, a.tail, work))
            print(f"  turn done: {name}", flush=True, file=__import__("sys").stderr)
    if a.journal_only:
        tool = None
    print_tools(tool, a)
    print_journal(journal, a)


def print_tools(tool, a):
    if tool is None:
        return

    def med(turns, key):
        return statistics.median(t[key] for t in turns)

    print(f"Tool calls (§1, §10): p50 in µs, median of {a.turns} turns of {a.rounds} rounds each; "
          "new / old is the ratio of the two builds' p50; / floor is each build's p50 over its own floor.\n")
    print("| op | library new / old (µs) | library new / old | stdio new / old (µs) | stdio new / old | "
          "library / floor, new | library / floor, old |")
    print("|---|---|---|---|---|---|---|")
    for op in OPS:
        ln, lo = med(tool["new"], ("library", op)), med(tool["old"], ("library", op))
        sn, so = med(tool["new"], ("stdio", op)), med(tool["old"], ("stdio", op))
        floor = ""
        if ("floor", op) in tool["new"][0]:
            fn, fo = med(tool["new"], ("floor", op)), med(tool["old"], ("floor", op))
            floor = f"{ln / fn:.2f} | {lo / fo:.2f}"
        else:
            floor = "— | —"
        print(f"| {op} | {ln:.0f} / {lo:.0f} | {ln / lo:.2f} | {sn:.0f} / {so:.0f} | {sn / so:.2f} | {floor} |")


def print_journal(journal, a):
    def med(turns, key):
        return statistics.median(t[key] for t in turns)

    print(f"\nThe journal (§4): seconds, median of {a.turns} turns; a tail of {a.tail:,} changes past the checkpoint.\n")
    print("| what | new (s) | old (s) | new / old |")
    print("|---|---|---|---|")
    for key in journal["new"][0]:
        n, o = med(journal["new"], key), med(journal["old"], key)
        print(f"| {key[0]} ({key[1]}) | {n:.3f} | {o:.3f} | {n / o:.2f} |")


if __name__ == "__main__":
    main()
