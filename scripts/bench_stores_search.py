#!/usr/bin/env python3
"""What an open store costs with search on, beside `--no-search`, in one run
(issue 54).

For each mode, one `memfs --stores ROOT serve --http` on a fresh root: N
stores made through the API (plain HTTP/1.1 on one kept-alive connection),
each with three one-line memories and, with search on, one search that
must find one of them (`--no-search` answers a search with 503). Then the server's resident memory (RssAnon and RssFile), threads,
memory maps and file descriptors: right after the load, and after it has
sat idle for each of --idle seconds. The ratio search-on / --no-search is
the issue's measure (1,000 idle stores within 2x; 10,000 stores within
1 GiB and 64 threads).

Threads are named in the output (from /proc/PID/task/*/comm), so that a
leftover pool shows whose it is.

usage: bench_stores_search.py MEMFS_BIN [--stores N] [--idle S,S] [--modes search,no-search]
       [--env K=V ...] [--out FILE]
"""
import argparse
import collections
import http.client
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "python"))
from http_server import Server  # noqa: E402


def proc_figures(pid):
    status = {}
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        status[k] = v.strip()
    kib = lambda k: int(status.get(k, "0 kB").split()[0])  # noqa: E731
    tasks = pathlib.Path(f"/proc/{pid}/task")
    names = collections.Counter()
    for t in tasks.iterdir():
        try:
            names[(t / "comm").read_text().strip()] += 1
        except OSError:
            pass
    with open(f"/proc/{pid}/maps") as f:
        maps = sum(1 for _ in f)
    return {
        "rss": kib("VmRSS"), "anon": kib("RssAnon"), "file": kib("RssFile"),
        "threads": sum(names.values()), "names": dict(names.most_common()),
        "maps": maps, "fds": len(os.listdir(f"/proc/{pid}/fd")),
    }


def load(server, n_stores, search):
    token = server.token("--admin", "--name", "bench")
    host, port = server.url.split("//")[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def call(method, path, body=None):
        conn.request(method, path, None if body is None else json.dumps(body), auth)
        r = conn.getresponse()
        data = r.read()
        if r.status != 200:
            raise SystemExit(f"{method} {path}: {r.status} {data[:300]!r}")
        return json.loads(data)

    t0 = time.perf_counter()
    searched = []
    for i in range(n_stores):
        sid = call("POST", "/v1/memory_stores", {"name": f"s{i}"})["id"]
        base = f"/v1/memory_stores/{sid}"
        for j, word in enumerate(("alpha", "bravo", f"charlie{i}")):
            call("POST", f"{base}/memories", {"path": f"/notes/{j}.md", "content": f"{word} note {j} of store {i}\n"})
        if not search:
            continue
        t = time.perf_counter()
        hits = call("GET", f"{base}/search?q=charlie{i}")
        searched.append(time.perf_counter() - t)
        found = [h.get("path") for h in hits.get("data", [])]
        if "/notes/2.md" not in found:
            raise SystemExit(f"store {i}: the search found {found}, not /notes/2.md")
    conn.close()
    return time.perf_counter() - t0, searched


def run_mode(memfs, root, mode, n_stores, idles, env):
    extra = ["--store-idle", "3600", "--http-rate", "1000000000", "--http-burst", "1000000000"]
    if mode == "no-search":
        extra.append("--no-search")
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        s = Server(memfs, root, *extra)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    try:
        time.sleep(0.5)
        out = {"start": proc_figures(s.proc.pid)}
        took, searched = load(s, n_stores, mode != "no-search")
        out["load_s"] = took
        searched.sort()
        out["search_p50_ms"] = searched[len(searched) // 2] * 1000 if searched else float("nan")
        out["after"] = proc_figures(s.proc.pid)
        waited = 0
        for idle in idles:
            time.sleep(idle - waited)
            waited = idle
            out[f"idle{idle}"] = proc_figures(s.proc.pid)
    finally:
        out["exit"] = s.stop()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("memfs")
    ap.add_argument("--stores", type=int, default=300)
    ap.add_argument("--idle", default="15,75", help="seconds idle at which to sample, comma-separated")
    ap.add_argument("--modes", default="search,no-search")
    ap.add_argument("--env", action="append", default=[], help="K=V for the server's environment")
    ap.add_argument("--out")
    a = ap.parse_args()
    idles = [int(x) for x in a.idle.split(",") if x]
    env = dict(kv.split("=", 1) for kv in a.env)
    modes = a.modes.split(",")
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in modes:
            res[mode] = run_mode(a.memfs, pathlib.Path(tmp) / mode, mode, a.stores, idles, env)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    envs = " ".join(f"--env {k}={v}" for k, v in env.items())
    lines = [
        f"Machine: {cpu}, {os.cpu_count()} cores, Linux {platform.release()}. Command: "
        f"`scripts/bench_stores_search.py target/release/memfs --stores {a.stores} --idle {a.idle} {envs}`"
        f" at {head}.",
        "",
        "| mode | when | RSS MiB | anon MiB | file MiB | threads | maps | fds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for mode in modes:
        r = res[mode]
        for when in ["start", "after"] + [f"idle{i}" for i in idles]:
            f = r[when]
            label = {"start": "started", "after": f"after {a.stores} stores"}.get(when, f"idle {when[4:]} s")
            lines.append(f"| {mode} | {label} | {f['rss'] / 1024:.1f} | {f['anon'] / 1024:.1f} | {f['file'] / 1024:.1f} "
                         f"| {f['threads']} | {f['maps']} | {f['fds']} |")
    lines.append("")
    for mode in modes:
        r = res[mode]
        lines.append(f"- {mode}: load {r['load_s']:.1f} s, search p50 {r['search_p50_ms']:.2f} ms, "
                     f"exit {r['exit']}; threads after: {r['after']['names']}")
    if "search" in res and "no-search" in res:
        for when in ["after"] + [f"idle{i}" for i in idles]:
            s, n = res["search"][when]["rss"], res["no-search"][when]["rss"]
            lines.append(f"- RSS search / no-search, {when}: {s / max(1, n):.2f}x")
    text = "\n".join(lines)
    print(text)
    if a.out:
        pathlib.Path(a.out).write_text(text + "\n")
    if any(r["exit"] != 0 for r in res.values()):
        print("FAILED: a server did not exit cleanly", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
