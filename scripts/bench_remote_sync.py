#!/usr/bin/env python3
"""Two machines on one memory store, side by side: memfs's store over HTTP
against the SDK's own sync (`anthropic.lib.tools._memories.
SessionMemoryStores` of anthropic 2.17.0), in one run, one scenario.

One `memfs serve --http` is the server of both runs (a store each). Each
run has two machines, A and B, each reaching the server through its own
proxy (remote_faults.py's), and the same seeded scenario:

- ten files; every STEP seconds each machine makes one edit: an append of a
  line with a token of its own to a random file (75%), or an edit of the
  shared first line `status: ...` of a random file (25%, both machines:
  overlapping edits);
- at a third of the run A deletes f9, and B keeps editing it;
- in the middle B is cut off for CUT seconds (its proxy a black hole).

memfs: each machine is `memfs --data http://PROXY/v1/memory_stores/ID
--cache DIR serve --stdio`; an edit is the memory tool's `insert` or
`str_replace`; the other machine's view is read through its tool.
SDK: each machine is a `SessionMemoryStores(AsyncAnthropic(...),
sync_interval=S)` downloaded into a folder; an edit is a file write, then
`sync_if_due()` (the worker's cadence: after each tool call); the other
machine's view is its folder; `finish()` at the end. Rows for the SDK's
default interval (15 s) and its least (5 s).

Counted at the end (after both sides settle): each acknowledged edit's
token in the final files (the server's), only in a history (memfs: a
version in either cache's `memfs log`; SDK: a version on the server), or
lost; and, for appends, the time from the edit on one machine to its token
in the other's view, p50 and p99 (polled every 50 ms).

usage: bench_remote_sync.py MEMFS_BIN [--seconds 60] [--step 0.5] [--cut 20]
         [--sdk-python target/bench-venv/bin/python] [--out FILE]
The SDK's part runs in --sdk-python (a venv with anthropic==2.17.0).
"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from remote_faults import Proxy, free_port  # noqa: E402

FILES = [f"f{i}.md" for i in range(10)]


def scenario(seed, seconds, step):
    """[(t, machine, kind, file, token)] for both machines."""
    rng = random.Random(seed)
    out = []
    for who in "ab":
        t, n = 0.0, 0
        while t < seconds:
            n += 1
            t += step * rng.uniform(0.5, 1.5)
            kind = "append" if rng.random() < 0.75 else "status"
            out.append((t, who, kind, rng.choice(FILES), f"T-{who}-{n}"))
    out.append((seconds / 3, "a", "delete", "f9.md", None))
    return sorted(out, key=lambda e: e[0])


class Api:
    def __init__(self, port, key):
        self.port, self.key = port, key

    def call(self, method, path, body=None, query=""):
        url = f"http://127.0.0.1:{self.port}/v1{path}" + (f"?{query}" if query else "")
        req = urllib.request.Request(url, data=json.dumps(body).encode() if body is not None else None,
                                     method=method, headers={"x-api-key": self.key,
                                                             "content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())

    def files(self, store):
        got = self.call("GET", f"/memory_stores/{store}/memories", query="view=full&limit=20")
        out, page = {}, got.get("next_page")
        for m in got["data"]:
            out[m["path"]] = m["content"]
        while page:
            got = self.call("GET", f"/memory_stores/{store}/memories", query=f"view=full&limit=20&page={page}")
            out.update({m["path"]: m["content"] for m in got["data"]})
            page = got.get("next_page")
        return out

    def version_texts(self, store):
        """Every content the store's history holds."""
        texts, page = [], None
        while True:
            q = "view=full&limit=20" + (f"&page={page}" if page else "")
            got = self.call("GET", f"/memory_stores/{store}/memory_versions", query=q)
            texts += [v.get("content") or "" for v in got["data"]]
            page = got.get("next_page")
            if not page:
                return texts


def new_store(api, name):
    store = api.call("POST", "/memory_stores", body={"name": name})["id"]
    for f in FILES:
        api.call("POST", f"/memory_stores/{store}/memories", body={"path": f"/{f}", "content": "status: new\n"})
    return store


class Watch:
    """Polls each machine's view for the tokens the other one wrote."""

    def __init__(self, view_of):
        self.view_of = view_of  # who -> callable returning {file: text}
        self.made = {}          # token -> (who, time made)
        self.seen = {}          # token -> time seen on the other machine
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def note(self, token, who):
        with self.lock:
            self.made[token] = (who, time.monotonic())

    def run(self):
        while not self.stop.is_set():
            for who in "ab":
                try:
                    text = "\n".join(self.view_of[who]().values())
                except Exception:
                    continue
                now = time.monotonic()
                with self.lock:
                    for tok, (maker, _) in self.made.items():
                        if maker != who and tok not in self.seen and tok in text:
                            self.seen[tok] = now
            time.sleep(0.05)

    def latencies(self, appends):
        with self.lock:
            return sorted(self.seen[t] - self.made[t][1] for t in appends if t in self.seen)


def memfs_run(memfs, port, admin, seed, args, tmp):
    api = Api(port, admin)
    store = new_store(api, "memfs-run")
    proxies = {w: Proxy(port) for w in "ab"}
    procs, locks = {}, {}
    for w in "ab":
        key = subprocess.run([memfs, "--stores", str(tmp / "root"), "token", "create", "--name", f"memfs-{w}",
                              "--store", store], capture_output=True, text=True, check=True).stdout.strip()
        env = dict(os.environ, ANTHROPIC_API_KEY=key)
        procs[w] = subprocess.Popen([memfs, "--data", f"http://127.0.0.1:{proxies[w].port}/v1/memory_stores/{store}",
                                     "--cache", str(tmp / f"memfs-{w}"), "serve", "--stdio"],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=open(tmp / f"memfs-{w}.log", "w"), text=True, env=env)
        locks[w] = threading.Lock()

    def call(w, **c):
        with locks[w]:
            procs[w].stdin.write(json.dumps(c) + "\n")
            procs[w].stdin.flush()
            return json.loads(procs[w].stdout.readline())

    def view(w):
        out = {}
        for f in FILES:
            r = call(w, command="view", path=f"/memories/{f}")
            if not r.get("is_error"):
                out[f] = r["content"] if isinstance(r["content"], str) else json.dumps(r["content"])
        return out

    def edit(w, kind, f, tok):
        if kind == "append":
            r = call(w, command="insert", path=f"/memories/{f}", insert_line=1, insert_text=tok)
        elif kind == "status":
            cur = view(w).get(f, "")
            line = next((ln.split("\t", 1)[1] for ln in cur.splitlines() if "\tstatus: " in ln), None)
            if line is None:
                return False
            r = call(w, command="str_replace", path=f"/memories/{f}", old_str=line, new_str=f"status: {tok}")
        else:
            r = call(w, command="delete", path=f"/memories/{f}")
        return not r.get("is_error")

    watch = Watch({w: (lambda w=w: view(w)) for w in "ab"})
    made = play(seed, args, edit, watch, proxies["b"])
    time.sleep(2)
    settle(lambda: api.files(store), lambda: [view(w) for w in "ab"], args.settle)
    watch.stop.set()
    final = api.files(store)
    for w in "ab":
        procs[w].stdin.close()
        procs[w].wait(timeout=60)
    # Every version either cache's history holds.
    texts = [api_history_text(tmp / f"memfs-{w}", memfs) for w in "ab"]
    return made, final, "\n".join(texts), watch


def api_history_text(cache, memfs):
    """Every version's text in the cache's history (`memfs log --json` and
    `memfs show` of each)."""
    out = []
    log = subprocess.run([memfs, "--data", str(cache), "log", "--json"], capture_output=True, text=True)
    for line in log.stdout.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        v = row.get("version")
        if v is None or not row.get("sha256"):
            continue
        shown = subprocess.run([memfs, "--data", str(cache), "show", str(v)], capture_output=True, text=True)
        out.append(shown.stdout)
    return "\n".join(out)


def play(seed, args, edit, watch, proxy_b):
    """Each machine's edits on its own schedule, in a thread of its own (a
    machine whose sync blocks on the network delays only itself), and B's
    cut in the middle."""
    start = time.monotonic()
    made, lock = [], threading.Lock()
    events = scenario(seed, args.seconds, args.step)

    def machine(w):
        for t, who, kind, f, tok in events:
            if who != w:
                continue
            now = time.monotonic() - start
            if now < t:
                time.sleep(t - now)
            if tok and kind == "append":
                watch.note(tok, w)
            if edit(w, kind, f, tok) and tok:
                with lock:
                    made.append((tok, kind, w))

    threads = [threading.Thread(target=machine, args=(w,), daemon=True) for w in "ab"]
    for t in threads:
        t.start()
    time.sleep(max(0.0, args.seconds / 2 - args.cut / 2))
    proxy_b.cut.set()
    time.sleep(args.cut)
    proxy_b.cut.clear()
    for t in threads:
        t.join()
    return made


def settle(server_files, sides, most):
    deadline = time.monotonic() + most
    while time.monotonic() < deadline:
        time.sleep(0.5)
        try:
            there = server_files()
            if all(set(s) == {p.lstrip("/") for p in there} for s in sides()):
                return
        except Exception:
            pass


SDK_MACHINE = r'''
import asyncio, json, sys, time, types, os
from pathlib import Path
from anthropic import AsyncAnthropic
from anthropic.lib.tools._memories import SessionMemoryStores
base, key, store, root, interval = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
async def main():
    client = AsyncAnthropic(api_key=key, base_url=base, max_retries=2)
    s = SessionMemoryStores(client, workdir=root + "-work", sync_interval=interval)
    res = types.SimpleNamespace(type="memory_store", memory_store_id=store, mount_path=root, access="read_write",
                                name="m", instructions=None, description=None)
    await s.download(types.SimpleNamespace(resources=[res]))
    print("ready", flush=True)
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            break
        cmd = json.loads(line)
        if cmd["op"] == "sync":
            await s.sync_if_due()
        elif cmd["op"] == "finish":
            await s.finish()
            await s.flush_writes()
        print("ok", flush=True)
    await s.dispose()
asyncio.run(main())
'''


def sdk_run(sdk_python, memfs, port, admin, seed, args, tmp, interval):
    api = Api(port, admin)
    store = new_store(api, f"sdk-run-{int(interval)}")
    proxies = {w: Proxy(port) for w in "ab"}
    procs, locks, roots = {}, {}, {}
    script = tmp / "sdk_machine.py"
    script.write_text(SDK_MACHINE)
    for w in "ab":
        key = subprocess.run([memfs, "--stores", str(tmp / "root"), "token", "create", "--name",
                              f"sdk{int(interval)}-{w}", "--store", store], capture_output=True, text=True,
                             check=True).stdout.strip()
        roots[w] = tmp / f"sdk{int(interval)}-{w}"
        procs[w] = subprocess.Popen([sdk_python, str(script), f"http://127.0.0.1:{proxies[w].port}", key, store,
                                     str(roots[w]), str(interval)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=open(tmp / f"sdk-{w}.log", "w"), text=True)
        assert procs[w].stdout.readline().strip() == "ready", (tmp / f"sdk-{w}.log").read_text()[-2000:]
        locks[w] = threading.Lock()

    def sync(w, op="sync"):
        with locks[w]:
            procs[w].stdin.write(json.dumps({"op": op}) + "\n")
            procs[w].stdin.flush()
            procs[w].stdout.readline()

    def view(w):
        out = {}
        for f in FILES:
            try:
                out[f] = (roots[w] / f).read_text()
            except OSError:
                pass
        return out

    def edit(w, kind, f, tok):
        p = roots[w] / f
        try:
            if kind == "append":
                text = p.read_text()
                first, _, rest = text.partition("\n")
                p.write_text(f"{first}\n{tok}\n{rest}" if _ else f"{text}\n{tok}\n")
            elif kind == "status":
                text = p.read_text()
                lines = text.split("\n")
                i = next((k for k, ln in enumerate(lines) if ln.startswith("status: ")), None)
                if i is None:
                    return False
                lines[i] = f"status: {tok}"
                p.write_text("\n".join(lines))
            else:
                p.unlink()
        except OSError:
            return False
        sync(w)
        return True

    watch = Watch({w: (lambda w=w: view(w)) for w in "ab"})
    # (Between edits each machine keeps syncing on its cadence, as a worker
    # does after each tool call.)
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            for w in "ab":
                sync(w)
            time.sleep(0.5)
    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    made = play(seed, args, edit, watch, proxies["b"])
    time.sleep(2 * interval + 1)
    stop.set()
    ticker.join()
    for w in "ab":
        sync(w, "finish")
    time.sleep(1)
    watch.stop.set()
    final = api.files(store)
    history = "\n".join(api.version_texts(store))
    for w in "ab":
        procs[w].stdin.close()
        procs[w].wait(timeout=60)
    return made, final, history, watch


def count(made, final, history, watch):
    text = "\n".join(final.values())
    kept = lost = hist = 0
    for tok, kind, w in made:
        if tok in text:
            kept += 1
        elif tok in history:
            hist += 1
        else:
            lost += 1
    appends = [t for t, k, _ in made if k == "append"]
    lat = watch.latencies(appends)
    p = (lambda q: f"{lat[min(len(lat) - 1, int(q * len(lat)))] * 1000:.0f} ms" if lat else "-")
    return {"edits": len(made), "kept": kept, "history": hist, "lost": lost,
            "seen": f"{len(lat)}/{len(appends)}", "p50": p(0.5), "p99": p(0.99)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("memfs")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--step", type=float, default=0.5)
    ap.add_argument("--cut", type=float, default=20)
    ap.add_argument("--settle", type=float, default=60)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--sdk-python", default=str(Path(__file__).resolve().parents[1] / "target/bench-venv/bin/python"))
    ap.add_argument("--intervals", default="15,5", help="the SDK's sync intervals to run (15,5)")
    ap.add_argument("--out")
    args = ap.parse_args()
    memfs = os.path.abspath(args.memfs)
    tmp = Path(tempfile.mkdtemp(prefix="memfs-bench-sync-"))
    (tmp / "root").mkdir()
    port = free_port()
    server = subprocess.Popen([memfs, "--stores", str(tmp / "root"), "serve", "--http", f"127.0.0.1:{port}"],
                              stdout=subprocess.DEVNULL, stderr=open(tmp / "server.log", "w"))
    try:
        time.sleep(1)
        admin = subprocess.run([memfs, "--stores", str(tmp / "root"), "token", "create", "--admin", "--name", "admin"],
                               capture_output=True, text=True, check=True).stdout.strip()
        rows = [("memfs store over HTTP", count(*memfs_run(memfs, port, admin, args.seed, args, tmp)))]
        for interval in [float(i) for i in args.intervals.split(",") if i]:
            rows.append((f"SDK SessionMemoryStores, sync every {interval:g} s",
                         count(*sdk_run(args.sdk_python, memfs, port, admin, args.seed, args, tmp, interval))))
        lines = [f"bench_remote_sync.py --seconds {args.seconds:g} --step {args.step:g} --cut {args.cut:g} "
                 f"--seed {args.seed}", "",
                 "| run | edits acknowledged | in the final files | only in a history | lost | appends seen on the other machine | save to seen p50 | p99 |",
                 "|---|---|---|---|---|---|---|---|"]
        for name, r in rows:
            lines.append(f"| {name} | {r['edits']} | {r['kept']} | {r['history']} | {r['lost']} | {r['seen']} | "
                         f"{r['p50']} | {r['p99']} |")
        out = "\n".join(lines)
        print(out)
        if args.out:
            Path(args.out).write_text(out + "\n")
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
