#!/usr/bin/env python3
"""Builds the search benchmark's corpus: up to N text files and B bytes of
Markdown, Rust and TOML taken from the local cargo registry's sources (the
same kind of corpus as docs/SECRETS.md's), each at most 1 MiB, copied into
OUT under names a memory can hold. Deterministic for a given registry.

    scripts/search_corpus.py OUT [--files 10000] [--bytes 100000000]
"""
import argparse
import hashlib
import os
import re
import sys

OK = re.compile(r"^[A-Za-z0-9._-]+$")


def candidates(root):
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for f in sorted(files):
            if f.endswith((".md", ".rs", ".toml")):
                p = os.path.join(d, f)
                try:
                    st = os.lstat(p)
                except OSError:
                    continue
                if 0 < st.st_size <= 1 << 20 and os.path.isfile(p):
                    yield p, st.st_size


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--files", type=int, default=10000)
    ap.add_argument("--bytes", type=int, default=100_000_000)
    ap.add_argument("--source", default=os.path.expanduser("~/.cargo/registry/src"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    every = list(candidates(a.source))
    if not every:
        sys.exit("no source files under " + a.source)
    # A fixed shuffle spreads the picks over the whole registry; a file is
    # taken while the running total stays on course for B bytes in N files.
    every.sort(key=lambda t: hashlib.sha256(t[0].encode()).digest())
    picked, total = [], 0
    for p, n in every:
        if len(picked) >= a.files:
            break
        if total + n <= a.bytes * (len(picked) + 1) / a.files + (1 << 20):
            picked.append((p, n))
            total += n
    for i, (p, _) in enumerate(sorted(picked)):
        rel = os.path.relpath(p, a.source).split(os.sep)
        crate = rel[1] if len(rel) > 2 else "x"
        name = rel[-1]
        crate = crate if OK.match(crate) else "crate"
        name = name if OK.match(name) else "file"
        sub = os.path.join(a.out, crate[:60])
        os.makedirs(sub, exist_ok=True)
        with open(p, "rb") as src, open(os.path.join(sub, "%05d-%s" % (i, name[:60])), "wb") as dst:
            dst.write(src.read())
    print("%d files, %d bytes in %s" % (len(picked), total, a.out))


if __name__ == "__main__":
    main()
