#!/usr/bin/env python3
"""Fault trials for many `serve --http` servers on one PostgreSQL database.

Two servers serve one store root in a throwaway PostgreSQL 15. Writers (the
pinned SDK's own client, its default retries) each update their own memory
over and over, every update with its own `Idempotency-Key`, through one
server and, when that one fails them, through the other, until it is
acknowledged. During each trial one fault strikes, in turn:

- kill:     kill -9 one of the servers (restarted a second later, same cache);
- database: PostgreSQL stopped the way a crash stops it, started a second later;
- cut:      every memfs connection to the database ended (pg_terminate_backend).

After each trial every writer's versions are read through the API: each
acknowledged update must be there exactly once (0 lost, 0 applied twice),
and both servers must answer again (the time they took is reported). A
token made before the fault and revoked (through the CLI) right after it
must then be refused by both servers on their next request.

usage: http_faults.py MEMFS_BIN [--trials N] [--seconds S] [--writers W] [--out FILE]
"""
import argparse
import hashlib
import os
import pathlib
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time

import anthropic

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "python"))
from http_server import Server  # noqa: E402
from shared_hosts import Postgres  # noqa: E402

FAULTS = ["kill", "database", "cut"]


def sha(text):
    return hashlib.sha256(text.encode()).hexdigest()


class Pair:
    """The two servers, each restartable on its own cache."""

    def __init__(self, memfs, pg, tmp):
        self.memfs, self.pg, self.tmp = memfs, pg, tmp
        self.servers = [self.start(i) for i in range(2)]

    def start(self, i):
        return Server(self.memfs, self.pg.base, "--cache", str(self.tmp / f"cache-{i}"))

    def url(self, i):
        return self.servers[i].url

    def kill(self, i):
        s = self.servers[i]
        s.proc.send_signal(signal.SIGKILL)
        s.proc.wait(timeout=30)

    def restart(self, i):
        self.servers[i] = self.start(i)

    def stop(self):
        return [s.stop() for s in self.servers]


class Writer(threading.Thread):
    def __init__(self, k, pair, token, store, mid, stop):
        super().__init__(daemon=True)
        self.k, self.pair, self.token, self.store, self.mid, self.stop_at = k, pair, token, store, mid, stop
        self.acked = []      # contents acknowledged, in order
        self.failed = 0      # attempts that failed (then retried)
        self.n = 0

    def client(self, i):
        return anthropic.Anthropic(api_key=self.token, base_url=self.pair.url(i), timeout=15)

    def run(self):
        while not self.stop_at.is_set():
            self.n += 1
            content = f"{self.k}:{self.n}\n"
            key = {"Idempotency-Key": f"w{self.k}-{self.n}"}
            deadline = time.time() + 90
            i = self.n % 2
            while True:
                try:
                    self.client(i).beta.memory_stores.memories.update(
                        self.mid, memory_store_id=self.store, content=content, extra_headers=key)
                    self.acked.append(content)
                    break
                except (anthropic.APIConnectionError, anthropic.InternalServerError,
                        anthropic.APIStatusError) as e:
                    if isinstance(e, anthropic.APIStatusError) and e.status_code < 500:
                        raise
                    self.failed += 1
                    if time.time() > deadline:
                        return  # unacknowledged: it may or may not be there
                    i = 1 - i
                    time.sleep(0.2)


def versions(client, store, mid):
    out = []
    for v in client.beta.memory_stores.memory_versions.list(store, memory_id=mid, limit=100):
        out.append(v.content_sha256)
    return out


def answers_within(pair, token, limit=30.0):
    t0 = time.time()
    for i in range(2):
        while True:
            try:
                anthropic.Anthropic(api_key=token, base_url=pair.url(i), max_retries=0,
                                    timeout=5).beta.memory_stores.list()
                break
            except Exception:
                if time.time() - t0 > limit:
                    return None
                time.sleep(0.1)
    return time.time() - t0


def revoked_everywhere(pair, name, secret):
    """Revokes token `name` through the CLI; whether both servers then
    refuse it on their next request."""
    subprocess.run([pair.memfs, "--stores", pair.pg.base, "token", "revoke", name],
                   check=True, capture_output=True, timeout=60)
    refused = 0
    for i in range(2):
        try:
            anthropic.Anthropic(api_key=secret, base_url=pair.url(i), max_retries=0,
                                timeout=10).beta.memory_stores.list()
        except anthropic.AuthenticationError:
            refused += 1
    return refused == 2


def trial(n, fault, pair, pg, token, store, mids, seconds, rng):
    doomed = pair.servers[0].token("--name", f"doomed-{n}", "--store", store)
    stop = threading.Event()
    writers = [Writer(k, pair, token, store, mid, stop) for k, mid in enumerate(mids)]
    for w in writers:
        w.start()
    time.sleep(seconds / 3)
    t_fault = time.time()
    if fault == "kill":
        victim = rng.randrange(2)
        pair.kill(victim)
        time.sleep(1)
        pair.restart(victim)
    elif fault == "database":
        pg.crash()
        time.sleep(1)
        pg.start()
    elif fault == "cut":
        pg.sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
               "WHERE application_name LIKE 'memfs%' AND pid <> pg_backend_pid()")
    recovered = answers_within(pair, token)
    revoked = revoked_everywhere(pair, f"doomed-{n}", doomed)
    time.sleep(max(0.0, seconds - (time.time() - t_fault) - seconds / 3))
    stop.set()
    for w in writers:
        w.join(timeout=120)
    reader = anthropic.Anthropic(api_key=token, base_url=pair.url(0), max_retries=5)
    lost = twice = acked = 0
    for w in writers:
        seen = versions(reader, store, w.mid)
        counts = {}
        for s in seen:
            counts[s] = counts.get(s, 0) + 1
        for content in w.acked:
            acked += 1
            c = counts.get(sha(content), 0)
            lost += c == 0
            twice += c > 1
    return {"trial": n, "fault": fault, "acked": acked, "lost": lost, "twice": twice,
            "failed_attempts": sum(w.failed for w in writers),
            "revoked": revoked,
            "recovered_s": recovered}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("memfs")
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--out")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="memfs-http-faults-"))
    pg = Postgres(tmp)
    pg.start()
    results = []
    pair = None
    try:
        pair = Pair(a.memfs, pg, tmp)
        token = pair.servers[0].token("--admin", "--name", "faults")
        admin = anthropic.Anthropic(api_key=token, base_url=pair.url(0), max_retries=5)
        store = admin.beta.memory_stores.create(name="faults").id
        mids = [admin.beta.memory_stores.memories.create(store, path=f"/w{k}.md", content=f"{k}:0\n").id
                for k in range(a.writers)]
        for n in range(a.trials):
            r = trial(n, FAULTS[n % len(FAULTS)], pair, pg, token, store, mids, a.seconds, rng)
            results.append(r)
            print(r, file=sys.stderr, flush=True)
    finally:
        codes = pair.stop() if pair else []
        pg.remove()
    lost = sum(r["lost"] for r in results)
    twice = sum(r["twice"] for r in results)
    rec = [r["recovered_s"] for r in results]
    worst = None if any(x is None for x in rec) else max(rec, default=0)
    lines = [
        "# HTTP fault trials",
        "",
        f"Command: `scripts/http_faults.py target/release/memfs --trials {a.trials} --seconds {a.seconds} "
        f"--writers {a.writers} --seed {a.seed}`",
        "",
        "| fault | trials | updates acknowledged | lost | applied twice | attempts that failed (then retried) | slowest recovery s | a token revoked after it, refused by both |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for f in FAULTS:
        rs = [r for r in results if r["fault"] == f]
        if not rs:
            continue
        recs = [r["recovered_s"] for r in rs]
        slow = "never" if any(x is None for x in recs) else f"{max(recs):.2f}"
        lines.append(f"| {f} | {len(rs)} | {sum(r['acked'] for r in rs)} | {sum(r['lost'] for r in rs)} | "
                     f"{sum(r['twice'] for r in rs)} | {sum(r['failed_attempts'] for r in rs)} | {slow} | "
                     f"{sum(r['revoked'] for r in rs)} of {len(rs)} |")
    lines += ["", f"Servers' exit codes after SIGTERM: {codes}."]
    text = "\n".join(lines) + "\n"
    if a.out:
        pathlib.Path(a.out).write_text(text)
    print(text)
    ok = lost == 0 and twice == 0 and worst is not None and all(r["revoked"] for r in results)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
