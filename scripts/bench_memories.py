#!/usr/bin/env python3
"""Many memories on one machine: what a multi-user server pays per memory.

Measured in one run, memfs beside its peer (the Python SDK's
BetaLocalFilesystemMemoryTool, started cold in a fresh interpreter, which is
what one memory costs it per call from a shell or a per-user worker):
- cold start + first call: `memfs exec` on a data dir of 100 files with no
  owner running, against `python -c` with the SDK doing the same view;
- a call attached to a running owner (`memfs exec` through the socket);
- RSS of an idle owner (`memfs serve`, socket only) after its first call;
- 200 memories in turn: one create on each of 200 data dirs, each call
  starting (and ending) its own owner;
- 200 idle owners at once: their total RSS, and one call to each.

usage: bench_memories.py MEMFS_BIN PYTHON [--memories N] [--runs R] [--json]
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import tempfile
import time

SDK_VIEW = """
import sys
from anthropic.tools import BetaLocalFilesystemMemoryTool
from anthropic.types.beta import BetaMemoryTool20250818ViewCommand
tool = BetaLocalFilesystemMemoryTool(base_path=sys.argv[1])
tool.execute(BetaMemoryTool20250818ViewCommand(command="view", path="/memories/f0050.md"))
"""


def timed(argv):
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def rss_kib(pid):
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def seed(data, files=100):
    mem = data / "memories"
    mem.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        (mem / f"f{i:04d}.md").write_text(f"memory file {i}\n" * 20)


def start_owner(memfs, data):
    proc = subprocess.Popen([memfs, "--data", str(data), "serve", "--idle-exit", "0"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sock = data / ".memfs" / "sock"
    for _ in range(500):
        if sock.exists():
            return proc
        time.sleep(0.01)
    raise RuntimeError("owner did not start")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("memfs")
    ap.add_argument("python")
    ap.add_argument("--memories", type=int, default=200)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    view = json.dumps({"command": "view", "path": "/memories/f0050.md"})
    rows = {}
    with tempfile.TemporaryDirectory() as work:
        work = pathlib.Path(work)
        data = work / "one"
        seed(data)
        cold = statistics.median(timed([args.memfs, "--data", str(data), "exec", view]) for _ in range(args.runs))
        sdk = statistics.median(timed([args.python, "-c", SDK_VIEW, str(data)]) for _ in range(max(3, args.runs // 3)))
        rows["cold start + first call (s)"] = (cold, sdk)
        owner = start_owner(args.memfs, data)
        try:
            attached = statistics.median(timed([args.memfs, "--data", str(data), "exec", view]) for _ in range(args.runs))
            rows["call attached to an owner (s)"] = (attached, None)
            rows["idle owner RSS (MiB)"] = (rss_kib(owner.pid) / 1024, None)
        finally:
            owner.terminate()
            owner.wait(timeout=60)

        dirs = [work / f"m{i:03d}" for i in range(args.memories)]
        for d in dirs:
            seed(d, files=10)
        start = time.perf_counter()
        for i, d in enumerate(dirs):
            create = json.dumps({"command": "create", "path": f"/memories/new{i}.md", "file_text": "x\n"})
            subprocess.run([args.memfs, "--data", str(d), "exec", create], check=True, stdout=subprocess.DEVNULL)
        in_turn = time.perf_counter() - start
        rows[f"{args.memories} memories in turn, one create each (s)"] = (in_turn, None)

        owners = [start_owner(args.memfs, d) for d in dirs]
        try:
            start = time.perf_counter()
            for d in dirs:
                subprocess.run([args.memfs, "--data", str(d), "exec", view.replace("f0050", "f0005")],
                               check=True, stdout=subprocess.DEVNULL)
            calls = time.perf_counter() - start
            total = sum(rss_kib(p.pid) for p in owners) / 1024
            rows[f"{args.memories} idle owners at once: total RSS (MiB)"] = (total, None)
            rows[f"{args.memories} idle owners at once: one call to each (s)"] = (calls, None)
        finally:
            for p in owners:
                p.terminate()
            for p in owners:
                p.wait(timeout=60)
    if args.json:
        print(json.dumps({k: {"memfs": m, "sdk": s} for k, (m, s) in rows.items()}))
        return
    print("| measure | memfs | Python SDK (cold interpreter) | memfs / SDK |")
    print("|---|---|---|---|")
    for name, (m, s) in rows.items():
        ratio = f"{m / s:.3g}x" if s else ""
        print(f"| {name} | {m:.3f} | {'' if s is None else f'{s:.3f}'} | {ratio} |")


if __name__ == "__main__":
    main()
