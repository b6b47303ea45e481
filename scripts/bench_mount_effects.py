#!/usr/bin/env python3
"""What each of the mount's kernel-side features is worth (issue 24): the
mount rows of scripts/bench.py for memfs as it is, for memfs with one
feature turned back to classic FUSE (`MEMFS_FUSE_CLASSIC`, see
crates/fuse/src/tuning.rs), for memfs with all of them classic, and for the FUSE
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
# Off by default, measured turned on (MEMFS_FUSE_TRY).
TRIED = ["cachedir"]


def rows(args, work, kind, classic, tar, tried=""):
    os.environ["MEMFS_FUSE_CLASSIC"] = classic
    os.environ["MEMFS_FUSE_TRY"] = tried
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
        os.environ.pop("MEMFS_FUSE_TRY", None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memfs", required=True)
    ap.add_argument("--floor", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--small", type=int, default=10_000)
    ap.add_argument("--seq", type=int, default=1024, help="MiB")
    ap.add_argument("--crates", type=int, default=1000)
    ap.add_argument("--out")
    work = tempfile.mkdtemp(prefix="memfs-effects-")
    os.chmod(work, 0o755)
    ap.add_argument("--only-tried", action="store_true", help="memfs as it is and with each tried feature, no peers")
    args = ap.parse_args()
    configs = [("memfs", "memfs", "", "")] + [(f"memfs, {f} on", "memfs", "", f) for f in TRIED]
    if not args.only_tried:
        configs += [(f"memfs, {f} classic", "memfs", f, "") for f in FEATURES] + \
            [("memfs, all classic", "memfs", "all", ""), ("floor", "floor", "", ""), ("tmpfs", "tmpfs", "", "")]
    results = {}
    try:
        tar, crates, files = bench.make_source_tarball(work, args.crates)
        for name, kind, classic, tried in configs:
            results[name] = rows(args, work, kind, classic, tar, tried)
            print(f"  {name} done", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    base = results["memfs"]
    peers = not args.only_tried
    tmpfs, floor = (results["tmpfs"], results["floor"]) if peers else (None, None)
    L = [f"Mount features, one run: {time.strftime('%Y-%m-%d')}, commit {bench.commit()}, medians of {args.runs}; "
         f"sequential {args.seq} MiB, {args.small} small files, untar of {crates} crates ({files} files).", ""]
    names = [c[0] for c in configs]
    L.append("| row | " + " | ".join(names) + (" | memfs / tmpfs | memfs / floor |" if peers else " |"))
    L.append("|---|" + "---|" * (len(names) + (2 if peers else 0)))
    for row in base:
        cells = [f"{results[n][row]:,.3g}" for n in names]
        tail = f" | {base[row] / tmpfs[row]:.2f} | {base[row] / floor[row]:.2f} |" if peers else " |"
        L.append(f"| {row} | " + " | ".join(cells) + tail)
    shown = [(f, f"memfs, {f} classic", "classic") for f in FEATURES] if peers else []
    shown += [(f, f"memfs, {f} on", "on") for f in TRIED]
    if peers:
        shown.append(("all", "memfs, all classic", "classic"))
    L += ["", "Each feature's effect, the feature's other setting / memfs as it is (times: > 1 means memfs as it is "
          "is faster; rates: < 1 means it is faster):", "",
          "| row | " + " | ".join(f"{f} {how}" for f, _, how in shown) + " |", "|---|" + "---|" * len(shown)]
    for row in base:
        cells = [f"{results[name][row] / base[row]:.2f}" for _, name, _ in shown]
        L.append(f"| {row} | " + " | ".join(cells) + " |")
    report = "\n".join(L) + "\n"
    print(report)
    if args.out:
        Path(args.out).write_text(report)


if __name__ == "__main__":
    main()
