#!/usr/bin/env python3
"""Fault trials for a memory store over HTTP (`memfs --data
http://HOST/v1/memory_stores/ID`): two machines' caches of one store of a
memfs server, edited at once while something breaks.

One `memfs --stores ROOT serve --http` on a fixed port holds the store.
Machines A and B are each `memfs --data http://PROXY/v1/memory_stores/ID
--cache DIR serve --stdio` (the memory tool as JSON lines), each reaching
the server through its own proxy (below), each with its own token. In every
trial both machines' writers, and from the `storm` trial on a third writer
on the API itself (read, then update with the content's sha256 as the
precondition, again on a 409: a well-behaved other program), edit the same
ten files at once: each edit inserts a line with a token of its own
(`E<trial>-<who>-<n>`) at the top of a file (both machines inserting at one
place: the merge must keep both); and each machine makes files of its own
and deletes some of them. One fault strikes mid-trial, in turn:

- kill:    kill -9 the server, started again on the same root and port;
- cut:     B's proxy a black hole for 3-6 s (connections hang, then close);
- lose:    A's proxy loses every second answer to a POST or DELETE after
           the server applied it (the client sees the connection close);
- storm:   the third writer runs hard on the same files (pushes meet 409s);
- crash:   kill -9 of machine A, started again on its cache;
- revoke:  A's token revoked (memfs token revoke); A halts, keeps its
           edits; A started again with a new token.

After the trial the writers stop and the script waits (up to --settle
seconds) for A's and B's plain files and the store (read with the API) to be
the same, then checks: every token whose tool call (or API update) was
acknowledged is in the files exactly once (0 lost, 0 applied twice); every
file a machine made and did not delete is there with its text; every file
it deleted is gone. It prints a table per fault (trials, edits, lost,
twice, time to converge p50/max) and exits 1 on any loss.

usage: remote_faults.py MEMFS_BIN [--trials N] [--seconds S] [--settle S] [--out FILE] [--seed N]
Python 3 stdlib only.
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

FILES = [f"/f{i}.md" for i in range(10)]
FAULTS = ["kill", "cut", "lose", "storm", "crash", "revoke"]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Proxy:
    """HTTP/1.1 relay to the server: each request forwarded on a fresh
    upstream connection and its answer read whole; `cut` makes it a black
    hole (nothing relayed until the cut ends, then the connection closes);
    `lose` drops every second answer to a POST or DELETE after the server
    answered it."""

    def __init__(self, upstream_port):
        self.upstream = ("127.0.0.1", upstream_port)
        self.cut = threading.Event()
        self.lose = False
        self.writes = 0
        self.lost = 0
        self.lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                c, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def hold_while_cut(self):
        while self.cut.is_set():
            time.sleep(0.05)

    def serve(self, c):
        buf = b""
        try:
            while True:
                req, buf = read_message(c, buf, request=True)
                if req is None:
                    return
                if self.cut.is_set():
                    self.hold_while_cut()
                    return
                try:
                    u = socket.create_connection(self.upstream, timeout=30)
                except OSError:
                    return
                try:
                    u.sendall(req)
                    resp, _ = read_message(u, b"", request=False)
                finally:
                    u.close()
                if resp is None:
                    return
                if self.cut.is_set():
                    self.hold_while_cut()
                    return
                method = req.split(b" ", 1)[0]
                if method in (b"POST", b"DELETE") and self.lose:
                    with self.lock:
                        self.writes += 1
                        drop = self.writes % 2 == 0
                        self.lost += drop
                    if drop:
                        return
                c.sendall(resp)
        except OSError:
            return
        finally:
            c.close()


def read_message(sock, buf, request):
    """One whole HTTP/1.1 message (head and a Content-Length body) from
    `sock`, and what was read past it."""
    while b"\r\n\r\n" not in buf:
        try:
            chunk = sock.recv(65536)
        except OSError:
            return None, buf
        if not chunk:
            return None, buf
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    m = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    n = int(m.group(1)) if m else 0
    if not request and not m and b"chunked" in head.lower():
        raise OSError("chunked answers are not relayed")
    while len(rest) < n:
        try:
            chunk = sock.recv(65536)
        except OSError:
            return None, b""
        if not chunk:
            return None, b""
        rest += chunk
    return head + b"\r\n\r\n" + rest[:n], rest[n:]


class Server:
    def __init__(self, memfs, root, port):
        self.memfs, self.root, self.port = memfs, root, port
        self.proc = None

    def start(self):
        log = open(self.root.parent / "server.log", "a")
        self.proc = subprocess.Popen([self.memfs, "--stores", str(self.root), "serve", "--http",
                                      f"127.0.0.1:{self.port}"], stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise SystemExit("the server did not start: " + (self.root.parent / "server.log").read_text()[-2000:])

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)

    def token(self, *args):
        out = subprocess.run([self.memfs, "--stores", str(self.root), "token", "create", *args],
                             capture_output=True, text=True, check=True)
        return out.stdout.strip()

    def api(self, key, method, path, body=None, query=""):
        url = f"http://127.0.0.1:{self.port}/v1{path}" + (f"?{query}" if query else "")
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method, headers={
            "x-api-key": key, "content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())

    def files(self, key, store):
        out, page = {}, None
        while True:
            q = "view=full&limit=20" + (f"&page={page}" if page else "")
            got = self.api(key, "GET", f"/memory_stores/{store}/memories", query=q)
            for m in got["data"]:
                if m.get("type") == "memory":
                    out[m["path"]] = m["content"]
            page = got.get("next_page")
            if not page:
                return out


class Machine:
    def __init__(self, memfs, name, url, cache, key):
        self.memfs, self.name, self.url, self.cache, self.key = memfs, name, url, cache, key
        self.proc = None
        self.lock = threading.Lock()

    def start(self):
        env = dict(os.environ, ANTHROPIC_API_KEY=self.key)
        log = open(self.cache.parent / f"{self.name}.log", "a")
        self.proc = subprocess.Popen([self.memfs, "--data", self.url, "--cache", str(self.cache),
                                      "--pull-every", "0.5", "serve", "--stdio"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, env=env)

    def call(self, **command):
        """The tool's answer, or None when the process is gone."""
        with self.lock:
            try:
                self.proc.stdin.write(json.dumps(command) + "\n")
                self.proc.stdin.flush()
                line = self.proc.stdout.readline()
            except (OSError, ValueError):
                return None
        return json.loads(line) if line else None

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def files(self):
        out = {}
        root = self.cache / "memories"
        for dirpath, _, names in os.walk(root):
            for n in names:
                p = os.path.join(dirpath, n)
                try:
                    out["/" + os.path.relpath(p, root)] = open(p, encoding="utf-8", errors="replace").read()
                except FileNotFoundError:
                    out["/" + os.path.relpath(p, root)] = None  # (removed while read: not equal, read again)
        return out


class Ledger:
    def __init__(self):
        self.lock = threading.Lock()
        self.tokens = []       # acknowledged inserted tokens
        self.made = {}         # path -> text, acknowledged creates not deleted
        self.deleted = set()   # acknowledged deletes

    def token(self, t):
        with self.lock:
            self.tokens.append(t)


def writer(machine, who, trial, ledger, stop, rng):
    n = 0
    mine = []
    while not stop.is_set():
        n += 1
        roll = rng.random()
        if roll < 0.75:
            tok = f"E{trial}-{who}-{n}"
            r = machine.call(command="insert", path="/memories" + rng.choice(FILES), insert_line=0,
                             insert_text=tok)
            if r and not r.get("is_error"):
                ledger.token(tok)
        elif roll < 0.9 or not mine:
            path = f"/{who}-{trial}-{n}.md"
            r = machine.call(command="create", path="/memories" + path, file_text=f"made by {who} {n}\n")
            if r and not r.get("is_error"):
                mine.append(path)
                with ledger.lock:
                    ledger.made[path] = f"made by {who} {n}\n"
        else:
            path = mine.pop(rng.randrange(len(mine)))
            r = machine.call(command="delete", path="/memories" + path)
            if r and not r.get("is_error"):
                with ledger.lock:
                    ledger.made.pop(path, None)
                    ledger.deleted.add(path)
        time.sleep(rng.uniform(0.01, 0.06))


def api_writer(server, key, store, trial, ledger, stop, rng, hard):
    """Another program on the API: read, insert its token at the top,
    update with the precondition; again on a 409."""
    n = 0
    while not stop.is_set():
        n += 1
        tok = f"E{trial}-api-{n}"
        path = rng.choice(FILES)
        for _ in range(50):
            try:
                listed = server.api(key, "GET", f"/memory_stores/{store}/memories", query="limit=100")
                m = next((x for x in listed["data"] if x.get("path") == path), None)
                if m is None:
                    break
                m = server.api(key, "GET", f"/memory_stores/{store}/memories/{m['id']}", query="view=full")
                server.api(key, "POST", f"/memory_stores/{store}/memories/{m['id']}", body={
                    "content": tok + "\n" + m["content"],
                    "precondition": {"type": "content_sha256", "content_sha256": m["content_sha256"]}})
                ledger.token(tok)
                break
            except urllib.error.HTTPError as e:
                if e.code not in (404, 409, 503):
                    raise SystemExit(f"the API writer was answered {e.code}: {e.read()[:300]!r}")
            except OSError:
                time.sleep(0.2)
        time.sleep(0.005 if hard else 0.3)


def converge(server, admin, store, machines, settle):
    t = time.monotonic()
    deadline = t + settle
    last = None
    while time.monotonic() < deadline:
        try:
            there = server.files(admin, store)
        except OSError:
            time.sleep(0.2)
            continue
        sides = [m.files() for m in machines]
        if all(s == there for s in sides):
            return there, time.monotonic() - t, None
        last = (there, sides)
        time.sleep(0.2)
    return None, settle, last


def trial(k, fault, env, rng):
    server, admin, store, a, b, proxy_a, proxy_b, ledger_all = env
    ledger = Ledger()
    stop = threading.Event()
    threads = [threading.Thread(target=writer, args=(a, "a", k, ledger, stop, random.Random(rng.random()))),
               threading.Thread(target=writer, args=(b, "b", k, ledger, stop, random.Random(rng.random()))),
               threading.Thread(target=api_writer, args=(server, admin, store, k, ledger, stop,
                                                         random.Random(rng.random()), fault == "storm"))]
    for t in threads:
        t.daemon = True
        t.start()
    time.sleep(env_seconds / 2)
    if fault == "kill":
        server.kill()
        time.sleep(0.5)
        server.start()
    elif fault == "cut":
        proxy_b.cut.set()
        time.sleep(rng.uniform(3, 6))
        proxy_b.cut.clear()
    elif fault == "lose":
        proxy_a.lose = True
        time.sleep(env_seconds / 2)
        proxy_a.lose = False
    elif fault == "crash":
        a.kill()
        time.sleep(0.3)
        a.start()
    elif fault == "revoke":
        name = f"a-{k}"
        subprocess.run([server.memfs, "--stores", str(server.root), "token", "revoke", a.token_name],
                       capture_output=True, check=True)
        time.sleep(1.5)
        a.stop()
        a.key = server.token("--name", name, "--store", store)
        a.token_name = name
        a.start()
    time.sleep(env_seconds / 2)
    stop.set()
    for t in threads:
        t.join(timeout=120)
    there, took, last = converge(server, admin, store, [a, b], env_settle)
    result = {"fault": fault, "edits": len(ledger.tokens) + len(ledger.made) + len(ledger.deleted),
              "lost": 0, "twice": 0, "took": took, "diverged": there is None}
    if there is None:
        there = last[0] if last else {}
        print(f"trial {k} ({fault}): did not converge within {env_settle} s", file=sys.stderr)
    text = "\n".join(there.values())
    for tok in ledger.tokens:
        c = len(re.findall(rf"^{re.escape(tok)}$", text, re.M))
        result["lost"] += c == 0
        result["twice"] += c > 1
        if c != 1:
            print(f"trial {k} ({fault}): token {tok} found {c} times", file=sys.stderr)
    for path, body in ledger.made.items():
        if there.get(path) != body:
            result["lost"] += 1
            print(f"trial {k} ({fault}): {path} made, not there as made", file=sys.stderr)
    for path in ledger.deleted:
        if path in there:
            result["lost"] += 1
            print(f"trial {k} ({fault}): {path} deleted, still there", file=sys.stderr)
    ledger_all.append(result)
    # The files made in this trial deleted (through A), so that the store
    # stays the same size from trial to trial (the API holds 2,000 memories).
    for path in sorted(p for p in there if re.fullmatch(rf"/[ab]-{k}-\d+\.md", p)):
        a.call(command="delete", path="/memories" + path)
    converge(server, admin, store, [a, b], env_settle)
    return result


env_seconds = 4.0
env_settle = 60.0


def main():
    global env_seconds, env_settle
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("memfs")
    ap.add_argument("--trials", type=int, default=len(FAULTS))
    ap.add_argument("--seconds", type=float, default=4.0, help="writing time per trial (4)")
    ap.add_argument("--settle", type=float, default=60.0, help="most seconds to converge after a trial (60)")
    ap.add_argument("--faults", default=",".join(FAULTS))
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--out", help="write the table here too")
    ap.add_argument("--keep-tmp", action="store_true")
    args = ap.parse_args()
    env_seconds, env_settle = args.seconds, args.settle
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    faults = args.faults.split(",")
    tmp = tempfile.mkdtemp(prefix="memfs-remote-faults-")
    base = __import__("pathlib").Path(tmp)
    server = Server(os.path.abspath(args.memfs), base / "root", free_port())
    (base / "root").mkdir()
    server.start()
    machines = []
    try:
        admin = server.token("--admin", "--name", "admin")
        store = server.api(admin, "POST", "/memory_stores", body={"name": "faults"})["id"]
        for path in FILES:
            server.api(admin, "POST", f"/memory_stores/{store}/memories", body={"path": path, "content": "top\n"})
        proxy_a, proxy_b = Proxy(server.port), Proxy(server.port)
        a = Machine(server.memfs, "a", f"http://127.0.0.1:{proxy_a.port}/v1/memory_stores/{store}",
                    base / "a", server.token("--name", "a-0", "--store", store))
        a.token_name = "a-0"
        b = Machine(server.memfs, "b", f"http://127.0.0.1:{proxy_b.port}/v1/memory_stores/{store}",
                    base / "b", server.token("--name", "b-0", "--store", store))
        machines = [a, b]
        for m in machines:
            m.start()
        results = []
        env = (server, admin, store, a, b, proxy_a, proxy_b, results)
        for k in range(args.trials):
            r = trial(k, faults[k % len(faults)], env, rng)
            print(f"trial {k:3d} {r['fault']:7s} edits {r['edits']:4d} lost {r['lost']} twice {r['twice']} "
                  f"converged in {r['took']:.1f} s{' (NOT)' if r['diverged'] else ''}", file=sys.stderr)
        lines = [f"remote_faults.py {os.path.basename(args.memfs)} --trials {args.trials} --seconds {args.seconds} "
                 f"--seed {seed}", "",
                 "| fault | trials | acknowledged edits | lost | applied twice | not converged | converged p50 | max |",
                 "|---|---|---|---|---|---|---|---|"]
        for f in faults:
            rs = [r for r in results if r["fault"] == f]
            if not rs:
                continue
            took = sorted(r["took"] for r in rs)
            lines.append(f"| {f} | {len(rs)} | {sum(r['edits'] for r in rs)} | {sum(r['lost'] for r in rs)} | "
                         f"{sum(r['twice'] for r in rs)} | {sum(r['diverged'] for r in rs)} | "
                         f"{took[len(took) // 2]:.1f} s | {took[-1]:.1f} s |")
        total = [sum(r[k] for r in results) for k in ("edits", "lost", "twice", "diverged")]
        lines.append(f"| all | {len(results)} | {total[0]} | {total[1]} | {total[2]} | {total[3]} | | |")
        lines.append(f"\nanswers lost by the proxy after the server applied them: {proxy_a.lost}")
        out = "\n".join(lines)
        print(out)
        if args.out:
            open(args.out, "w").write(out + "\n")
        ok = total[1] == 0 and total[2] == 0 and total[3] == 0
        return 0 if ok else 1
    finally:
        for m in machines:
            m.stop()
        server.stop()
        if not args.keep_tmp:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"kept {tmp}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
