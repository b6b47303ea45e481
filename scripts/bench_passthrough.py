#!/usr/bin/env python3
"""What FUSE passthrough would give memfs' mount, and why memfs does not
use it (docs/BENCHMARKS.md §9, "Passthrough").

With `examples/passthrough_probe.rs` (one file of SIZE MiB in a memfd):
1. sequential read (1 MiB reads, the first read after mounting) through
   classic FUSE, through passthrough, and from tmpfs;
2. the kernel's rule on mixing: with a passthrough open of the file held,
   an open answered classically (as memfs must answer a person's writes,
   to see them) fails, and the other way round.

usage: bench_passthrough.py [--size MIB] [--runs N] [--out FILE]   (root, /dev/fuse)
"""
import argparse
import errno
import os
import pathlib
import platform
import signal
import statistics
import subprocess
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
PROBE = REPO / "target" / "release" / "examples" / "passthrough_probe"


def read_all(path: str) -> float:
    """Seconds to read the file with 1 MiB reads."""
    buf = bytearray(1 << 20)
    t = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while f.readinto(buf):
            pass
    return time.perf_counter() - t


class Mounted:
    def __init__(self, mode: str, mib: int):
        self.dir = tempfile.mkdtemp(prefix=f"memfs-probe-{mode}-")
        self.p = subprocess.Popen([str(PROBE), self.dir, str(mib), mode],
                                  stderr=subprocess.PIPE, text=True)
        until = time.monotonic() + 30
        while not os.path.ismount(self.dir):
            if self.p.poll() is not None:
                raise SystemExit(f"the probe did not mount ({mode}): {self.p.stderr.read()}")
            if time.monotonic() > until:
                raise SystemExit(f"the probe did not mount in 30 s ({mode})")
            time.sleep(0.02)
        self.data = os.path.join(self.dir, "data")

    def close(self):
        self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            subprocess.run(["umount", "-l", self.dir], check=False)
        os.rmdir(self.dir)


def try_open(path: str, flags: int) -> str:
    try:
        fd = os.open(path, flags)
    except OSError as e:
        return f"fails: {errno.errorcode.get(e.errno, e.errno)}"
    os.close(fd)
    return "opens"


def mixing(mib: int) -> list[tuple[str, str]]:
    m = Mounted("passthrough", mib)
    try:
        out = []
        r = os.open(m.data, os.O_RDONLY)
        out.append(("a read-only open (passthrough) is held; a writable open (classic) of the same file",
                    try_open(m.data, os.O_WRONLY)))
        out.append(("the same, a second read-only open (passthrough, same backing file)",
                    try_open(m.data, os.O_RDONLY)))
        os.close(r)
        w = os.open(m.data, os.O_WRONLY)
        out.append(("a writable open (classic) is held; a read-only open (passthrough)",
                    try_open(m.data, os.O_RDONLY)))
        os.close(w)
        out.append(("nothing held; a writable open (classic)", try_open(m.data, os.O_WRONLY)))
        return out
    finally:
        m.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=1024, help="MiB")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out")
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--locked", "--release", "--quiet", "--example", "passthrough_probe"],
                   cwd=REPO, check=True)
    times = {"classic": [], "passthrough": [], "tmpfs": []}
    tmp = tempfile.mkdtemp(prefix="memfs-probe-tmpfs-")
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={args.size + 64}m", "tmpfs", tmp], check=True)
    try:
        with open(os.path.join(tmp, "data"), "wb") as f:
            chunk = bytes(i % 251 for i in range(1 << 20))
            for _ in range(args.size):
                f.write(chunk)
        for _ in range(args.runs):
            for mode in ("classic", "passthrough"):
                m = Mounted(mode, args.size)
                try:
                    times[mode].append(read_all(m.data))
                finally:
                    m.close()
            times["tmpfs"].append(read_all(os.path.join(tmp, "data")))
    finally:
        subprocess.run(["umount", tmp], check=False)
        os.rmdir(tmp)
    mix = mixing(16)
    rate = {k: args.size / statistics.median(v) for k, v in times.items()}
    lines = [
        f"- Machine: {os.cpu_count()} cores, Linux {platform.release()}; date {time.strftime('%Y-%m-%d')}; "
        f"command: `scripts/bench_passthrough.py --size {args.size} --runs {args.runs}`; medians of {args.runs}.",
        "",
        f"| sequential read of {args.size} MiB, 1 MiB reads, first read after mounting | MiB/s | of tmpfs |",
        "|---|---|---|",
    ]
    for k in ("classic", "passthrough", "tmpfs"):
        lines.append(f"| {k} | {rate[k]:.0f} | {rate[k] / rate['tmpfs']:.0%} |")
    lines += ["", "| the kernel's rule on mixing opens of one file | outcome |", "|---|---|"]
    lines += [f"| {what} | {outcome} |" for what, outcome in mix]
    text = "\n".join(lines)
    print(text)
    if args.out:
        pathlib.Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
