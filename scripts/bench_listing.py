#!/usr/bin/env python3
"""Listing one directory of N entries through a memfs mount, for N from 10k
to 160k: is the time linear in N? Beside it, the same N files listed on a
tmpfs directory (the kernel's own cost, no FUSE), and with --peer another
memfs binary, mounted and listed in the same rounds.

For each N: N small plain files are written into DATA/memories/d before the
mount (memfs takes them in at start), memfs is left to go idle (under 1% of
a core for 2 s), then `os.listdir` (the first listing, then REPEATS
more) and `os.scandir` with a `stat` of each entry (REPEATS times) through
the mount; memfs's own CPU time per repeated listing from
/proc/PID/task/*/schedstat. Medians; the ratios of 80k to 20k at the end.

usage: bench_listing.py MEMFS_BIN [--peer OTHER_MEMFS_BIN] [--sizes 10000,20000,...]
                        [--repeats 9] [--out FILE]
Needs root (or fuse access) and fusermount3.
"""
import argparse
import os
import pathlib
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time


def cpu(pid):
    """CPU time of pid's threads, in seconds (ns resolution)."""
    total = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(pathlib.Path(f"/proc/{pid}/task/{t}/schedstat").read_text().split()[0])
        except OSError:
            pass
    return total / 1e9


def wait_idle(pid, quiet=2.0, timeout=600):
    """Until memfs used under 1% of a core for `quiet` seconds (an idle
    memfs's ticks, the plain files' watcher and the like, take about 0.3%)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        before = cpu(pid)
        time.sleep(quiet)
        if cpu(pid) - before < 0.01 * quiet:
            return
    raise SystemExit("memfs never went idle")


def fill(d, n):
    os.makedirs(d, exist_ok=True)
    for i in range(n):
        with open(os.path.join(d, f"f{i:06d}.md"), "w") as f:
            f.write("x\n")


def mount(memfs, data, mnt):
    os.makedirs(mnt, exist_ok=True)
    p = subprocess.Popen([memfs, "-q", "--data", data, "mount", mnt],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        if os.path.ismount(mnt):
            return p
        if p.poll() is not None:
            raise SystemExit(f"memfs exited {p.returncode} before mounting")
        time.sleep(0.1)
    raise SystemExit("the mount did not appear")


def unmount(p, mnt):
    subprocess.run(["fusermount3", "-u", mnt], check=False)
    try:
        p.wait(timeout=120)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=60)


def timed(f):
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def listdir(d):
    assert len(os.listdir(d)) > 0


def scan_stat(d):
    with os.scandir(d) as it:
        for e in it:
            e.stat(follow_symlinks=False)


def measure(d, n, pid, repeats):
    c0 = cpu(pid) if pid else 0
    first = timed(lambda: listdir(d))
    first_cpu = cpu(pid) - c0 if pid else 0
    again, again_cpu = [], []
    for _ in range(repeats):
        c0 = cpu(pid) if pid else 0
        again.append(timed(lambda: listdir(d)))
        again_cpu.append(cpu(pid) - c0 if pid else 0)
    scan = [timed(lambda: scan_stat(d)) for _ in range(repeats)]
    assert len(os.listdir(d)) == n, "every entry listed"
    return {"first": first, "first_cpu": first_cpu, "again": statistics.median(again),
            "again_cpu": statistics.median(again_cpu), "scan": statistics.median(scan)}


def one_mount(memfs, tmp, n, repeats):
    base = tmp / f"m{n}"
    data, mnt = base / "data", base / "mnt"
    fill(data / "memories" / "d", n)
    p = mount(memfs, str(data), str(mnt))
    try:
        wait_idle(p.pid)
        return measure(str(mnt / "d"), n, p.pid, repeats)
    finally:
        unmount(p, str(mnt))
        shutil.rmtree(base, ignore_errors=True)


def on_tmpfs(n, repeats):
    d = pathlib.Path(tempfile.mkdtemp(dir="/dev/shm"))
    try:
        fill(d, n)
        return measure(str(d), n, None, repeats)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("memfs")
    ap.add_argument("--peer")
    ap.add_argument("--sizes", default="10000,20000,40000,80000,160000")
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--out")
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    bins = {"memfs": a.memfs} | ({"peer": a.peer} if a.peer else {})
    res = {name: {} for name in [*bins, "tmpfs"]}
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        tmp = pathlib.Path(tmp)
        for n in sizes:
            for name, binary in bins.items():
                res[name][n] = one_mount(binary, tmp, n, a.repeats)
            res["tmpfs"][n] = on_tmpfs(n, a.repeats)
            print(f"N={n} done", file=sys.stderr, flush=True)
    ms = lambda s: f"{s * 1000:.1f}"
    cpu_name = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    lines = [
        f"Machine: {cpu_name}, {os.cpu_count()} cores, Linux {platform.release()}. "
        f"Command: `{' '.join(['scripts/bench_listing.py'] + sys.argv[1:])}`.",
        "",
        "| what | N | first listing ms | memfs CPU, first ms | listing again ms | memfs CPU, again ms | scandir + stat ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in res:
        for n in sizes:
            r = res[name][n]
            cpu_cols = (ms(r["first_cpu"]), ms(r["again_cpu"])) if name != "tmpfs" else ("", "")
            lines.append(f"| {name} | {n} | {ms(r['first'])} | {cpu_cols[0]} | {ms(r['again'])} | {cpu_cols[1]} | "
                         f"{ms(r['scan'])} |")
    if 20000 in sizes and 80000 in sizes:
        lines += ["", "| what | 80k / 20k: first | again | memfs CPU, again | scandir + stat |", "|---|---|---|---|---|"]
        for name in res:
            x, y = res[name][20000], res[name][80000]
            c = f"{y['again_cpu'] / x['again_cpu']:.2f}x" if name != "tmpfs" else ""
            lines.append(f"| {name} | {y['first'] / x['first']:.2f}x | {y['again'] / x['again']:.2f}x | {c} | "
                         f"{y['scan'] / x['scan']:.2f}x |")
    text = "\n".join(lines)
    print(text)
    if a.out:
        pathlib.Path(a.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
