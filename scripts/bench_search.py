#!/usr/bin/env python3
"""Search on a memory of 10,000 files and 100 MB (issue 36's targets), side by
side with `grep -r` on the same files through the mount and on tmpfs, in one
run. Prints a Markdown report.

    scripts/bench_search.py target/release/memfs [--files 10000] [--bytes 100000000]

1. The corpus (scripts/search_corpus.py) becomes a data dir's plain files.
2. `memfs search` alone, with no index: the full build; again: the index
   opened and compared with the tree. Their difference is the build.
3. An owner mounts it; each query goes through its socket (one connection,
   as a door holds one): p50 and p99 over --runs runs, the engine's work
   and the snippets cut from the live files included.
4. grep -rliwF for the one-word queries (a multi-word query has no grep
   equivalent), through the mount and on tmpfs, --grep-runs each.
5. A person's save through the mount: the time until the next search finds
   it, and the time until the index holds it with nobody searching (its
   meta.json rewritten by the owner's own look at the journal).
"""
import argparse
import json
import os
import pathlib
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent

QUERIES = [
    "deserializer",
    "the",
    "read_to_end",
    "HashMap",
    "serde_json::Value",
    '"thread safe"',
    "serial*",
    "mutex poison",
    "README",
    "unsafe impl Send",
]


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, round((len(v) - 1) * p))]


def du(path):
    return sum(f.stat().st_size for f in pathlib.Path(path).rglob("*") if f.is_file())


class Owner:
    """One connection to the owner's socket, keyed for control lines."""

    def __init__(self, data):
        self.key = (data / ".memfs" / "key").read_text().strip()
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(str(data / ".memfs" / "sock"))
        self.f = self.s.makefile("rwb")
        self.call({"type": "memfs_hello", "key": self.key})

    def call(self, obj):
        self.f.write(json.dumps(obj).encode() + b"\n")
        self.f.flush()
        return json.loads(self.f.readline())

    def search(self, query, limit=20):
        reply = self.call({"type": "memfs_history", "cmd": "search", "query": query,
                           "limit": limit, "json": True, "key": self.key})
        if reply["code"] not in (0, 1):
            raise RuntimeError(reply["err"])
        import base64
        out = base64.b64decode(reply["out"]) if reply["out"] else b'{"results": []}'
        return [r["path"] for r in json.loads(out)["results"]]


def timed(cmd):
    t = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True)
    return time.perf_counter() - t, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("memfs")
    ap.add_argument("--files", type=int, default=10000)
    ap.add_argument("--bytes", type=int, default=100_000_000)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--grep-runs", type=int, default=3)
    ap.add_argument("--saves", type=int, default=50)
    a = ap.parse_args()
    memfs = str(pathlib.Path(a.memfs).resolve())
    work = pathlib.Path(tempfile.mkdtemp(prefix="memfs-bench-search-"))
    shm = pathlib.Path(tempfile.mkdtemp(prefix="memfs-bench-search-", dir="/dev/shm"))
    mnt = work / "mnt"
    mnt.mkdir()
    owner = None
    try:
        corpus = shm / "corpus"
        subprocess.run([sys.executable, str(HERE / "search_corpus.py"), str(corpus),
                        "--files", str(a.files), "--bytes", str(a.bytes)], check=True,
                       stdout=subprocess.DEVNULL)
        files = sum(1 for f in corpus.rglob("*") if f.is_file())
        content = du(corpus)
        data = work / "data"
        (data).mkdir()
        shutil.copytree(corpus, data / "memories")
        # 2. Built from nothing, then opened.
        build_s, out = timed([memfs, "--data", str(data), "search", "zqxnothing"])
        assert out.returncode == 1, out.stderr
        open_s, out = timed([memfs, "--data", str(data), "search", "zqxnothing"])
        index = du(data / ".memfs" / "search")
        # 3. Through the owner's socket.
        owner = subprocess.Popen([memfs, "--data", str(data), "mount", str(mnt)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.time() + 120
        while not (os.path.ismount(mnt) and (data / ".memfs" / "sock").exists()):
            if owner.poll() is not None or time.time() > deadline:
                raise RuntimeError("the owner did not start: " + owner.stderr.read().decode())
            time.sleep(0.05)
        link = Owner(data)
        link.search("warm up")
        rows = []
        pooled = []
        for q in QUERIES:
            hits = link.search(q)
            times = []
            for _ in range(a.runs):
                t = time.perf_counter()
                link.search(q)
                times.append((time.perf_counter() - t) * 1e3)
            pooled += times
            grep_mnt = grep_tmpfs = None
            if q.isalnum():
                g = []
                for where in (mnt, corpus):
                    runs = []
                    for _ in range(a.grep_runs):
                        t = time.perf_counter()
                        subprocess.run(["grep", "-rliwF", "--", q, str(where)],
                                       stdout=subprocess.DEVNULL)
                        runs.append((time.perf_counter() - t) * 1e3)
                    g.append(statistics.median(runs))
                grep_mnt, grep_tmpfs = g
            rows.append((q, len(hits), pct(times, 0.5), pct(times, 0.99), grep_mnt, grep_tmpfs))
        # 5. Saves through the mount.
        found_ms, indexed_ms = [], []
        meta = data / ".memfs" / "search" / "meta.json"
        for i in range(a.saves):
            word = f"zqxsave{i}x"
            before = meta.stat().st_mtime_ns
            t = time.perf_counter()
            (mnt / f"save{i % 10}.md").write_text(f"a person's note {word}\n")
            saved = time.perf_counter()
            if i % 2 == 0:
                while link.search(word) != [f"/memories/save{i % 10}.md"]:
                    pass
                found_ms.append((time.perf_counter() - saved) * 1e3)
            else:
                while meta.stat().st_mtime_ns == before:
                    time.sleep(0.002)
                    if time.perf_counter() - t > 10:
                        raise RuntimeError("never indexed")
                indexed_ms.append((time.perf_counter() - saved) * 1e3)
                assert link.search(word) == [f"/memories/save{i % 10}.md"]
        print("saves found by the next search (ms):", [round(x, 1) for x in found_ms], file=sys.stderr)
        print("saves indexed with nobody searching (ms):", [round(x) for x in indexed_ms], file=sys.stderr)
    finally:
        if owner:
            subprocess.run(["umount", str(mnt)], capture_output=True)
            owner.wait(timeout=60)
        shutil.rmtree(shm, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)

    print(f"Search on {files:,} files, {content / 1e6:.1f} MB "
          f"(`scripts/bench_search.py --files {a.files} --bytes {a.bytes} --runs {a.runs}`), "
          f"{os.cpu_count()} cores.\n")
    print("| | memfs |")
    print("|---|---|")
    print(f"| index size / content | {index / 1e6:.1f} MB / {content / 1e6:.1f} MB = {index / content:.2f} |")
    print(f"| `memfs search` alone, no index (load + full build + search) | {build_s:.2f} s |")
    print(f"| `memfs search` alone, index there (load + compare + search) | {open_s:.2f} s |")
    print(f"| full build (the difference) | {build_s - open_s:.2f} s |")
    print(f"| all queries through the socket, p50 / p99 | {pct(pooled, 0.5):.2f} / {pct(pooled, 0.99):.2f} ms |")
    print(f"| a person's save, found by the next search: p50 / p99 | {pct(found_ms, 0.5):.1f} / {pct(found_ms, 0.99):.1f} ms |")
    print(f"| a person's save, indexed with nobody searching: p50 / p99 | {pct(indexed_ms, 0.5):.0f} / {pct(indexed_ms, 0.99):.0f} ms |")
    print()
    print("| query | files | memfs p50 / p99 (ms) | grep -rliwF, mount (ms) | grep, tmpfs (ms) | grep mount / memfs p50 | grep tmpfs / memfs p50 |")
    print("|---|---|---|---|---|---|---|")
    for q, n, p50, p99, gm, gt in rows:
        g = lambda v: f"{v:.0f}" if v is not None else "—"
        r = lambda v: f"{v / p50:.0f}x" if v is not None else "—"
        print(f"| `{q}` | {n} | {p50:.2f} / {p99:.2f} | {g(gm)} | {g(gt)} | {r(gm)} | {r(gt)} |")


if __name__ == "__main__":
    main()
