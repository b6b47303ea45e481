#!/usr/bin/env python3
"""Tool-call throughput: `memfs serve --stdio` one call at a time and pipelined,
beside the Python SDK's BetaLocalFilesystemMemoryTool in-process, on the same
machine in the same run. Each keeps its real durability.

usage: bench_tool.py MEMFS_BINARY [--rounds N] [--runs R]
Prints one row per door: median commands/s over R runs, and the ratio to the SDK.
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from anthropic.lib.tools._beta_functions import ToolError
from anthropic.tools import BetaLocalFilesystemMemoryTool


def mix(rounds, kind):
    """`kind` is "mix" (all six commands) or "view" (reads of a 4 KiB file)."""
    body = "".join(f"line {i:04d} of a memory file, some words\n" for i in range(100))[:4096]
    cmds = [{"command": "create", "path": "/memories/seed.md", "file_text": body}]
    for i in range(rounds):
        if kind == "view":
            cmds.append({"command": "view", "path": "/memories/seed.md"})
            continue
        p, q = f"/memories/d/f{i}.md", f"/memories/e/g{i}.md"
        cmds += [
            {"command": "create", "path": p, "file_text": body},
            {"command": "view", "path": p},
            {"command": "str_replace", "path": p, "old_str": "line 0042", "new_str": "LINE 42"},
            {"command": "insert", "path": p, "insert_line": 3, "insert_text": "inserted\n"},
            {"command": "rename", "old_path": p, "new_path": q},
            {"command": "delete", "path": q},
        ]
    return cmds


def run_sdk(cmds):
    with tempfile.TemporaryDirectory() as d:
        tool = BetaLocalFilesystemMemoryTool(base_path=d)
        t = time.perf_counter()
        for c in cmds:
            try:
                tool.call(c)
            except ToolError:
                pass
        return len(cmds) / (time.perf_counter() - t)


def run_memfs(binary, cmds, pipelined):
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.Popen([binary, "--data", d, "serve", "--stdio", "--stats"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines = [json.dumps(c) + "\n" for c in cmds]
        t = time.perf_counter()
        if pipelined:
            def feed():
                for line in lines:
                    p.stdin.write(line)
                p.stdin.flush()
            w = threading.Thread(target=feed)
            w.start()
            for _ in lines:
                assert p.stdout.readline()
            w.join()
        else:
            for line in lines:
                p.stdin.write(line)
                p.stdin.flush()
                assert p.stdout.readline()
        rate = len(cmds) / (time.perf_counter() - t)
        p.stdin.close()
        stats = p.stderr.read().strip()
        p.wait()
        return rate, stats


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    print(f"| workload | door | commands/s (median of {a.runs}) | vs SDK |")
    print("|---|---|---|---|")
    for kind in ("mix", "view"):
        cmds = mix(a.rounds, kind)
        sdk = statistics.median(run_sdk(cmds) for _ in range(a.runs))
        one = [run_memfs(a.binary, cmds, False) for _ in range(a.runs)]
        pipe = [run_memfs(a.binary, cmds, True) for _ in range(a.runs)]
        rows = [("SDK in-process, one at a time", sdk),
                ("memfs stdio, one at a time", statistics.median(r for r, _ in one)),
                ("memfs stdio, pipelined", statistics.median(r for r, _ in pipe))]
        for door, rate in rows:
            print(f"| {kind} ({len(cmds)} cmds) | {door} | {rate:,.0f} | {rate / sdk:.1f}x |")
        print(f"<!-- {kind}: last one-at-a-time run: {one[-1][1]}; last pipelined run: {pipe[-1][1]} -->")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
