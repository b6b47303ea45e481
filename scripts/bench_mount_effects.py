#!/usr/bin/env python3
"""What each of the mount's kernel-side features is worth (issue 24): the
mount rows of scripts/bench.py for memfs as it is, for memfs with one
feature turned back to classic FUSE (`MEMFS_FUSE_CLASSIC`, see
src/fuse/tuning.rs), for memfs with all of them classic, and for the FUSE
floor and tmpfs, all in one run. Prints a Markdown table of each row's
figure and, per feature, the ratio classic / default (for times > 1 means
the feature helps; for rates < 1 does).

Needs root (tmpfs mounts, the read-ahead knob). Nothing here is a test.

usage: bench_mount_effects.py --memfs BIN --floor BIN [--runs N] [--small N] [--seq MIB] [--out FILE]
"""
import argparse
import os
import sys
import tempfile
import time
import shutil
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402

FEATURES = ["ttl", "noflush", "readahead"]


def rows(args, work, kind, classic, tar):
    os.environ["MEMFS_FUSE_CLASSIC"] = classic
    try:
        runs = []
        for _ in range(args.runs):
            with bench.Fs(kind, args, work) as fs:
                row = {}
                row.update(bench.seq(fs, args.seq * bench.MiB))
                row.update(bench.small_files(fs, args.small))
                row.update(bench.untar_git(fs, tar))
                # A listing read again (the kernel's cached listing) and `ls -l`.
                d = fs.mnt / "list"
                d.mkdir()
                for i in range(args.small):
                    (d / f"f{i:05d}").write_bytes(b"x")
                fs.settle()
                os.listdir(d)
                row["list a directory again, x20 (s)"] = bench.timed(lambda: [os.listdir(d) for _ in range(20)])
                row["ls -l it, warm (s)"] = bench.timed(lambda: bench.sh("ls", "-l", str(d)))
                shutil.rmtree(d)
                runs.append(row)
        return {k: bench.median([r[k] for r in runs]) for k in runs[0]}
    finally:
        os.environ.pop("MEMFS_FUSE_CLASSIC", None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memfs", required=True)
    ap.add_argument("--floor", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--small", type=int, default=10_000)
    ap.add_argument("--seq", type=int, default=1024, help="MiB")
    ap.add_argument("--crates", type=int, default=1000)
    ap.add_argument("--out")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="memfs-effects-")
    os.chmod(work, 0o755)
    configs = [("memfs", "memfs", "")] + [(f"memfs, {f} classic", "memfs", f) for f in FEATURES] + \
        [("memfs, all classic", "memfs", "all"), ("floor", "floor", ""), ("tmpfs", "tmpfs", "")]
    results = {}
    try:
        tar, crates, files = bench.make_source_tarball(work, args.crates)
        for name, kind, classic in configs:
            results[name] = rows(args, work, kind, classic, tar)
            print(f"  {name} done", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    base, tmpfs, floor = results["memfs"], results["tmpfs"], results["floor"]
    L = [f"Mount features, one run: {time.strftime('%Y-%m-%d')}, commit {bench.commit()}, medians of {args.runs}; "
         f"sequential {args.seq} MiB, {args.small} small files, untar of {crates} crates ({files} files).", ""]
    names = [n for n, _, _ in configs]
    L.append("| row | " + " | ".join(names) + " | memfs / tmpfs | memfs / floor |")
    L.append("|---|" + "---|" * (len(names) + 2))
    for row in base:
        higher = "/s" in row
        cells = [f"{results[n][row]:,.3g}" for n in names]
        L.append(f"| {row} | " + " | ".join(cells) + f" | {base[row] / tmpfs[row]:.2f} | {base[row] / floor[row]:.2f} |")
    L += ["", "Each feature's effect, classic / default (times: > 1 means the feature saves time; rates: < 1 means it adds throughput):", "",
          "| row | " + " | ".join(FEATURES) + " | all |", "|---|" + "---|" * (len(FEATURES) + 1)]
    for row in base:
        cells = [f"{results[f'memfs, {f} classic'][row] / base[row]:.2f}" for f in FEATURES]
        cells.append(f"{results['memfs, all classic'][row] / base[row]:.2f}")
        L.append(f"| {row} | " + " | ".join(cells) + " |")
    report = "\n".join(L) + "\n"
    print(report)
    if args.out:
        Path(args.out).write_text(report)


if __name__ == "__main__":
    main()
