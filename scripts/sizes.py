#!/usr/bin/env python3
"""The sizes README.md states, checked against what was built: the release
binary ("a N MB binary") and, when one was built, the Python wheel ("the
wheel is N MB"). Fails when either is more than 20% over the figure the
README gives (so that the figure cannot go stale silently), and when the
README no longer states it.

usage: scripts/sizes.py [--binary PATH] [--wheel PATH] [--readme PATH]
"""
import argparse
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GROWTH = 1.20
MB = 1_000_000


def stated(readme, pattern, what):
    m = re.search(pattern, readme)
    if not m:
        sys.exit(f"sizes: README.md states no size of the {what} (looked for /{pattern}/)")
    return float(m.group(1))


def check(what, path, figure):
    size = os.path.getsize(path) / MB
    most = figure * GROWTH
    verdict = "ok" if size <= most else "OVER"
    print(f"sizes: the {what} is {size:.1f} MB; README.md says {figure:g} MB (at most {most:.1f} MB): {verdict}")
    return size <= most


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=os.path.join(ROOT, "target/release/memfs"))
    ap.add_argument("--wheel", default=None)
    ap.add_argument("--readme", default=os.path.join(ROOT, "README.md"))
    args = ap.parse_args()
    readme = open(args.readme, encoding="utf-8").read()
    ok = check("release binary", args.binary, stated(readme, r"an? ([\d.]+) MB binary", "release binary"))
    wheel = args.wheel or next(iter(sorted(glob.glob(os.path.join(ROOT, "target/wheels/memfs_memory-*.whl")))), None)
    figure = stated(readme, r"the wheel is ([\d.]+) MB", "wheel")
    if wheel:
        ok &= check("wheel", wheel, figure)
    elif os.environ.get("CI") == "true":
        sys.exit("sizes: no wheel in target/wheels under CI=true (scripts/package_python.sh makes it)")
    else:
        print("sizes: no wheel built; its figure is not checked")
    if not ok:
        sys.exit("sizes: measure again, and give README.md (and docs/BENCHMARKS.md) the new figure with its date and command")


if __name__ == "__main__":
    main()
