#!/usr/bin/env python3
"""Tool-call benchmark: the same op mix through the memfs library in-process
(Rust, examples/bench_tool.rs), `memfs serve --stdio` from this driver, and the
Python SDK's BetaLocalFilesystemMemoryTool in-process, in one run. Each keeps
its real durability. Prints JSON rows (one per door and mode) on stdout.

Per round: view a 4 KiB file, view a directory of 1,000 files, create,
str_replace, insert, rename, delete.

Also, in the same run: the durability floor (examples/bench_floor.rs: append
a record of a write's size to one file and fdatasync it, on the same disk),
and a write-heavy mix (the five writing commands, no view) one at a time
through the SDK and pipelined through stdio.

usage: bench_tool.py MEMFS_BIN LIB_BENCH_BIN FLOOR_BIN [--rounds N] [--runs R]
"""
import argparse
import json
import statistics
import subprocess
import tempfile
import threading
import time

from anthropic.lib.tools._beta_functions import ToolError
from anthropic.tools import BetaLocalFilesystemMemoryTool

BODY = "".join(f"line {i:04d} of a memory file, some words\n" for i in range(110))[:4096]


def setup_cmds():
    yield {"command": "create", "path": "/memories/seed.md", "file_text": BODY}
    for i in range(1000):
        yield {"command": "create", "path": f"/memories/dir/f{i:04d}.md", "file_text": "x\n"}


WRITES = {"create", "str_replace", "insert", "rename", "delete"}


def round_cmds(r, writes_only=False):
    cmds = all_round_cmds(r)
    return [c for c in cmds if c[0] in WRITES] if writes_only else cmds


def all_round_cmds(r):
    p, q = f"/memories/w0/f{r}.md", f"/memories/w0/g{r}.md"
    return [
        ("view_file", {"command": "view", "path": "/memories/seed.md"}),
        ("view_dir", {"command": "view", "path": "/memories/dir"}),
        ("create", {"command": "create", "path": p, "file_text": BODY}),
        ("str_replace", {"command": "str_replace", "path": p, "old_str": "line 0042", "new_str": "LINE 42"}),
        ("insert", {"command": "insert", "path": p, "insert_line": 3, "insert_text": "inserted\n"}),
        ("rename", {"command": "rename", "old_path": p, "new_path": q}),
        ("delete", {"command": "delete", "path": q}),
    ]


def summarize(door, mode, samples, seconds, extra=None):
    kinds = {}
    for kind, us in samples:
        kinds.setdefault(kind, []).append(us)
    out = {"door": door, "mode": mode, "ops": len(samples), "seconds": seconds, "ops_per_s": len(samples) / seconds, "kinds": {}}
    for kind, v in kinds.items():
        v.sort()
        out["kinds"][kind] = {"p50_us": v[len(v) // 2], "p99_us": v[min(len(v) - 1, int(len(v) * 0.99))], "n": len(v)}
    out.update(extra or {})
    return out


def one_at_a_time(call, rounds, writes_only=False):
    """Sets the store up through `call`, then times each call of the rounds."""
    for c in setup_cmds():
        call(c)
    samples = []
    start = time.perf_counter()
    for r in range(rounds):
        for kind, c in round_cmds(r, writes_only):
            t = time.perf_counter()
            call(c)
            samples.append((kind, (time.perf_counter() - t) * 1e6))
    return samples, time.perf_counter() - start


def sdk(rounds, writes_only=False):
    with tempfile.TemporaryDirectory() as d:
        tool = BetaLocalFilesystemMemoryTool(base_path=d)

        def call(c):
            try:
                tool.call(c)
            except ToolError as e:
                raise SystemExit(f"SDK failed {c}: {e}")

        samples, seconds = one_at_a_time(call, rounds, writes_only)
        mode = "one at a time, writes only" if writes_only else "one at a time"
        return summarize("sdk", mode, samples, seconds)


class Stdio:
    def __init__(self, binary, data):
        self.p = subprocess.Popen([binary, "--data", data, "serve", "--stdio", "--stats"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)

    def call(self, c):
        self.p.stdin.write(json.dumps(c) + "\n")
        self.p.stdin.flush()
        answer = json.loads(self.p.stdout.readline())
        if answer["is_error"]:
            raise SystemExit(f"memfs failed {c}: {answer}")

    def close(self):
        self.p.stdin.close()
        stats = self.p.stderr.read().strip()
        self.p.wait()
        return stats


def stdio_one(binary, rounds):
    with tempfile.TemporaryDirectory() as d:
        s = Stdio(binary, d)
        samples, seconds = one_at_a_time(s.call, rounds)
        return summarize("stdio", "one at a time", samples, seconds, {"stats": s.close()})


def stdio_pipelined(binary, rounds, writes_only=False):
    with tempfile.TemporaryDirectory() as d:
        s = Stdio(binary, d)
        for c in setup_cmds():
            s.call(c)
        lines = [json.dumps(c) + "\n" for r in range(rounds) for _, c in round_cmds(r, writes_only)]
        start = time.perf_counter()

        def feed():
            for line in lines:
                s.p.stdin.write(line)
            s.p.stdin.flush()

        w = threading.Thread(target=feed)
        w.start()
        for _ in lines:
            if json.loads(s.p.stdout.readline())["is_error"]:
                raise SystemExit("memfs failed a pipelined command")
        w.join()
        seconds = time.perf_counter() - start
        mode = "pipelined, writes only" if writes_only else "pipelined"
        return {"door": "stdio", "mode": mode, "ops": len(lines), "seconds": seconds,
                "ops_per_s": len(lines) / seconds, "kinds": {}, "stats": s.close()}


def library(lib_bin, rounds, threads):
    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run([lib_bin, f"{d}/data", str(rounds), str(threads)], capture_output=True, text=True, check=True)
        row = json.loads(out.stdout)
        row["mode"] = "one at a time" if threads == 1 else f"{threads} threads at once"
        return row


def floor(floor_bin, size, count):
    """The floor: append `size` bytes and fdatasync, `count` times, on this disk."""
    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run([floor_bin, d, str(size), str(count)], capture_output=True, text=True, check=True)
        row = json.loads(out.stdout)
        return {"door": "floor", "mode": f"append {size} B + fdatasync", "ops": count, "seconds": 0,
                "ops_per_s": 1e6 / row["p50_us"], "kinds": {"append": row}, "record_bytes": size}


def median_row(rows):
    """The run with the median throughput (its latencies come along)."""
    rows = sorted(rows, key=lambda r: r["ops_per_s"])
    return rows[len(rows) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("memfs")
    ap.add_argument("lib_bench")
    ap.add_argument("floor_bin")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    # The floor's record sizes: a frame of a write that brings a 4 KiB
    # content, and one of a rename or delete (measured from the journal).
    count = max(200, a.rounds * 2)
    doers = [
        lambda: sdk(a.rounds),
        lambda: library(a.lib_bench, a.rounds, 1),
        lambda: stdio_one(a.memfs, a.rounds),
        lambda: library(a.lib_bench, a.rounds, 4),
        lambda: stdio_pipelined(a.memfs, a.rounds),
        lambda: sdk(a.rounds, writes_only=True),
        lambda: stdio_pipelined(a.memfs, a.rounds, writes_only=True),
    ]
    rows = {}
    # Each door and the floor take turns, run after run, so that a slow
    # moment of the disk falls on all of them alike. The floor appends
    # records of the size of each write's journal frame (as the library run
    # measured them: a content the journal holds already is only named).
    for _ in range(a.runs):
        for i, do in enumerate(doers):
            rows.setdefault(i, []).append(do())
        lib = rows[1][-1]
        for kind in sorted(WRITES):
            size = max(64, int(lib["kinds"][kind].get("frame_bytes", 900)))
            rows.setdefault(("floor", kind), []).append(dict(floor(a.floor_bin, size, count), op=kind))
    for key, runs in rows.items():
        if isinstance(key, tuple):
            row = sorted(runs, key=lambda r: r["kinds"]["append"]["p50_us"])[len(runs) // 2]
        else:
            row = median_row(runs)
        row["runs"] = a.runs
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
