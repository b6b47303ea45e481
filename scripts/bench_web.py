#!/usr/bin/env python3
"""The page for people on a big memory: FILES files and VERSIONS versions
(made through `memfs serve --stdio`, pipelined), then `memfs web` beside the
owner, timed from a logged-in HTTP client: its start (reading the history),
and each view (the tree, the whole history, a file, a version's diff, the
review queue), each fetched RUNS times (p50 and the slowest).

usage: bench_web.py MEMFS_BIN [--files N] [--versions N] [--runs N] [--out FILE]
"""
import argparse
import http.cookiejar
import json
import os
import pathlib
import platform
import statistics
import subprocess
import tempfile
import time
import urllib.request


def make_memory(memfs, data, files, versions):
    p = subprocess.Popen([memfs, "--data", str(data), "serve", "--stdio"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1 << 20)
    lines = []
    for i in range(files):
        lines.append(json.dumps({"command": "create", "path": f"/memories/d{i % 100:02}/f{i:05}.md",
                                 "file_text": f"file {i}\nline two\n"}))
    for j in range(versions - files):
        i = j % files
        lines.append(json.dumps({"command": "insert", "path": f"/memories/d{i % 100:02}/f{i:05}.md",
                                 "insert_line": 1, "insert_text": f"edit {j}"}))
    t0 = time.time()

    def feed():
        for line in lines:
            p.stdin.write(line + "\n")
        p.stdin.close()

    import threading
    threading.Thread(target=feed, daemon=True).start()
    errors = 0
    for _ in lines:
        if json.loads(p.stdout.readline())["is_error"]:
            errors += 1
    p.wait(timeout=600)
    assert errors == 0, errors
    return time.time() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("memfs")
    ap.add_argument("--files", type=int, default=10000)
    ap.add_argument("--versions", type=int, default=100000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = pathlib.Path(tmp) / "data"
        made = make_memory(a.memfs, data, a.files, a.versions)
        owner = subprocess.Popen([a.memfs, "--data", str(data), "serve", "--idle-exit", "0"],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while not (data / ".memfs" / "sock").exists():
            time.sleep(0.05)
        t0 = time.time()
        web = subprocess.Popen([a.memfs, "--data", str(data), "web"], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
        url = web.stdout.readline().strip()
        started = time.time() - t0
        base = url.split("/login")[0]
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        opener.open(url).read()
        views = {
            "tree (/)": "/",
            "history, newest 200": "/history",
            "a file with its history": "/file?path=/memories/d07/f00007.md",
            "a version's diff": f"/diff?version={a.versions - 1}",
            "review queue (first 50 diffs)": "/review",
            "live check (/head)": "/head",
        }
        rows = []
        for name, path in views.items():
            times, size = [], 0
            for _ in range(a.runs):
                t = time.perf_counter()
                body = opener.open(base + path).read()
                times.append(time.perf_counter() - t)
                size = len(body)
            rows.append((name, statistics.median(times), max(times), size))
        web.terminate()
        web.wait(timeout=30)
        owner.terminate()
        owner.wait(timeout=60)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    out = [
        "# The page on a big memory",
        "",
        f"Machine: {cpu}, {os.cpu_count()} cores, Linux {platform.release()}. Command: "
        f"`scripts/bench_web.py target/release/memfs --files {a.files} --versions {a.versions} --runs {a.runs}` at {commit}.",
        "",
        f"A memory of {a.files} files and {a.versions} versions (made in {made:.1f} s through `serve --stdio`); "
        f"`memfs web` beside its owner (`memfs serve`) started and printed its login URL in {started:.2f} s "
        "(it reads the whole history once, then only what is new).",
        "",
        "| view | p50 ms | slowest ms | bytes |",
        "|---|---|---|---|",
    ]
    for name, p50, worst, size in rows:
        out.append(f"| {name} | {p50 * 1000:.1f} | {worst * 1000:.1f} | {size} |")
    text = "\n".join(out) + "\n"
    print(text)
    if a.out:
        pathlib.Path(a.out).write_text(text)


if __name__ == "__main__":
    main()
