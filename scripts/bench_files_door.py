#!/usr/bin/env python3
"""The files door under a flood (issue 48): `git checkout` of a branch of
N files (default 10,000) inside DIR/memories while an agent's client calls
memfs over stdio in a loop. Reported, with the same loop run on the same
machine first with no checkout (the peer: the agent alone) and then with
the watcher off (MEMFS_WATCH=0: memfs before the files door):

- the agent's call latency (p50, p99, max) before and during the flood,
  and the ratios;
- how long until every file of the checkout is in the memory (versions of
  `person:files`), counted from the checkout's start;
- memfs' peak resident memory (VmHWM).

usage: scripts/bench_files_door.py [--files N] [--binary target/release/memfs] [--flags "--no-search"]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import threading
import time


def git(*args, cwd, env=None):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=env)


def branch_repo(root, n):
    """A repository whose `small` branch has 3 files and `big` has n more,
    100 to a directory; its work tree is set per run."""
    repo = os.path.join(root, "repo.git")
    work = os.path.join(root, "seed")
    os.makedirs(work)
    env = dict(os.environ, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@x", GIT_COMMITTER_NAME="b",
               GIT_COMMITTER_EMAIL="b@x")
    git("init", "-q", "--bare", repo, cwd=root)
    g = ["--git-dir", repo, "--work-tree", work]
    for i in range(3):
        open(os.path.join(work, f"note{i}.md"), "w").write(f"note {i}\n")
    git(*g, "add", "-A", cwd=work, env=env)
    git(*g, "commit", "-q", "-m", "small", cwd=work, env=env)
    git(*g, "branch", "-M", "small", cwd=work, env=env)
    for i in range(n):
        d = os.path.join(work, f"d{i // 100:03}")
        os.makedirs(d, exist_ok=True)
        open(os.path.join(d, f"f{i:05}.md"), "w").write(f"file {i}\n" + "x" * 180 + "\n")
    git(*g, "checkout", "-q", "-b", "big", cwd=work, env=env)
    git(*g, "add", "-A", cwd=work, env=env)
    git(*g, "commit", "-q", "-m", "big", cwd=work, env=env)
    return repo


class Agent:
    """A client calling memfs over stdio in a loop: a str_replace and a view."""

    def __init__(self, binary, data, env, flags):
        self.p = subprocess.Popen([binary, "--data", data, *flags, "serve", "--stdio"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        self.call({"command": "create", "path": "/memories/agent.md", "file_text": "n 0\n"})
        self.n = 0
        self.times = []  # (start, seconds)
        self.stop = False

    def call(self, cmd):
        self.p.stdin.write(json.dumps(cmd) + "\n")
        self.p.stdin.flush()
        return json.loads(self.p.stdout.readline())

    def loop(self):
        while not self.stop:
            cmd = [{"command": "str_replace", "path": "/memories/agent.md", "old_str": f"n {self.n}\n",
                    "new_str": f"n {self.n + 1}\n"}, {"command": "view", "path": "/memories/agent.md"}][self.n % 2]
            t = time.perf_counter()
            r = self.call(cmd)
            self.times.append((t, time.perf_counter() - t))
            assert not r["is_error"], r
            if cmd["command"] == "str_replace":
                self.n += 1

    def finish(self):
        self.p.stdin.close()
        self.p.wait()


def hwm(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1])
    return 0


def stats(xs):
    xs = sorted(xs)
    if not xs:
        return (0, 0, 0)
    p99 = xs[min(len(xs) - 1, int(len(xs) * 0.99))]
    return (statistics.median(xs) * 1e6, p99 * 1e6, xs[-1] * 1e6)


def run(binary, repo, n, watch, flood, flags):
    with tempfile.TemporaryDirectory() as data:
        env = dict(os.environ)
        if not watch:
            env["MEMFS_WATCH"] = "0"
        mem = os.path.join(data, "memories")
        os.makedirs(mem, mode=0o700)
        g = ["--git-dir", repo, "--work-tree", mem]
        git(*g, "checkout", "-q", "-f", "small", cwd=data)
        agent = Agent(binary, data, env, flags)
        th = threading.Thread(target=agent.loop)
        th.start()
        time.sleep(2)
        start = time.perf_counter()
        if flood:
            git(*g, "checkout", "-q", "-f", "big", cwd=data)
        checkout_s = time.perf_counter() - start
        taken = None
        deadline = start + 300
        while flood and watch and time.perf_counter() < deadline:
            log = subprocess.run([binary, "--data", data, "log", "--json"], capture_output=True, text=True).stdout
            got = sum(1 for line in log.splitlines() if '"door":"files"' in line and '"op":"create"' in line)
            if got >= n:
                taken = time.perf_counter() - start
                break
            time.sleep(0.2)
        if not flood or not watch:
            time.sleep(max(0.0, 4 - (time.perf_counter() - start)))
        end = time.perf_counter()
        agent.stop = True
        th.join()
        peak = hwm(agent.p.pid)
        agent.finish()
        before = [d for (t, d) in agent.times if t < start]
        during = [d for (t, d) in agent.times if start <= t <= end]
        return {"before": stats(before), "during": stats(during), "calls": len(during), "checkout_s": checkout_s,
                "taken_s": taken, "hwm_kib": peak}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--binary", default="target/release/memfs")
    ap.add_argument("--flags", default="", help="memfs' global flags, e.g. --no-search")
    a = ap.parse_args()
    flags = a.flags.split()
    binary = os.path.abspath(a.binary)
    with tempfile.TemporaryDirectory() as root:
        repo = branch_repo(root, a.files)
        rows = [("the agent alone (no checkout)", run(binary, repo, a.files, True, False, flags)),
                (f"git checkout of {a.files:,} files, files door on", run(binary, repo, a.files, True, True, flags)),
                (f"git checkout of {a.files:,} files, MEMFS_WATCH=0", run(binary, repo, a.files, False, True, flags))]
    base = rows[0][1]["during"]
    print("| run | agent calls | p50 / p99 / max during (µs) | p99 vs alone | checkout (s) | all taken in (s) | memfs peak RSS (MiB) |")
    print("|---|---|---|---|---|---|---|")
    for name, r in rows:
        d = r["during"]
        taken = f"{r['taken_s']:.2f}" if r["taken_s"] is not None else "—"
        print(f"| {name} | {r['calls']} | {d[0]:.0f} / {d[1]:.0f} / {d[2]:.0f} | {d[1] / base[1]:.1f}x | "
              f"{r['checkout_s']:.2f} | {taken} | {r['hwm_kib'] / 1024:.0f} |")


if __name__ == "__main__":
    main()
