#!/usr/bin/env python3
"""The HTTP door on a stores root in PostgreSQL, measured in one run beside
what it stands on.

1. One call at a time: a memory create through the memory stores API (the
   pinned SDK's own client) on a root in PostgreSQL, against a bare
   `INSERT` + `COMMIT` of a row of the same size on the same database
   (`pgbench -c1`, one transaction at a time, per-transaction latencies), and
   against the same create through the API on a local stores root.
2. Scale-out: creates per second across N stores (`wrk`, 64 connections)
   through one server, then through two servers on the same database at
   once (32 connections each). The machine's cores are said: on 2 cores the
   two servers share them with PostgreSQL and the load generators.
3. What a server holds with N stores of the database open (100, 1,000 by
   default: `--held`): threads, RSS, file descriptors, and its connections
   to the database.
4. A catalog of 100,000 stores (records written straight into the
   database): a server's start, and listing stores (`limit=20`) as an admin
   and as a token that reaches one store.

With --latency-only and --floor (examples/http_floor's binary), two floors
beside them, timed with the same raw client in the same turns: memfs's
listener running the batch's statement and nothing else for each create,
and the same after a read of the request's head (token, store, head) in
one prepared statement, as memfs reads it.

usage: bench_http_pg.py MEMFS_BIN [--calls N] [--stores N] [--seconds S] [--held N,N] [--out FILE]
       bench_http_pg.py MEMFS_BIN --latency-only [--peer OTHER_MEMFS_BIN] [--floor HTTP_FLOOR_BIN]
                        [--calls N] [--out FILE]
"""
import argparse
import os
import pathlib
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

import anthropic

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "python"))
from bench_http import WRK_LUA, FloorDoor, LeanDoor, ms, pct, rss_kib, timed  # noqa: E402
from http_server import Server  # noqa: E402
from shared_hosts import Postgres  # noqa: E402

PGBENCH = "/usr/lib/postgresql/15/bin/pgbench"
FAST = ("--http-rate", "1000000000", "--http-burst", "1000000000", "--store-idle", "3600")


def api_creates(server, calls):
    c = anthropic.Anthropic(api_key=server.token("--admin"), base_url=server.url, max_retries=0)
    store = c.beta.memory_stores.create(name="latency").id
    m = c.beta.memory_stores.memories
    m.create(store, path="/warm.md", content="warm")  # the store's first use (it opens)
    return [timed(lambda i=i: m.create(store, path=f"/bench/{i}.md", content=f"note {i}\n" * 10))
            for i in range(calls)]


def raw_creates(server, calls, name):
    """The same creates as bytes on one kept-alive socket (bench_http's lean
    client): the door's own cost, without the SDK's client."""
    door = LeanDoor(server, name)
    try:
        door.timed_exchange(door.request("POST", door.base, {"path": "/warm.md", "content": "warm"}))
        return [door.timed_exchange(door.request("POST", door.base, {"path": f"/bench/{i}.md",
                                                                     "content": f"note {i}\n" * 10}))[0]
                for i in range(calls)]
    finally:
        door.close()


def floor_creates(door, calls, turn):
    """Raw creates on a floor door (the same bytes as raw_creates)."""
    return [door.timed_exchange(door.request("POST", door.base, {"path": f"/bench/{turn}-{i}.md",
                                                                 "content": f"note {i}\n" * 10}))[0]
            for i in range(calls)]


FLOORS = {
    "floor: the listener and the batch's statement": {},
    "floor: the listener, the head's read and the batch's statement": {"HTTP_FLOOR_PG_LOOK": "1"},
}


def latency_only(a, pg, tmp):
    """Creates one at a time on a root in PostgreSQL (raw client, and the
    SDK's), for this binary and with --peer another, in turns of 10, beside
    the bare INSERT+COMMIT on the same database."""
    bins = {"memfs": a.memfs} | ({"peer": a.peer} if a.peer else {})
    servers = {name: Server(b, pg.base, "--cache", str(tmp / f"cache-{name}"), *FAST) for name, b in bins.items()}
    out = {f"{name} {kind}": [] for name in bins for kind in ("raw", "SDK")}
    floors = {}
    try:
        if a.floor:
            floors = {name: FloorDoor(a.floor, dict(env, HTTP_FLOOR_PG=pg.base)) for name, env in FLOORS.items()}
            out |= {name: [] for name in floors}
        for turn in range(10):
            for name, server in servers.items():
                out[f"{name} raw"] += raw_creates(server, a.calls // 10, f"lean-{name}-{turn}")
                out[f"{name} SDK"] += api_creates(server, a.calls // 10)
            for name, door in floors.items():
                out[name] += floor_creates(door, a.calls // 10, turn)
        insert = bare_insert(pg, max(3, a.seconds // 2), tmp)
        write = batch_statement(pg, max(3, a.seconds // 2), tmp)
    finally:
        for server in servers.values():
            server.stop()
        for door in floors.values():
            door.close()
    lines = [
        "| memory create, root in PostgreSQL | p50 ms | p99 ms | / bare INSERT+COMMIT (p50) | / the batch's statement (p50) |",
        "|---|---|---|---|---|",
        f"| bare `INSERT` + `COMMIT` (pgbench -c1, {len(insert)}) | {ms(pct(insert, 50))} | {ms(pct(insert, 99))} | 1.00x | |",
        f"| the batch's statement (pgbench -c1 -M prepared, {len(write)}) | {ms(pct(write, 50))} | {ms(pct(write, 99))} "
        f"| {pct(write, 50) / pct(insert, 50):.2f}x | 1.00x |",
    ] + [
        f"| {name} ({len(xs)}) | {ms(pct(xs, 50))} | {ms(pct(xs, 99))} | {pct(xs, 50) / pct(insert, 50):.2f}x "
        f"| {pct(xs, 50) / pct(write, 50):.2f}x |"
        for name, xs in out.items()
    ]
    return lines


# A statement of the shape of memfs's batch write (crates/shared/src/db.rs
# WRITE): the store's counter moved, the content, the path touched, the
# batch's row and the wake-up, in one statement that commits as it ends.
# (The counter moves by one here, where memfs's is guarded by the head it
# read; the rows are of a one-line create's sizes.)
BATCH_STATEMENT = """\\set n random(1, 1000000000)
WITH u AS (UPDATE memfs_stores SET seq = seq + 1 WHERE name = 'bench_write' RETURNING seq), \
c AS (INSERT INTO memfs_contents (store, sha, data) SELECT 'bench_write', md5(:n::text || clock_timestamp()::text), \
convert_to(repeat('note 1 ', 10), 'UTF8') ON CONFLICT DO NOTHING), \
t AS (INSERT INTO memfs_touches (store, path, seq, origin) SELECT 'bench_write', '/bench/' || :n || '.md', u.seq, 'bench' \
FROM u ON CONFLICT DO NOTHING), \
b AS (INSERT INTO memfs_batches (store, seq, first, origin, batch, time, changes) SELECT 'bench_write', u.seq, u.seq, \
'bench', u.seq, '2026-12-07T00:00:00.000000Z', repeat('x', 300) FROM u) \
SELECT 1 / (SELECT COUNT(*) FROM u), pg_notify('memfs_bench', 'bench_write bench');
"""


def batch_statement(pg, seconds, tmp):
    """pgbench running BATCH_STATEMENT one at a time, prepared (as memfs
    prepares its own once per connection): per-transaction latencies."""
    pg.sql("INSERT INTO memfs_stores (name) VALUES ('bench_write') ON CONFLICT DO NOTHING")
    return pgbench(pg, seconds, tmp, "write", BATCH_STATEMENT, ("-M", "prepared"))


def bare_insert(pg, seconds, tmp):
    pg.sql("CREATE TABLE IF NOT EXISTS bench_rows (id BIGSERIAL PRIMARY KEY, body TEXT NOT NULL)")
    return pgbench(pg, seconds, tmp, "insert", "INSERT INTO bench_rows (body) VALUES (repeat('note 1', 10));\n")


def pgbench(pg, seconds, tmp, name, script_text, extra=()):
    """`script_text` run by pgbench on one connection, one transaction at a
    time, for `seconds`: each transaction's latency in seconds."""
    script = tmp / f"{name}.sql"
    script.write_text(script_text)
    logs = tmp / f"pgbench-{name}"
    logs.mkdir(exist_ok=True)
    subprocess.run([PGBENCH, "-n", "-c", "1", *extra, "-T", str(seconds), "-f", str(script), "-l",
                    "--log-prefix", str(logs / "log"), pg.base], check=True, capture_output=True, text=True)
    lat = []
    for f in logs.iterdir():
        for line in f.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3:
                lat.append(int(parts[2]) / 1e6)  # microseconds
    return lat


def wrk(url, token, stores, connections, seconds, tmp, tag):
    stores_file = tmp / f"stores-{tag}"
    stores_file.write_text("\n".join(stores) + "\n")
    lua = tmp / "create.lua"
    lua.write_text(WRK_LUA)
    env = dict(os.environ, MEMFS_BENCH_STORES=str(stores_file), MEMFS_BENCH_TOKEN=token,
               MEMFS_BENCH_PREFIX=f"{tag}-")
    return subprocess.Popen(["wrk", "-t", "1", "-c", str(connections), "-d", f"{seconds}s", "--timeout", "10s",
                             "-s", str(lua), url], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env)


def wrk_result(p):
    out = p.communicate(timeout=600)[0]
    m = re.search(r"MEMFS_RESULT (\d+) (\d+) (\d+) (\d+) (\d+)", out)
    assert m, out
    requests, created, status_errors, socket_errors, timeouts = map(int, m.groups())
    return requests, created, status_errors + socket_errors + timeouts


def held(server, pg):
    pid = server.proc.pid
    threads = len(os.listdir(f"/proc/{pid}/task"))
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    conns = int(pg.sql("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'memfs%'")[0][0])
    return threads, rss_kib(pid), fds, conns


def open_many(memfs, pg, tmp, counts):
    """One server opening more and more stores of the database (a memory
    made in each, eight at a time): what it holds at each count."""
    import concurrent.futures
    server = Server(memfs, pg.base, "--cache", str(tmp / "cache-open"), *FAST)
    out = []
    try:
        token = server.token("--admin", "--name", "opener")
        admin = anthropic.Anthropic(api_key=token, base_url=server.url, max_retries=5)
        ids = []

        def one(i):
            sid = admin.beta.memory_stores.create(name=f"open{i}").id
            admin.beta.memory_stores.memories.create(sid, path="/a.md", content="a")
            return sid

        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            for n in counts:
                ids += list(ex.map(one, range(len(ids), n)))
                time.sleep(2)  # the pools' connections given back
                out.append((n, *held(server, pg)))
    finally:
        server.stop()
    return out


def big_catalog(memfs, pg, tmp, n):
    """n store records written straight into the catalog, then a server's
    start and its listings."""
    pg.sql(
        "INSERT INTO memfs_catalog_stores (id, record, gen) SELECT "
        "'memstore_' || lpad(i::text, 24, '0'), "
        "json_build_object('id', 'memstore_' || lpad(i::text, 24, '0'), 'name', 's' || i, "
        "'created_at', to_char(timestamp '2026-01-01' + i * interval '1 second', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), "
        "'updated_at', '2026-01-01T00:00:00.000Z')::text, "
        f"(SELECT gen FROM memfs_catalog) FROM generate_series(1, {n}) AS i ON CONFLICT DO NOTHING")
    t0 = time.perf_counter()
    s = Server(memfs, pg.base, "--cache", str(tmp / "cache-big"), *FAST)
    started = time.perf_counter() - t0
    try:
        admin = anthropic.Anthropic(api_key=s.token("--admin", "--name", "big"), base_url=s.url, max_retries=0)
        one = anthropic.Anthropic(api_key=s.token("--store", "memstore_" + "1".zfill(24)), base_url=s.url,
                                  max_retries=0)
        a = [timed(lambda: admin.beta.memory_stores.list(limit=20)) for _ in range(100)]
        o = [timed(lambda: one.beta.memory_stores.list(limit=20)) for _ in range(100)]
        rss = rss_kib(s.proc.pid)
    finally:
        s.stop()
    return started, a, o, rss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("memfs")
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--stores", type=int, default=40)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--catalog", type=int, default=100000)
    ap.add_argument("--held", default="100,1000")
    ap.add_argument("--latency-only", action="store_true", help="only creates one at a time (raw and SDK)")
    ap.add_argument("--peer", help="with --latency-only: another memfs binary, timed in the same turns")
    ap.add_argument("--floor", help="with --latency-only: examples/http_floor's binary (the floors above)")
    ap.add_argument("--out")
    a = ap.parse_args()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="memfs-bench-pg-"))
    pg = Postgres(tmp)
    pg.start()
    res = {}
    if a.latency_only:
        try:
            text = "\n".join(latency_only(a, pg, tmp)) + "\n"
        finally:
            pg.remove()
        print(text)
        if a.out:
            pathlib.Path(a.out).write_text(text)
        return
    try:
        # 1. One call at a time.
        local = Server(a.memfs, tmp / "local", *FAST)
        try:
            res["local"] = api_creates(local, a.calls)
        finally:
            local.stop()
        one = Server(a.memfs, pg.base, "--cache", str(tmp / "cache-a"), *FAST)
        two = None
        try:
            res["pg"] = api_creates(one, a.calls)
            res["insert"] = bare_insert(pg, max(3, a.seconds // 2), tmp)
            # 2. Scale-out.
            token = one.token("--admin", "--name", "load")
            admin = anthropic.Anthropic(api_key=token, base_url=one.url, max_retries=5)
            stores = [admin.beta.memory_stores.create(name=f"s{i}").id for i in range(a.stores)]
            for sid in stores:
                admin.beta.memory_stores.memories.create(sid, path="/first.md", content="one")
            res["held"] = held(one, pg)
            p = wrk(one.url, token, stores, 64, a.seconds, tmp, "one")
            res["one_server"] = wrk_result(p)
            two = Server(a.memfs, pg.base, "--cache", str(tmp / "cache-b"), *FAST)
            other = anthropic.Anthropic(api_key=token, base_url=two.url, max_retries=5)
            for sid in stores:  # opened on b too
                other.beta.memory_stores.memories.list(sid)
            ps = [wrk(one.url, token, stores, 32, a.seconds, tmp, "a"),
                  wrk(two.url, token, stores, 32, a.seconds, tmp, "b")]
            res["two_servers"] = [wrk_result(p) for p in ps]
            found = sum(1 for sid in stores for _ in admin.beta.memory_stores.memories.list(
                sid, path_prefix="/load/", limit=100))
            res["found"] = found
        finally:
            codes = [s.stop() for s in (one, two) if s]
        res["open"] = open_many(a.memfs, pg, tmp, [int(n) for n in a.held.split(",") if n])
        res["big"] = big_catalog(a.memfs, pg, tmp, a.catalog)
    finally:
        pg.remove()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    L, P, I = res["local"], res["pg"], res["insert"]
    r1, c1, e1 = res["one_server"]
    r2 = sum(r for r, _, _ in res["two_servers"])
    c2 = sum(c for _, c, _ in res["two_servers"])
    e2 = sum(e for _, _, e in res["two_servers"])
    th, rss, fds, conns = res["held"]
    lines = [
        "## A stores root in PostgreSQL",
        "",
        f"Machine: {cpu}, {os.cpu_count()} cores, Linux {platform.release()}; PostgreSQL 15 on the same machine "
        f"(fsync on). Command: `scripts/bench_http_pg.py target/release/memfs --calls {a.calls} --stores {a.stores} "
        f"--seconds {a.seconds} --catalog {a.catalog}` at {subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True).stdout.strip()}.",
        "",
        "| one call at a time | p50 ms | p99 ms | / bare INSERT+COMMIT (p50) |",
        "|---|---|---|---|",
        f"| bare `INSERT` + `COMMIT` (pgbench -c1, {len(I)} transactions) | {ms(pct(I, 50))} | {ms(pct(I, 99))} | 1.00x |",
        f"| memory create through the API, root in PostgreSQL ({len(P)}) | {ms(pct(P, 50))} | {ms(pct(P, 99))} | {pct(P, 50) / pct(I, 50):.2f}x |",
        f"| memory create through the API, local root ({len(L)}) | {ms(pct(L, 50))} | {ms(pct(L, 99))} | {pct(L, 50) / pct(I, 50):.2f}x |",
        "",
        "The API's figures include the SDK's own client (Python, httpx) on each call.",
        "",
        f"| across {a.stores} stores (wrk, {a.seconds} s) | creates/s | errors |",
        "|---|---|---|",
        f"| one server, 64 connections | {r1 / a.seconds:.0f} | {e1} |",
        f"| two servers on one database, 32 connections each | {r2 / a.seconds:.0f} | {e2} |",
        f"| scale-out (two / one) | {r2 / max(1, r1):.2f}x | |",
        "",
        f"Creates acknowledged to wrk {c1 + c2}, found afterwards {res['found']} (wrk drops the answers in flight "
        f"at its deadline). On {os.cpu_count()} cores both servers, PostgreSQL and the two wrk processes share the "
        "same cores: the ratio says what a second server costs here, not what a second machine would add.",
        "",
        f"A server with {a.stores} stores of the database open: {th} threads, {rss / 1024:.1f} MiB resident, "
        f"{fds} file descriptors, {conns} connections to the database.",
        "",
        "| stores of the database open in one server | threads | RSS MiB | fds | connections to the database |",
        "|---|---|---|---|---|",
        *[f"| {n} | {t} | {r / 1024:.1f} | {f} | {c} |" for n, t, r, f, c in res["open"]],
        "",
        f"Servers' exit codes after SIGTERM: {codes}.",
        "",
        f"| {a.catalog} stores in the database | figure |",
        "|---|---|",
        f"| a server's start (reads every record), until it listens | {res['big'][0]:.2f} s |",
        f"| listing stores, `limit=20`, admin: p50 / p99 | {ms(pct(res['big'][1], 50))} / {ms(pct(res['big'][1], 99))} ms |",
        f"| listing stores, `limit=20`, a token that reaches one: p50 / p99 | {ms(pct(res['big'][2], 50))} / {ms(pct(res['big'][2], 99))} ms |",
        f"| the server's RSS | {res['big'][3] / 1024:.1f} MiB |",
    ]
    text = "\n".join(lines) + "\n"
    if a.out:
        pathlib.Path(a.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
