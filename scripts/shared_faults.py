#!/usr/bin/env python3
"""Fault trials on a shared store: two memfs hosts (each with its mount; host
B in a network namespace of its own, reaching PostgreSQL over a veth pair)
while agents on both write, and one fault per trial:

- kill9-a:    host A killed (-9) mid-stream, then started again;
- pg-crash:   PostgreSQL stopped as a crash would (`pg_ctl stop -m immediate`), then started;
- listener:   host B's follower connection terminated (`pg_terminate_backend`);
- cut-b:      host B cut off (its veth down for a moment), then back;
- commit-lost (with --failpoints BIN, a memfs built with the `failpoints`
  feature, as host A): the connection's answer to a COMMIT is lost at
  random (`shared-commit-unanswered`), so A asks the database;
- powercut-a (with --failpoints): host A loses its last frame, written
  and answered but not flushed, and stops at once, as a power cut would
  (`journal::lose-deferred`, after a random number of such frames), then
  starts again: it must take the lost batch back from the database.

After each trial, within seconds of the fault ending: every acknowledged
change is in the database once, no batch or version is there twice, and
the trees of A, of B and of a fresh host that reads the database from
nothing are one and the same.

Needs root (mounts, namespaces) and PostgreSQL 15. Prints a Markdown table.

usage: shared_faults.py MEMFS_BIN [--trials N] [--failpoints BIN] [--out FILE] [--no-netns]
"""
import argparse
import os
import pathlib
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "python"))
from shared_hosts import Host, Postgres, read, wait_for  # noqa: E402

# Each run its own namespace, link and subnet: two runs at once (a manual
# one beside CI's smoke run) must not take down each other's link (one run
# tearing the other's namespace down cut its host B off for good).
TAG = os.getpid() % 240 + 10
NS = f"memfs-fault-{os.getpid()}"
LINK, LINK_NS = f"vmf{TAG}", f"vmf{TAG}n"
SUBNET = f"10.77.{TAG}"
HOST_IP, NS_IP = f"{SUBNET}.1", f"{SUBNET}.2"


def sh(*cmd, check=True):
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


def netns_up(pg: Postgres):
    netns_down()
    sh("ip", "netns", "add", NS)
    sh("ip", "link", "add", LINK, "type", "veth", "peer", "name", LINK_NS)
    sh("ip", "link", "set", LINK_NS, "netns", NS)
    sh("ip", "addr", "add", f"{HOST_IP}/24", "dev", LINK)
    sh("ip", "link", "set", LINK, "up")
    sh("ip", "netns", "exec", NS, "ip", "addr", "add", f"{NS_IP}/24", "dev", LINK_NS)
    sh("ip", "netns", "exec", NS, "ip", "link", "set", LINK_NS, "up")
    sh("ip", "netns", "exec", NS, "ip", "link", "set", "lo", "up")
    # The server listens on the veth too, and trusts the namespace.
    hba = pg.dir / "pg_hba.conf"
    with open(hba, "a") as f:
        f.write(f"host all all {SUBNET}.0/24 trust\n")
    os.environ["PG_LISTEN"] = f"127.0.0.1,{HOST_IP}"
    pg.stop()
    pg.start()


def netns_down():
    sh("ip", "link", "del", LINK, check=False)
    sh("ip", "netns", "del", NS, check=False)


class NsHost(Host):
    """A host whose memfs runs in the namespace (its network only: the
    mount is seen by everyone)."""

    def args(self, *rest):
        return ["nsenter", f"--net=/run/netns/{NS}", *super().args(*rest)]


def tree(root: pathlib.Path) -> dict:
    out = {}
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".memfs")]
        for name in files:
            p = pathlib.Path(dirpath) / name
            out[str(p.relative_to(root))] = p.read_bytes()
    return out


class Agents:
    """An agent on each host creating files, one call at a time; what was
    acknowledged is remembered."""

    def __init__(self, hosts):
        self.hosts = hosts
        self.acked = []
        self.stop = threading.Event()
        self.n = 0
        self.lock = threading.Lock()

    def run(self, host, tag):
        while not self.stop.is_set():
            with self.lock:
                self.n += 1
                i = self.n
            path = f"/memories/{tag}/{i}.md"
            try:
                r = host.tool(command="create", path=path, file_text=f"{tag} {i}\n")
            except Exception:
                continue
            if not r["is_error"]:
                self.acked.append((path, f"{tag} {i}\n"))

    def __enter__(self):
        self.stop.clear()
        self.threads = [threading.Thread(target=self.run, args=(h, t)) for h, t in self.hosts]
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join()


def check(pg, a, b, memfs, root, trial, acked):
    fresh = Host(memfs, a.url, root, f"fresh-{trial}")
    # A host serves after at most 30 s of catching up (then goes on in the
    # background): on a long store under load one call may answer before
    # the fresh copy has read everything, so it is asked until its tree
    # stands still (each call goes on from where the last stopped).
    truth = None
    for _ in range(6):
        out = subprocess.run(fresh.args("exec", '{"command":"view","path":"/memories"}'),
                             capture_output=True, text=True, timeout=120)
        assert '"is_error":false' in out.stdout.replace(" ", ""), out
        now = tree(fresh.cache / "memories")
        if now == truth:
            break
        truth = now
    for name, h in (("A", a), ("B", b)):
        try:
            wait_for(lambda: tree(h.mnt) == truth, 30, f"trial {trial}: {name}'s tree is the database's")
        except AssertionError:
            mine = tree(h.mnt)
            extra = sorted(set(mine) - set(truth))[:10]
            missing = sorted(set(truth) - set(mine))[:10]
            differ = sorted(k for k in set(mine) & set(truth) if mine[k] != truth[k])[:10]
            print(f"{name}: extra {extra}, missing {missing}, differing {differ}; kept in {root}", flush=True)
            raise
    for path, text in acked:
        assert truth.get(path.removeprefix("/memories/")) == text.encode(), f"lost: {path}"
    dup = pg.sql("SELECT origin, batch FROM memfs_batches GROUP BY 1, 2 HAVING count(*) > 1")
    assert dup == [], dup
    dup = pg.sql("""SELECT r->>'version' FROM memfs_batches, json_array_elements(changes::json) c,
        json_array_elements(c->'rows') r GROUP BY 1 HAVING count(*) > 1""")
    assert dup == [], dup
    subprocess.run(["rm", "-rf", str(fresh.cache)])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("memfs")
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--failpoints")
    ap.add_argument("--no-netns", action="store_true")
    ap.add_argument("--kinds", help="only these faults (comma-separated)")
    ap.add_argument("--out")
    args = ap.parse_args()
    root = pathlib.Path(tempfile.mkdtemp(prefix="memfs-faults-"))
    root.chmod(0o755)
    pg = Postgres(root)
    pg.start()
    netns = not args.no_netns
    if netns:
        netns_up(pg)
        url_b = f"postgres://postgres@{HOST_IP}:{pg.port}/postgres?store=faults"
    a_bin = args.failpoints or args.memfs
    a = Host(a_bin, pg.url("faults"), root, "a")
    b = (NsHost if netns else Host)(args.memfs, url_b if netns else pg.url("faults"), root, "b")
    if args.failpoints:
        os.environ["FAILPOINTS"] = "shared-commit-unanswered=3%return"
    a.mount()
    os.environ.pop("FAILPOINTS", None)
    b.mount()
    kinds = ["kill9-a", "pg-crash", "listener"] + (["cut-b"] if netns else []) + (
        ["powercut-a"] if args.failpoints else [])
    if args.kinds:
        kinds = [k for k in kinds if k in args.kinds.split(",")]
    counts = {k: 0 for k in kinds}
    acked_all = []
    powercuts = 0
    began = time.time()
    try:
        for trial in range(args.trials):
            kind = kinds[trial % len(kinds)]
            if kind == "powercut-a":
                # A again, its power cut armed (see below).
                a.stop()
                os.environ["FAILPOINTS"] = (
                    "shared-commit-unanswered=3%return;"
                    f"journal::lose-deferred={random.randint(3, 30)}*off->return")
                a.mount()
                os.environ.pop("FAILPOINTS", None)
            with Agents([(a, f"a{trial}"), (b, f"b{trial}")]) as agents:
                time.sleep(random.uniform(0.2, 0.8))
                if kind == "powercut-a":
                    # Cut when the armed frame comes; if it has not within
                    # seconds, a kill -9 is the cut.
                    until = time.monotonic() + 5
                    while a.proc.poll() is None and time.monotonic() < until:
                        time.sleep(0.02)
                    powercuts += a.proc.poll() is not None
                    a.stop(signal.SIGKILL)
                    os.environ["FAILPOINTS"] = "shared-commit-unanswered=3%return"
                    a.mount()
                    os.environ.pop("FAILPOINTS", None)
                elif kind == "kill9-a":
                    a.stop(signal.SIGKILL)
                    if args.failpoints:
                        os.environ["FAILPOINTS"] = "shared-commit-unanswered=3%return"
                    a.mount()
                    os.environ.pop("FAILPOINTS", None)
                elif kind == "pg-crash":
                    pg.crash()
                    time.sleep(random.uniform(0.1, 1.0))
                    pg.start()
                elif kind == "listener":
                    pg.sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                           "WHERE application_name = 'memfs-follow' AND client_addr IS NOT NULL")
                elif kind == "cut-b":
                    sh("ip", "link", "set", LINK, "down")
                    time.sleep(random.uniform(0.5, 2.0))
                    sh("ip", "link", "set", LINK, "up")
                time.sleep(random.uniform(0.2, 0.5))
            acked_all.extend(agents.acked)
            check(pg, a, b, args.memfs, root, trial, acked_all)
            counts[kind] += 1
            print(f"trial {trial} ({kind}): ok, {len(acked_all)} acknowledged so far", flush=True)
    except BaseException:
        # MEMFS_FAULTS_HOLD=S: leave the hosts running S seconds for a look
        # (their pids are printed) before everything is stopped.
        hold = float(os.environ.get("MEMFS_FAULTS_HOLD", "0"))
        if hold > 0:
            print(f"holding {hold:.0f} s: A pid {a.proc.pid if a.proc else None}, "
                  f"B pid {b.proc.pid if b.proc else None}, kept in {root}", flush=True)
            time.sleep(hold)
        a.stop()
        b.stop()
        if netns:
            netns_down()
        pg.stop()
        raise
    a.stop()
    b.stop()
    if netns:
        netns_down()
    pg.remove()
    took = time.time() - began
    lines = [
        f"- Command: `scripts/shared_faults.py target/release/memfs --trials {args.trials}"
        + (" --failpoints BIN" if args.failpoints else "") + "`"
        + f"; {took:.0f} s; {len(acked_all)} acknowledged creates in all.",
        "",
        "| fault | trials | lost | applied twice | divergent trees |",
        "|---|---|---|---|---|",
    ]
    cuts = f" ({powercuts} by the lost frame, the rest by kill -9)"
    for k in kinds:
        label = k + (" (A with commit answers lost at random)" if args.failpoints else "")
        label += cuts if k == "powercut-a" else ""
        lines.append(f"| {label} | {counts[k]} | 0 | 0 | 0 |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        pathlib.Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
