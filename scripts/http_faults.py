#!/usr/bin/env python3
"""Fault trials for many `serve --http` servers on one PostgreSQL database.

Two servers serve one store root in a throwaway PostgreSQL 15. Writers (the
pinned SDK's own client, its default retries) each update their own memory
over and over, every update with its own `Idempotency-Key`, through one
server and, when that one fails them, through the other, until it is
acknowledged. During each trial one fault strikes, in turn:

- kill:     kill -9 one of the servers (restarted a second later, same cache);
- database: PostgreSQL stopped the way a crash stops it, started a second later;
- cut:      every memfs connection to the database ended (pg_terminate_backend);
- netcut:   server 1 cut off from everything (clients and the database) for
            3 to 12 seconds (--cut-seconds: across memfs's own bounds on a
            database connection, 4 s idle in a transaction, 6 s unanswered
            TCP, 8 s waiting for a lock), then let through again.

With netcut among the faults, server 1 runs in a network namespace of its
own (`nsenter --net`), on a veth pair: it listens on the namespace's end
and reaches PostgreSQL on the root namespace's end (PostgreSQL listens
there too and trusts that /30). The cut is a `blackhole` qdisc on both ends:
every packet both ways is dropped without a word (links and routes stay
up; nothing is refused or reset), so connections and connects just hang,
half open, as in a partition. A writer's client gives up on a request after
--cut-timeout seconds in those trials (default 2; 15 s in the others): with
the SDK's 2 retries and their backoff, an update sent to the cut server
goes over to the other one after about 3 x 2 + 1.5 s, within a cut, rather
than waiting the cut out (as with 15 s it would: 3 x 15 s outlasts any
cut) and stalling the trial; an update that server has applied unanswered is
then sent again, same key, to the other one. Needs root.

After each trial every writer's versions are read through the API: each
acknowledged update must be there exactly once (0 lost, 0 applied twice),
and both servers must answer again (the time they took is reported; after
a netcut, also the time until server 1 acknowledges an update again). A
token made before the fault and revoked (through the CLI) right after it
must then be refused by both servers on their next request.

usage: http_faults.py MEMFS_BIN [--trials N] [--seconds S] [--writers W] [--out FILE]
                      [--faults kill,database,cut,netcut] [--cut-seconds LO-HI] [--cut-timeout S]
"""
import argparse
import atexit
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

FAULTS = ["kill", "database", "cut", "netcut"]


def sha(text):
    return hashlib.sha256(text.encode()).hexdigest()


def utc(t=None):
    """A time as the servers' logs write it (UTC, to the millisecond)."""
    t = time.time() if t is None else t
    return time.strftime("%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}"


def sh(*cmd, check=True):
    return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=30)


class Netns:
    """A network namespace of its own (for server 1), reached over a veth
    pair: `host_ip` in the root namespace, `ns_ip` inside. `cut` drops
    every packet both ways, `mend` lets them through again. Removed by
    `down` (also at exit)."""

    def __init__(self):
        pid = os.getpid()
        self.name = f"memfs-cut-{pid}"
        self.host_if, self.ns_if = f"mcut{pid}h", f"mcut{pid}n"
        used = sh("ip", "-o", "-4", "addr").stdout
        n = next(n for n in [(pid + k) % 250 + 1 for k in range(250)] if f" 10.77.{n}." not in used)
        self.host_ip, self.ns_ip, self.net = f"10.77.{n}.1", f"10.77.{n}.2", f"10.77.{n}.0/30"
        atexit.register(self.down)
        try:
            sh("ip", "netns", "add", self.name)
            sh("ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
            sh("ip", "link", "set", self.ns_if, "netns", self.name)
            sh("ip", "addr", "add", f"{self.host_ip}/30", "dev", self.host_if)
            sh("ip", "link", "set", self.host_if, "up")
            self.inside("ip", "addr", "add", f"{self.ns_ip}/30", "dev", self.ns_if)
            self.inside("ip", "link", "set", self.ns_if, "up")
            self.inside("ip", "link", "set", "lo", "up")
        except BaseException:
            self.down()
            raise

    def wrap(self):
        # nsenter, not `ip netns exec`: that also makes a mount namespace
        # (a copy of every mount, FUSE mounts of other tests included, which
        # then outlive their umount while the server runs).
        return ["nsenter", f"--net=/run/netns/{self.name}"]

    def inside(self, *cmd, check=True):
        return sh(*self.wrap(), *cmd, check=check)

    def cut(self):
        # A blackhole qdisc drops what it is given and says it sent it: no
        # error, no ICMP, no RST; a half-open connection on each side.
        sh("tc", "qdisc", "add", "dev", self.host_if, "root", "blackhole")
        self.inside("tc", "qdisc", "add", "dev", self.ns_if, "root", "blackhole")

    def mend(self):
        sh("tc", "qdisc", "del", "dev", self.host_if, "root", check=False)
        self.inside("tc", "qdisc", "del", "dev", self.ns_if, "root", check=False)

    def down(self):
        sh("ip", "link", "del", self.host_if, check=False)
        sh("ip", "netns", "del", self.name, check=False)


def reach_from(ns, pg):
    """Lets PostgreSQL be reached from the namespace: it listens on the
    host's end of the veth too (PG_LISTEN, read by scripts/pg.sh on every
    start) and trusts the namespace's /30."""
    os.environ["PG_LISTEN"] = f"127.0.0.1,{ns.host_ip}"
    pg.start()
    with open(pg.dir / "pg_hba.conf", "a") as f:
        f.write(f"host all all {ns.net} trust\n")
    pg.sql("SELECT pg_reload_conf()")


class Pair:
    """The two servers, each restartable on its own cache; with `ns`,
    server 1 in that namespace (restarted there too)."""

    def __init__(self, memfs, pg, tmp, ns=None):
        self.memfs, self.pg, self.tmp, self.ns = memfs, pg, tmp, ns
        self.started = []    # every server, for its log
        self.servers = [self.start(i) for i in range(2)]

    def start(self, i):
        cache = ("--cache", str(self.tmp / f"cache-{i}"))
        if i == 1 and self.ns:
            url = self.pg.base.replace("@127.0.0.1:", f"@{self.ns.host_ip}:")
            s = Server(self.memfs, url, *cache, wrap=self.ns.wrap(), listen=f"{self.ns.ns_ip}:0")
        else:
            s = Server(self.memfs, self.pg.base, *cache)
        self.started.append((i, s))
        return s

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

    def save_logs(self):
        """Each server's stderr into tmp/server-I-K.log; their paths."""
        paths = []
        for k, (i, s) in enumerate(self.started):
            p = self.tmp / f"server-{i}-{k}.log"
            p.write_text("".join(s.log))
            paths.append(p)
        return paths


class Writer(threading.Thread):
    def __init__(self, k, pair, token, store, mid, stop, timeout=15):
        super().__init__(daemon=True)
        self.k, self.pair, self.token, self.store, self.mid, self.stop_at = k, pair, token, store, mid, stop
        self.timeout = timeout
        self.acked = []      # contents acknowledged, in order
        self.failed = 0      # attempts that failed (then retried)
        self.slowest = 0.0   # seconds the slowest acknowledged update took, retries and all
        self.n = 0

    def client(self, i):
        return anthropic.Anthropic(api_key=self.token, base_url=self.pair.url(i), timeout=self.timeout)

    def run(self):
        while not self.stop_at.is_set():
            self.n += 1
            content = f"{self.k}:{self.n}\n"
            key = {"Idempotency-Key": f"w{self.k}-{self.n}"}
            began = time.time()
            deadline = began + 90
            i = self.n % 2
            while True:
                try:
                    self.client(i).beta.memory_stores.memories.update(
                        self.mid, memory_store_id=self.store, content=content, extra_headers=key)
                    self.acked.append(content)
                    self.slowest = max(self.slowest, time.time() - began)
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


def writes_within(pair, token, store, mid, i, since, limit=60.0):
    """Seconds from `since` until an update through server `i` is
    acknowledged (each try once, 5 s at most, its own key); None: not
    within `limit`."""
    k = 0
    while True:
        k += 1
        try:
            anthropic.Anthropic(api_key=token, base_url=pair.url(i), max_retries=0,
                                timeout=5).beta.memory_stores.memories.update(
                mid, memory_store_id=store, content=f"probe {since} {k}\n",
                extra_headers={"Idempotency-Key": f"probe-{since}-{k}"})
            return time.time() - since
        except Exception:
            if time.time() - since > limit:
                return None
            time.sleep(0.1)


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
        except anthropic.APIError as e:  # no answer (or another one): not refused
            print(f"{utc()} server {i}, the revoked token: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
    return refused == 2


def trial(n, fault, pair, pg, token, store, mids, seconds, rng, cut_seconds=(3.0, 12.0), cut_timeout=2.0,
          probe=None):
    doomed = pair.servers[0].token("--name", f"doomed-{n}", "--store", store)
    stop = threading.Event()
    timeout = cut_timeout if fault == "netcut" else 15
    writers = [Writer(k, pair, token, store, mid, stop, timeout) for k, mid in enumerate(mids)]
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
    elif fault == "netcut":
        held = rng.uniform(*cut_seconds)
        pair.ns.cut()
        cut_at = time.time()
        time.sleep(held)
        pair.ns.mend()
        mended = time.time()
    recovered = answers_within(pair, token)
    if fault == "netcut":
        # What answers_within asks (a list) takes a fresh connection; an
        # update waits for whatever server 1 still had under way.
        writes = writes_within(pair, token, store, probe, 1, mended)
    revoked = revoked_everywhere(pair, f"doomed-{n}", doomed)
    time.sleep(max(0.0, seconds - (time.time() - t_fault) - seconds / 3))
    stop.set()
    for w in writers:
        w.join(timeout=120)
    stalled = sum(w.is_alive() for w in writers)
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
            "slowest_update_s": round(max(w.slowest for w in writers), 2),
            "revoked": revoked,
            "recovered_s": recovered,
            **({"cut_s": round(held, 2), "cut_utc": f"{utc(cut_at)}-{utc(mended)}",
                "server1_writes_s": writes and round(writes, 2)} if fault == "netcut" else {}),
            **({"stalled_writers": stalled} if stalled else {})}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("memfs")
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--out")
    ap.add_argument("--faults", default=",".join(FAULTS),
                    help="the faults to take turns (comma-separated; default all: %(default)s)")
    ap.add_argument("--cut-seconds", default="3-12", metavar="LO-HI",
                    help="how long a netcut lasts, uniform in LO..HI (default %(default)s)")
    ap.add_argument("--cut-timeout", type=float, default=2.0, metavar="S",
                    help="a writer's client timeout in netcut trials (default %(default)s)")
    a = ap.parse_args()
    faults = a.faults.split(",")
    unknown = [f for f in faults if f not in FAULTS]
    if unknown or not faults:
        ap.error(f"unknown fault(s) {unknown}; known: {','.join(FAULTS)}")
    lo, _, hi = a.cut_seconds.partition("-")
    cut_seconds = (float(lo), float(hi or lo))
    # SIGTERM (e.g. from `timeout`) ends it the way Ctrl-C would: through
    # the clean-up below (servers, namespace, PostgreSQL), which a second
    # one (`timeout` signals the process and then its group) must not cut
    # short.
    def terminated(*_):
        signal.signal(signal.SIGTERM, lambda *_: None)
        sys.exit(143)
    signal.signal(signal.SIGTERM, terminated)
    rng = random.Random(a.seed)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="memfs-http-faults-"))
    pg = Postgres(tmp)
    results = []
    pair = ns = None
    codes = []
    try:
        if "netcut" in faults:
            ns = Netns()
            reach_from(ns, pg)
        else:
            pg.start()
        pair = Pair(a.memfs, pg, tmp, ns)
        token = pair.servers[0].token("--admin", "--name", "faults")
        admin = anthropic.Anthropic(api_key=token, base_url=pair.url(0), max_retries=5)
        store = admin.beta.memory_stores.create(name="faults").id
        mids = [admin.beta.memory_stores.memories.create(store, path=f"/w{k}.md", content=f"{k}:0\n").id
                for k in range(a.writers)]
        probe = (admin.beta.memory_stores.memories.create(store, path="/probe.md", content="probe\n").id
                 if "netcut" in faults else None)
        for n in range(a.trials):
            r = trial(n, faults[n % len(faults)], pair, pg, token, store, mids, a.seconds, rng,
                      cut_seconds, a.cut_timeout, probe)
            results.append(r)
            print(r, file=sys.stderr, flush=True)
    finally:
        signal.signal(signal.SIGTERM, lambda *_: None)
        try:
            if ns:
                ns.mend()
            codes = pair.stop() if pair else []
            if pair:
                print(f"servers' logs: {' '.join(map(str, pair.save_logs()))}", file=sys.stderr, flush=True)
        finally:
            if ns:
                ns.down()
            pg.remove()
    lost = sum(r["lost"] for r in results)
    twice = sum(r["twice"] for r in results)
    rec = [r["recovered_s"] for r in results]
    worst = None if any(x is None for x in rec) else max(rec, default=0)
    lines = [
        "# HTTP fault trials",
        "",
        f"Command: `scripts/http_faults.py target/release/memfs --trials {a.trials} --seconds {a.seconds} "
        f"--writers {a.writers} --seed {a.seed}"
        + (f" --faults {a.faults}" if faults != FAULTS else "")
        + (f" --cut-seconds {a.cut_seconds} --cut-timeout {a.cut_timeout:g}" if "netcut" in faults else "")
        + "`",
        "",
        "| fault | trials | updates acknowledged | lost | applied twice | attempts that failed (then retried) | slowest acknowledged update s | slowest recovery s | a token revoked after it, refused by both |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for f in dict.fromkeys(faults):
        rs = [r for r in results if r["fault"] == f]
        if not rs:
            continue
        recs = [r["recovered_s"] for r in rs]
        slow = "never" if any(x is None for x in recs) else f"{max(recs):.2f}"
        lines.append(f"| {f} | {len(rs)} | {sum(r['acked'] for r in rs)} | {sum(r['lost'] for r in rs)} | "
                     f"{sum(r['twice'] for r in rs)} | {sum(r['failed_attempts'] for r in rs)} | "
                     f"{max(r['slowest_update_s'] for r in rs):.2f} | {slow} | "
                     f"{sum(r['revoked'] for r in rs)} of {len(rs)} |")
    cuts = [r for r in results if r["fault"] == "netcut"]
    unwritten = 0
    if cuts:
        w = [r["server1_writes_s"] for r in cuts]
        done = sorted(x for x in w if x is not None)
        unwritten = len(w) - len(done)
        line = f"netcut: cuts of {min(r['cut_s'] for r in cuts):.1f} to {max(r['cut_s'] for r in cuts):.1f} s"
        if done:
            line += (f"; server 1 acknowledged an update again {done[0]:.2f} to {done[-1]:.2f} s "
                     f"after the cut ended (median {done[len(done) // 2]:.2f})")
        if unwritten:
            line += f"; {unwritten} time(s) not within 60 s"
        lines += ["", line + "."]
    stalled = sum(r.get("stalled_writers", 0) for r in results)
    if stalled:
        lines += ["", f"Writers still waiting on an update 120 s after their trial ended: {stalled}."]
    lines += ["", f"Servers' exit codes after SIGTERM: {codes}."]
    text = "\n".join(lines) + "\n"
    if a.out:
        pathlib.Path(a.out).write_text(text)
    print(text)
    ok = (lost == 0 and twice == 0 and worst is not None and all(r["revoked"] for r in results)
          and not stalled and not unwritten)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
