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

usage: bench_http.py MEMFS_BIN [--calls N] [--stores N] [--open N] [--seconds S] [--latency-only]
                     [--peer OTHER_MEMFS_BIN] [--floor HTTP_FLOOR_BIN] [--out FILE]
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


OPS = ("create", "update", "retrieve")


class SdkDoor:
    """The API through the pinned SDK's own client."""

    def __init__(self, server):
        self.c = anthropic.Anthropic(api_key=server.token("--admin", "--name", "lat"), base_url=server.url,
                                     max_retries=0)
        self.store = self.c.beta.memory_stores.create(name="latency").id

    def step(self, i):
        m = self.c.beta.memory_stores.memories
        made = []
        create = timed(lambda: made.append(m.create(self.store, path=f"/bench/{i}.md", content=f"note {i}\n" * 10)))
        mid = made[0].id
        update = timed(lambda: m.update(mid, memory_store_id=self.store, content=f"note {i} changed\n" * 10))
        retrieve = timed(lambda: m.retrieve(mid, memory_store_id=self.store))
        return create, update, retrieve

    def close(self):
        pass


class HttpClientDoor:
    """The same requests as plain HTTP/1.1 on one kept-alive connection
    through the standard library's `http.client` (whose header parsing
    costs about as much as the whole stdio call)."""

    def __init__(self, server):
        import http.client
        self.token = server.token("--admin", "--name", "raw")
        host, port = server.url.split("//")[1].split(":")
        self.conn = http.client.HTTPConnection(host, int(port))
        self.auth = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        self.base = f"/v1/memory_stores/{self.call('POST', '/v1/memory_stores', {'name': 'raw'})['id']}/memories"

    def call(self, method, path, body=None):
        self.conn.request(method, path, None if body is None else json.dumps(body), self.auth)
        r = self.conn.getresponse()
        data = r.read()
        assert r.status == 200, (r.status, data)
        return json.loads(data)

    def step(self, i):
        made = []
        create = timed(lambda: made.append(
            self.call("POST", self.base, {"path": f"/bench/{i}.md", "content": f"note {i}\n" * 10})))
        mid = made[0]["id"]
        update = timed(lambda: self.call("POST", f"{self.base}/{mid}", {"content": f"note {i} changed\n" * 10}))
        retrieve = timed(lambda: self.call("GET", f"{self.base}/{mid}?view=full"))
        return create, update, retrieve

    def close(self):
        self.conn.close()


class LeanDoor:
    """HTTP/1.1 on one kept-alive socket with the least client there can
    be: the request is bytes built before the clock starts, the answer read
    to its blank line, then Content-Length bytes; the JSON is parsed after
    the clock stops. As symmetric with the stdio client (a write, a
    readline) as a socket allows: the door's own cost."""

    def __init__(self, server, name="lean"):
        self.connect(server.url, server.token("--admin", "--name", name))
        status, body = self.exchange(self.request("POST", "/v1/memory_stores", {"name": "lean"}))
        assert status == 200, body
        self.base = f"/v1/memory_stores/{json.loads(body)['id']}/memories"

    def connect(self, url, token):
        import socket
        host, port = url.split("//")[1].split(":")
        self.host = f"{host}:{port}"
        self.head = f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        self.sock = socket.create_connection((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def request(self, method, path, body=None):
        data = b"" if body is None else json.dumps(body).encode()
        return (f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\n{self.head}"
                f"Content-Length: {len(data)}\r\n\r\n").encode() + data

    def exchange(self, request):
        self.sock.sendall(request)
        while b"\r\n\r\n" not in self.buf:
            self.buf += self.sock.recv(65536)
        head, _, rest = self.buf.partition(b"\r\n\r\n")
        length = int(re.search(rb"(?i)\r\ncontent-length: *(\d+)", head).group(1))
        while len(rest) < length:
            rest += self.sock.recv(65536)
        self.buf = rest[length:]
        return int(head[9:12]), rest[:length]

    def timed_exchange(self, request):
        t = time.perf_counter()
        status, body = self.exchange(request)
        took = time.perf_counter() - t
        assert status == 200, body
        return took, body

    def step(self, i):
        create, body = self.timed_exchange(
            self.request("POST", self.base, {"path": f"/bench/{i}.md", "content": f"note {i}\n" * 10}))
        mid = json.loads(body)["id"]
        update, _ = self.timed_exchange(
            self.request("POST", f"{self.base}/{mid}", {"content": f"note {i} changed\n" * 10}))
        retrieve, _ = self.timed_exchange(self.request("GET", f"{self.base}/{mid}?view=full"))
        return create, update, retrieve

    def close(self):
        self.sock.close()


class FloorDoor(LeanDoor):
    """The same requests, same client, to `examples/http_floor.rs`: memfs's
    listener answering a fixed memory with nothing behind it (no token, no
    store, no disk). What the transport and the listener cost."""

    def __init__(self, floor_bin, env=None):
        self.p = subprocess.Popen([floor_bin, "127.0.0.1:0"], stdout=subprocess.PIPE, text=True,
                                  env=None if env is None else dict(os.environ, **env))
        url = re.search(r"listening on (http://\S+)", self.p.stdout.readline()).group(1)
        self.connect(url, "memfs_" + "0" * 64)
        self.base = "/v1/memory_stores/memstore_1/memories"

    def step(self, i):
        create, _ = self.timed_exchange(
            self.request("POST", self.base, {"path": f"/bench/{i}.md", "content": f"note {i}\n" * 10}))
        update, _ = self.timed_exchange(
            self.request("POST", f"{self.base}/mem_1", {"content": f"note {i} changed\n" * 10}))
        retrieve, _ = self.timed_exchange(self.request("GET", f"{self.base}/mem_1?view=full"))
        return create, update, retrieve

    def close(self):
        super().close()
        self.p.send_signal(signal.SIGTERM)
        self.p.wait(timeout=30)


class StdioDoor:
    """The memory tool over `memfs serve --stdio` on a data dir of its own,
    one call at a time: create, str_replace, view."""

    def __init__(self, memfs, data):
        self.p = subprocess.Popen([memfs, "--data", str(data), "serve", "--stdio"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)

    def call(self, obj):
        self.p.stdin.write(json.dumps(obj) + "\n")
        self.p.stdin.flush()
        answer = json.loads(self.p.stdout.readline())
        assert not answer["is_error"], answer

    def step(self, i):
        path = f"/memories/bench/{i}.md"
        create = timed(lambda: self.call({"command": "create", "path": path, "file_text": f"note {i}\n" * 10}))
        update = timed(lambda: self.call({"command": "str_replace", "path": path, "old_str": f"note {i}\n" * 10,
                                          "new_str": f"note {i} changed\n" * 10}))
        retrieve = timed(lambda: self.call({"command": "view", "path": path}))
        return create, update, retrieve

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


def interleaved(doors, calls, rounds=10):
    """Each door's calls, in `rounds` turns taken in turn, so that a change
    of the machine's pace (another process, the disk) falls on every door
    alike. Returns door -> op -> [seconds]."""
    out = {name: {op: [] for op in OPS} for name in doors}
    per = max(1, calls // rounds)
    i = 0
    for _ in range(rounds):
        for name, door in doors.items():
            for j in range(i, i + per):
                for op, took in zip(OPS, door.step(j)):
                    out[name][op].append(took)
        i += per
    return out


def latency(memfs, tmp, calls, peer=None, floor=None):
    """Every door's latency in one interleaved run: the API (SDK, http.client,
    lean socket) on one server, each door its own store; the tool over stdio
    on a data dir of its own; and, with `peer`, the same doors of the peer
    binary beside them."""
    bins = {"": memfs} if peer is None else {"": memfs, "peer ": peer}
    servers, doors = [], {}
    try:
        for label, binary in bins.items():
            s = Server(binary, tmp / f"lat{len(servers)}", "--http-rate", "1000000000", "--http-burst", "1000000000")
            servers.append(s)
            doors[f"{label}API (SDK)"] = SdkDoor(s)
            doors[f"{label}HTTP (http.client)"] = HttpClientDoor(s)
            doors[f"{label}HTTP (raw)"] = LeanDoor(s)
            doors[f"{label}stdio"] = StdioDoor(binary, tmp / f"stdio{len(servers)}")
        if floor is not None:
            doors["floor: the listener alone"] = FloorDoor(floor)
        return interleaved(doors, calls)
    finally:
        for door in doors.values():
            door.close()
        for s in servers:
            s.stop()


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


def latency_table(lat, calls):
    """One row per door and op: p50, p99 and the ratio of p50 to stdio's."""
    lines = [
        "| door | op | p50 ms | p99 ms | p50 / stdio p50 |",
        "|---|---|---|---|---|",
    ]
    for name, ops in lat.items():
        peer = "peer " if name.startswith("peer ") else ""
        # (The floor's ratio is to this binary's stdio.)
        stdio = lat[f"{peer}stdio"]
        for op in OPS:
            xs = ops[op]
            lines.append(f"| {name} | {op} | {ms(pct(xs, 50))} | {ms(pct(xs, 99))} | "
                         f"{pct(xs, 50) / pct(stdio[op], 50):.2f}x |")
    lines += [
        "",
        f"{calls} of each op through each door, in 10 rounds taken in turn (each door its own store or data dir). "
        "API (SDK): `client.beta.memory_stores.memories` (create, update with new content, retrieve with content); "
        "HTTP (http.client): the same requests on one kept-alive connection through Python's `http.client`; "
        "HTTP (raw): the same requests as bytes built beforehand on one kept-alive socket, the answer read to its "
        "Content-Length (the door's own cost, as lean a client as the stdio one); "
        "stdio: the memory tool over `memfs serve --stdio` (create, str_replace, view), one call at a time; "
        "floor: the same raw requests to examples/http_floor.rs, memfs's listener answering a fixed memory "
        "with nothing behind it. "
        "Every write is durable (one journal flush) before it is answered, through every door.",
    ]
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("memfs")
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--stores", type=int, default=10000)
    ap.add_argument("--open", type=int, default=1000)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--latency-only", action="store_true", help="only the one-call-at-a-time table")
    ap.add_argument("--peer", help="another memfs binary whose doors are timed beside, in the same rounds")
    ap.add_argument("--floor", help="examples/http_floor's binary, timed with the raw client beside the API")
    ap.add_argument("--out")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        lat = latency(a.memfs, tmp, a.calls, a.peer, a.floor)
        ex = None if a.latency_only else latency_exec(a.memfs, tmp / "exec", max(10, a.calls // 5))
        many = None if a.latency_only else many_stores(a.memfs, tmp / "many", a.stores, min(a.open, a.stores),
                                                        a.seconds)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    command = " ".join(["scripts/bench_http.py"] + sys.argv[1:])
    lines = [
        "# HTTP door benchmarks",
        "",
        f"Machine: {cpu}, {os.cpu_count()} cores, Linux {platform.release()}. "
        f"Command: `{command}`"
        f" at {subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True).stdout.strip()}.",
        "",
        "## One call at a time: the API (SDK, http.client, raw HTTP/1.1) beside the tool over stdio",
        "",
    ] + latency_table(lat, a.calls)
    if ex is not None:
        lines += [
            "",
            "## One process per call: `memfs exec`",
            "",
            "| op | exec p50 ms | exec p99 ms | API (SDK) p50 / exec p50 |",
            "|---|---|---|---|",
        ] + [
            f"| {op} | {ms(pct(ex[op], 50))} | {ms(pct(ex[op], 99))} | "
            f"{pct(lat['API (SDK)'][op], 50) / pct(ex[op], 50):.2f}x |"
            for op in OPS
        ] + [
            "",
            f"exec: {max(10, a.calls // 5)} of each, one process per call on a data dir no other memfs owns.",
        ]
    if many is None:
        text = "\n".join(lines)
        print(text)
        if a.out:
            pathlib.Path(a.out).write_text(text + "\n")
        return
    lines += [
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
