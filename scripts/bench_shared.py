#!/usr/bin/env python3
"""A shared store (PostgreSQL 15, a throwaway server on this machine),
measured in one run beside its floor.

1. Cost: a tool write (str_replace through `memfs serve --stdio` attached
   to host A, one call at a time) against a bare single-row INSERT and its
   COMMIT on the same server, with the same client crate
   (`examples/pg_floor.rs`), p50 and p99, and the ratio; the two taken in
   turns, a tenth of the calls at a time.
2. Visibility: from host A's acknowledged str_replace to host B's mount
   showing it (open, read, compare; the file is read on B before each
   change, so B's kernel has it cached), p50 / p99 / max.
3. Following: host A creates files at a steady rate (pipelined through
   stdio); for each, the delay until host B's mount has it; whether B keeps
   up (its delay stays flat) at that rate.

usage: bench_shared.py MEMFS_BIN [--calls N] [--rate R] [--seconds S] [--out FILE]
"""
import argparse
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import threading
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "python"))
from shared_hosts import Host, Postgres, read, wait_for  # noqa: E402


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


class Stdio:
    """`memfs serve --stdio` attached to a host: JSON lines in, results out."""

    def __init__(self, host: Host):
        self.p = subprocess.Popen(host.args("serve", "--stdio"), stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  text=True, bufsize=1)

    def call(self, **command) -> dict:
        self.p.stdin.write(json.dumps(command) + "\n")
        self.p.stdin.flush()
        return json.loads(self.p.stdout.readline())

    def send(self, **command):
        self.p.stdin.write(json.dumps(command) + "\n")

    def answer(self) -> dict:
        return json.loads(self.p.stdout.readline())

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


def floor(pg: Postgres, n: int) -> list[float]:
    exe = REPO / "target" / "release" / "examples" / "pg_floor"
    out = subprocess.run([str(exe), pg.base, str(n)], check=True, capture_output=True,
                         text=True, timeout=600)
    return [u / 1e6 for u in json.loads(out.stdout)["us"]]


def cost(pg: Postgres, a: Host, n: int, blocks: int = 10) -> tuple[list[float], list[float]]:
    """The floor and the tool write, taken in turns, `n // blocks` calls of
    each at a time: this machine's disk flushes at speeds that drift over a
    run (a floor's p50 moved from 0.22 to 0.56 ms between two runs minutes
    apart), so each is measured beside the other, not one after the other."""
    s = Stdio(a)
    name = f"/memories/cost-{time.monotonic_ns()}.md"
    assert not s.call(command="create", path=name, file_text="count=0;\n")["is_error"]
    fl, took, i = [], [], 0
    per = max(1, n // blocks)
    for _ in range(blocks):
        fl += floor(pg, per)
        for _ in range(per):
            t = time.perf_counter()
            r = s.call(command="str_replace", path=name,
                       old_str=f"count={i};", new_str=f"count={i + 1};")
            took.append(time.perf_counter() - t)
            assert not r["is_error"], r
            i += 1
    s.close()
    return fl, took


def visibility(a: Host, b: Host, n: int) -> list[float]:
    s = Stdio(a)
    target = b.mnt / "seen.md"
    assert not s.call(command="create", path="/memories/seen.md", file_text="v=0;\n")["is_error"]
    wait_for(lambda: read(target) == "v=0;\n", 10, "b has the file")
    delays = []
    for i in range(n):
        assert read(target) == f"v={i};\n"  # cached on B now
        os.stat(target)
        r = s.call(command="str_replace", path="/memories/seen.md",
                   old_str=f"v={i};", new_str=f"v={i + 1};")
        acked = time.perf_counter()
        assert not r["is_error"], r
        want = f"v={i + 1};\n"
        while read(target) != want:
            if time.perf_counter() - acked > 10:
                raise AssertionError(f"B never showed change {i + 1}")
        delays.append(time.perf_counter() - acked)
    s.close()
    return delays


def following(a: Host, b: Host, rate: int, seconds: float, sessions: int = 8):
    """Sessions on A create files at `rate` in all (each one call at a
    time, as agents do); for each file, the delay from A's acknowledgement
    to B's mount having it."""
    per = max(1, int(rate * seconds) // sessions)
    acked = [[0.0] * per for _ in range(sessions)]
    seen = [[0.0] * per for _ in range(sessions)]
    done = threading.Event()
    t0 = time.perf_counter() + 0.5

    def agent(j):
        s = Stdio(a)
        for i in range(per):
            due = t0 + (i * sessions + j) / rate
            while time.perf_counter() < due:
                time.sleep(0.0002)
            r = s.call(command="create", path=f"/memories/f{j}/{i}.md", file_text=f"{i}\n")
            assert not r["is_error"], r
            acked[j][i] = time.perf_counter()
        s.close()

    def watch(j):
        i = 0
        while i < per:
            if acked[j][i] and os.path.exists(b.mnt / f"f{j}" / f"{i}.md"):
                seen[j][i] = time.perf_counter()
                i += 1
            elif done.is_set() and time.perf_counter() - acked[j][i] > 30:
                raise AssertionError(f"B never showed f{j}/{i}.md")
            else:
                time.sleep(0.001)

    agents = [threading.Thread(target=agent, args=(j,)) for j in range(sessions)]
    watchers = [threading.Thread(target=watch, args=(j,)) for j in range(sessions)]
    for t in agents + watchers:
        t.start()
    for t in agents:
        t.join()
    done.set()
    for t in watchers:
        t.join()
    last = max(max(x) for x in acked)
    lag = [seen[j][i] - acked[j][i] for i in range(per) for j in range(sessions)]
    return lag, sessions * per / (last - t0)


def machine() -> str:
    cpus = os.cpu_count()
    mem = int(pathlib.Path("/proc/meminfo").read_text().split()[1]) // (1024 * 1024)
    return f"{cpus} cores, {mem} GiB, Linux {platform.release()}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("memfs")
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--out")
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--locked", "--release", "--quiet", "--example", "pg_floor"],
                   cwd=REPO, check=True)
    root = pathlib.Path(tempfile.mkdtemp(prefix="memfs-bench-shared-"))
    pg = Postgres(root)
    pg.start()
    a = Host(args.memfs, pg.url("bench"), root, "a")
    b = Host(args.memfs, pg.url("bench"), root, "b")
    try:
        a.mount()
        # Host A writing alone (the other hosts of a deployment run on
        # other machines), then with host B mounted and following it on the
        # same two cores and disk.
        fl1, tw1 = cost(pg, a, args.calls)
        b.mount()
        fl, tw = cost(pg, a, args.calls)
        vis = visibility(a, b, max(20, args.calls // 2))
        lag, achieved = following(a, b, args.rate, args.seconds)
    finally:
        a.stop()
        b.stop()
        pg.remove()
    ms = lambda x: f"{x * 1000:.2f}"
    third = len(lag) // 3
    out = [
        "## 8. One store, many hosts (PostgreSQL)",
        "",
        f"- Machine: {machine()}; PostgreSQL 15 on 127.0.0.1 (a throwaway server, `fsync=on`), both hosts on this machine.",
        f"- Date: {time.strftime('%Y-%m-%d')}; command: `{' '.join(['scripts/bench_shared.py', 'target/release/memfs', '--calls', str(args.calls), '--rate', str(args.rate), '--seconds', str(args.seconds)])}`.",
        "",
        "| measure | p50 (ms) | p99 (ms) | max (ms) |",
        "|---|---|---|---|",
        f"| bare `BEGIN; INSERT` (one row) `; COMMIT`, same server and client crate (in turns with the tool write) | {ms(pct(fl, 50))} | {ms(pct(fl, 99))} | {ms(max(fl))} |",
        f"| tool write on host A (`str_replace` through stdio, one at a time), host B following on the same cores | {ms(pct(tw, 50))} | {ms(pct(tw, 99))} | {ms(max(tw))} |",
        f"| tool write / floor | {pct(tw, 50) / pct(fl, 50):.2f}x | {pct(tw, 99) / pct(fl, 99):.2f}x | |",
        f"| host A writing alone (B not yet started): bare INSERT + COMMIT, in turns with the tool write | {ms(pct(fl1, 50))} | {ms(pct(fl1, 99))} | {ms(max(fl1))} |",
        f"| host A writing alone: tool write | {ms(pct(tw1, 50))} | {ms(pct(tw1, 99))} | {ms(max(tw1))} |",
        f"| host A writing alone: tool write / floor | {pct(tw1, 50) / pct(fl1, 50):.2f}x | {pct(tw1, 99) / pct(fl1, 99):.2f}x | |",
        f"| visibility: A's acknowledgement to B's mount showing it (B had it cached) | {ms(pct(vis, 50))} | {ms(pct(vis, 99))} | {ms(max(vis))} |",
        f"| following: 8 sessions on A creating {args.rate}/s in all for {args.seconds:g} s ({achieved:.0f}/s acknowledged), delay from A's acknowledgement to B's mount | {ms(pct(lag, 50))} | {ms(pct(lag, 99))} | {ms(max(lag))} |",
        f"| following, first third vs last third of the run (p50) | {ms(pct(lag[:third], 50))} | {ms(pct(lag[-third:], 50))} | |",
        "",
    ]
    text = "\n".join(out)
    print(text)
    if args.out:
        pathlib.Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
