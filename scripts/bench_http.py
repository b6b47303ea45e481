#!/usr/bin/env python3
"""The HTTP door, measured in one run beside the local doors it stands next to.

1. Latency: memory create, update and retrieve through the memory stores API
   with the pinned SDK's own client (`client.beta.memory_stores`), against
   the same operations through the memory tool over stdio (`memfs serve
   --stdio`, one call at a time: create, str_replace, view) and through
   `memfs exec` (one process per call); p50 and p99, and the ratios.
2. Many stores in one server: creating N stores through the API; the cost of
   a store's first use (the server opens it) against a later call; the
   server's RSS with N stores and none open, and per store it holds open
   while idle; requests/s across stores with 64 concurrent connections
   (`wrk`, on loopback), each a create of a new memory in a random open
   store, with every acknowledged create then found (no lost update).

usage: bench_http.py MEMFS_BIN [--calls N] [--stores N] [--open N] [--seconds S] [--out FILE]
"""
import argparse
import json
import os
import pathlib
import platform
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import anthropic

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "python"))
from http_server import Server  # noqa: E402


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def ms(x):
    return f"{x * 1000:.2f}"


def rss_kib(pid):
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def timed(f):
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def latency_api(server, calls):
    c = anthropic.Anthropic(api_key=server.token("--admin", "--name", "lat"), base_url=server.url, max_retries=0)
    store = c.beta.memory_stores.create(name="latency").id
    m = c.beta.memory_stores.memories
    out = {"create": [], "update": [], "retrieve": []}
    for i in range(calls):
        made = []
        out["create"].append(timed(lambda: made.append(m.create(store, path=f"/bench/{i}.md", content=f"note {i}\n" * 10))))
        mid = made[0].id
        out["update"].append(timed(lambda: m.update(mid, memory_store_id=store, content=f"note {i} changed\n" * 10)))
        out["retrieve"].append(timed(lambda: m.retrieve(mid, memory_store_id=store)))
    return out


def latency_raw(server, calls):
    """The same calls as plain HTTP/1.1 on one kept-alive connection: the
    door's own cost, without the SDK's client (Python, httpx, pydantic)."""
    import http.client
    token = server.token("--admin", "--name", "raw")
    host, port = server.url.split("//")[1].split(":")
    conn = http.client.HTTPConnection(host, int(port))
    auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def call(method, path, body=None):
        conn.request(method, path, None if body is None else json.dumps(body), auth)
        r = conn.getresponse()
        data = r.read()
        assert r.status == 200, (r.status, data)
        return json.loads(data)

    store = call("POST", "/v1/memory_stores", {"name": "raw"})["id"]
    base = f"/v1/memory_stores/{store}/memories"
    out = {"create": [], "update": [], "retrieve": []}
    for i in range(calls):
        made = []
        out["create"].append(timed(lambda: made.append(
            call("POST", base, {"path": f"/bench/{i}.md", "content": f"note {i}\n" * 10}))))
        mid = made[0]["id"]
        out["update"].append(timed(lambda: call("POST", f"{base}/{mid}", {"content": f"note {i} changed\n" * 10})))
        out["retrieve"].append(timed(lambda: call("GET", f"{base}/{mid}?view=full")))
    conn.close()
    return out


def latency_stdio(memfs, data, calls):
    p = subprocess.Popen([memfs, "--data", str(data), "serve", "--stdio"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
    out = {"create": [], "update": [], "retrieve": []}

    def call(obj):
        p.stdin.write(json.dumps(obj) + "\n")
        p.stdin.flush()
        answer = json.loads(p.stdout.readline())
        assert not answer["is_error"], answer

    for i in range(calls):
        path = f"/memories/bench/{i}.md"
        out["create"].append(timed(lambda: call({"command": "create", "path": path, "file_text": f"note {i}\n" * 10})))
        out["update"].append(timed(lambda: call({"command": "str_replace", "path": path, "old_str": f"note {i}\n" * 10, "new_str": f"note {i} changed\n" * 10})))
        out["retrieve"].append(timed(lambda: call({"command": "view", "path": path})))
    p.stdin.close()
    p.wait(timeout=30)
    return out


def latency_exec(memfs, data, calls):
    out = {"create": [], "update": [], "retrieve": []}

    def run(obj):
        subprocess.run([memfs, "--data", str(data), "exec", json.dumps(obj)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    for i in range(calls):
        path = f"/memories/bench/{i}.md"
        out["create"].append(timed(lambda: run({"command": "create", "path": path, "file_text": f"note {i}\n" * 10})))
        out["update"].append(timed(lambda: run({"command": "str_replace", "path": path, "old_str": f"note {i}\n" * 10, "new_str": f"note {i} changed\n" * 10})))
        out["retrieve"].append(timed(lambda: run({"command": "view", "path": path})))
    return out


WRK_LUA = r"""
local stores = {}
for line in io.lines(os.getenv("MEMFS_BENCH_STORES")) do stores[#stores + 1] = line end
local token = os.getenv("MEMFS_BENCH_TOKEN")
local prefix = os.getenv("MEMFS_BENCH_PREFIX") or "t"
local counter = 0
local thread_id = 0
created = 0
local threads = {}
function setup(thread)
  thread:set("id", #threads + 1)
  threads[#threads + 1] = thread
end
function init(args)
  thread_id = id
  math.randomseed(id * 7919)
end
function request()
  counter = counter + 1
  local s = stores[math.random(#stores)]
  local body = '{"path": "/load/' .. prefix .. thread_id .. '-' .. counter .. '.md", "content": "load ' .. counter .. '"}'
  return wrk.format("POST", "/v1/memory_stores/" .. s .. "/memories",
    {["Authorization"] = "Bearer " .. token, ["Content-Type"] = "application/json"}, body)
end
function response(status, headers, body)
  if status == 200 then created = created + 1 end
end
function done(summary, latency, requests)
  local total = 0
  for _, t in ipairs(threads) do total = total + t:get("created") end
  io.write(string.format("MEMFS_RESULT %d %d %d %d %d\n", summary.requests, total,
    summary.errors.status, summary.errors.connect + summary.errors.read + summary.errors.write,
    summary.errors.timeout))
  io.write(string.format("MEMFS_LATENCY %f %f\n", latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
"""


def many_stores(memfs, root, n_stores, n_open, seconds):
    s = Server(memfs, root, "--store-idle", "3600", "--http-rate", "1000000000", "--http-burst", "1000000000")
    res = {}
    try:
        token = s.token("--admin", "--name", "load")
        c = anthropic.Anthropic(api_key=token, base_url=s.url, max_retries=0)
        made = []
        t0 = time.perf_counter()
        creates = []
        for i in range(n_stores):
            creates.append(timed(lambda: made.append(c.beta.memory_stores.create(name=f"s{i}").id)))
        res["store_create_p50"] = statistics.median(creates)
        res["store_create_total"] = time.perf_counter() - t0
        # A restart: N stores known, none open.
        assert s.stop() == 0
        s = Server(memfs, root, "--store-idle", "3600", "--http-rate", "1000000000", "--http-burst", "1000000000", "-v")
        c = anthropic.Anthropic(api_key=token, base_url=s.url, max_retries=5)
        time.sleep(0.5)
        res["rss_none_open_kib"] = rss_kib(s.proc.pid)
        m = re.search(r"open files: (\d+) at most; up to (\d+) stores", "".join(s.log))
        res["limits"] = m.groups() if m else ("?", "?")
        first, second = [], []
        sample = made[:n_open]
        res["at"] = []
        for i, sid in enumerate(sample, 1):
            first.append(timed(lambda: c.beta.memory_stores.memories.create(sid, path="/first.md", content="one")))
            second.append(timed(lambda: c.beta.memory_stores.memories.create(sid, path="/second.md", content="two")))
            if i in (100, 1000, 10000) or i == len(sample):
                held = sum((root / x / ".memfs" / "sock").exists() for x in sample[:i])
                res["at"].append((i, held, len(os.listdir(f"/proc/{s.proc.pid}/task")),
                                  rss_kib(s.proc.pid), len(os.listdir(f"/proc/{s.proc.pid}/fd"))))
        res["first_use_p50"] = statistics.median(first)
        res["first_use_p99"] = pct(first, 99)
        res["later_call_p50"] = statistics.median(second)
        # Listing with every store in the root: a token that reaches one,
        # and an admin's first page.
        one = anthropic.Anthropic(api_key=s.token("--store", made[-1]), base_url=s.url, max_retries=0)
        res["list_one_p50"] = statistics.median(
            [timed(lambda: one.beta.memory_stores.list(limit=1)) for _ in range(200)])
        res["list_admin_p50"] = statistics.median(
            [timed(lambda: c.beta.memory_stores.list(limit=1)) for _ in range(200)])
        time.sleep(0.5)
        res["rss_open_kib"] = rss_kib(s.proc.pid)
        res["rss_per_open_store_kib"] = (res["rss_open_kib"] - res["rss_none_open_kib"]) / max(1, n_open)
        res["threads_open"] = len(os.listdir(f"/proc/{s.proc.pid}/task"))
        with tempfile.TemporaryDirectory() as tmp:
            stores_file = pathlib.Path(tmp) / "stores"
            stores_file.write_text("\n".join(sample) + "\n")
            lua = pathlib.Path(tmp) / "create.lua"
            lua.write_text(WRK_LUA)
            env = dict(os.environ, MEMFS_BENCH_STORES=str(stores_file), MEMFS_BENCH_TOKEN=token)
            out = subprocess.run(["wrk", "-t", "2", "-c", "64", "-d", f"{seconds}s", "--timeout", "10s",
                                  "-s", str(lua), s.url], capture_output=True, text=True, env=env, check=True).stdout
        m = re.search(r"MEMFS_RESULT (\d+) (\d+) (\d+) (\d+) (\d+)", out)
        requests, created, status_errors, socket_errors, timeouts = map(int, m.groups())
        lat = re.search(r"MEMFS_LATENCY ([\d.]+) ([\d.]+)", out)
        res["wrk_requests"] = requests
        res["wrk_rps"] = requests / seconds
        res["wrk_created"] = created
        res["wrk_errors"] = status_errors + socket_errors + timeouts
        res["wrk_p50_ms"], res["wrk_p99_ms"] = float(lat.group(1)), float(lat.group(2))
        # Every acknowledged create is there.
        found = 0
        for sid in sample:
            found += sum(1 for _ in c.beta.memory_stores.memories.list(sid, path_prefix="/load/", limit=100))
        res["found"] = found
    finally:
        code = s.stop()
        res["exit"] = code
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("memfs")
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--stores", type=int, default=10000)
    ap.add_argument("--open", type=int, default=1000)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--out")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        s = Server(a.memfs, tmp / "lat", "--http-rate", "1000000000", "--http-burst", "1000000000")
        try:
            api = latency_api(s, a.calls)
            raw = latency_raw(s, a.calls)
        finally:
            s.stop()
        stdio = latency_stdio(a.memfs, tmp / "stdio", a.calls)
        ex = latency_exec(a.memfs, tmp / "exec", max(10, a.calls // 5))
        many = many_stores(a.memfs, tmp / "many", a.stores, min(a.open, a.stores), a.seconds)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    lines = [
        "# HTTP door benchmarks",
        "",
        f"Machine: {cpu}, {os.cpu_count()} cores, Linux {platform.release()}. "
        f"Command: `scripts/bench_http.py target/release/memfs --calls {a.calls} --stores {a.stores} --open {a.open} --seconds {a.seconds}`"
        f" at {subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True).stdout.strip()}.",
        "",
        "## One call at a time: the API with the SDK's client, the tool over stdio, `memfs exec`",
        "",
        "| op | API (SDK) p50 ms | API (SDK) p99 ms | HTTP p50 ms | HTTP p99 ms | stdio p50 ms | stdio p99 ms | exec p50 ms | exec p99 ms | API (SDK) / stdio | HTTP / stdio | API (SDK) / exec |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for op in ["create", "update", "retrieve"]:
        A, R, S, E = api[op], raw[op], stdio[op], ex[op]
        lines.append(f"| {op} | {ms(pct(A, 50))} | {ms(pct(A, 99))} | {ms(pct(R, 50))} | {ms(pct(R, 99))} | "
                     f"{ms(pct(S, 50))} | {ms(pct(S, 99))} | {ms(pct(E, 50))} | {ms(pct(E, 99))} | "
                     f"{pct(A, 50) / pct(S, 50):.2f}x | {pct(R, 50) / pct(S, 50):.2f}x | {pct(A, 50) / pct(E, 50):.2f}x |")
    lines += [
        "",
        f"API (SDK): {a.calls} of each through `client.beta.memory_stores.memories` (create, update with new content, retrieve with content); "
        "HTTP: the same requests as plain HTTP/1.1 on one kept-alive connection (`http.client`), the door's own cost without the SDK's client; "
        f"stdio: {a.calls} of each (create, str_replace, view) on one `memfs serve --stdio`; exec: {max(10, a.calls // 5)} of each, one process per call on a data dir no other memfs owns. "
        "Every write is durable (one journal flush) before it is answered, through every door.",
        "",
        f"## {a.stores} stores in one server",
        "",
        "| what | figure |",
        "|---|---|",
        f"| create a store through the API (p50) | {ms(many['store_create_p50'])} ms ({many['store_create_total']:.1f} s for all) |",
        f"| server RSS with {a.stores} stores, none open | {many['rss_none_open_kib'] / 1024:.1f} MiB |",
        f"| first use of a store (the server opens it; a create), p50 / p99 | {ms(many['first_use_p50'])} / {ms(many['first_use_p99'])} ms |",
        f"| a later create on the open store, p50 | {ms(many['later_call_p50'])} ms |",
        f"| RSS per open idle store ({min(a.open, a.stores)} used) | {many['rss_per_open_store_kib']:.0f} KiB ({many['threads_open']} threads in all) |",
        f"| listing stores, `limit=1`, p50: a token that reaches one / an admin ({a.stores} stores) | {ms(many['list_one_p50'])} / {ms(many['list_admin_p50'])} ms |",
        f"| the server's limit on open files / stores it holds open at most | {many['limits'][0]} / {many['limits'][1]} |",
    ] + [
        f"| after {i} stores used: open / threads / RSS / file descriptors | {held} / {th} / {rss / 1024:.1f} MiB / {fds} |"
        for i, held, th, rss, fds in many["at"]
    ] + [
        f"| creates/s across {min(a.open, a.stores)} stores, 64 connections (wrk, {a.seconds} s) | {many['wrk_rps']:.0f} (p50 {many['wrk_p50_ms']:.2f} ms, p99 {many['wrk_p99_ms']:.2f} ms) |",
        f"| errors / creates acknowledged to wrk / found afterwards (wrk drops the answers in flight at its deadline) | {many['wrk_errors']} / {many['wrk_created']} / {many['found']} |",
        f"| server exit after SIGTERM | {many['exit']} |",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if a.out:
        pathlib.Path(a.out).write_text(text + "\n")
    # wrk stops reading at the deadline: a create answered after it is
    # there but not counted, so every counted one must be found.
    ok = many["wrk_errors"] == 0 and many["found"] >= many["wrk_created"] and many["exit"] == 0
    if not ok:
        print("FAILED: an error, a lost create or a bad exit", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
