#!/usr/bin/env python3
"""No lost update across hosts: H memfs hosts on one shared store (each
with its mount), A agents on each (their own `serve --stdio` sessions)
incrementing one counter file with `str_replace` for S seconds, and a person
saving files on two of the mounts meanwhile. At the end: the counter equals
the acknowledged increments, on every host; every version of the counter in
the database names the one before it in `replaces`; every host's tree is
the database's.

usage: shared_counter.py MEMFS_BIN [--hosts H] [--agents A] [--seconds S] [--out FILE]
"""
import argparse
import os
import pathlib
import sys
import tempfile
import threading
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "python"))
sys.path.insert(0, str(REPO / "scripts"))
from shared_hosts import Host, Postgres, read, wait_for  # noqa: E402
from bench_shared import Stdio  # noqa: E402
from shared_faults import tree  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("memfs")
    ap.add_argument("--hosts", type=int, default=8)
    ap.add_argument("--agents", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--out")
    args = ap.parse_args()
    root = pathlib.Path(tempfile.mkdtemp(prefix="memfs-counter-"))
    pg = Postgres(root)
    pg.start()
    hosts = [Host(args.memfs, pg.url("counter"), root, f"h{i}") for i in range(args.hosts)]
    stop = threading.Event()
    acked = []
    saves = [0, 0]
    began = time.time()
    try:
        for h in hosts:
            h.mount()
        first = hosts[0].tool(command="create", path="/memories/counter.md", file_text="count=0;\n")
        assert not first["is_error"], first
        for h in hosts:
            wait_for(lambda: read(h.mnt / "counter.md") == "count=0;\n", 30, f"{h.mnt} has it")

        def agent(h):
            s = Stdio(h)
            done = tries = 0
            while not stop.is_set():
                text = s.call(command="view", path="/memories/counter.md")["content"]
                value = int(text.split("count=")[1].split(";")[0])
                r = s.call(command="str_replace", path="/memories/counter.md",
                           old_str=f"count={value};", new_str=f"count={value + 1};")
                tries += 1
                if not r["is_error"]:
                    done += 1
                elif "did not appear verbatim" not in r["content"]:
                    raise AssertionError(r)
            s.close()
            acked.append((done, tries))

        def person(k, h):
            i = 0
            while not stop.is_set():
                (h.mnt / f"person-{k}.md").write_text(f"save {i}\n")
                saves[k] += 1
                i += 1
                time.sleep(0.05)

        threads = [threading.Thread(target=agent, args=(h,)) for h in hosts for _ in range(args.agents)]
        threads += [threading.Thread(target=person, args=(k, hosts[k])) for k in range(min(2, len(hosts)))]
        for t in threads:
            t.start()
        time.sleep(args.seconds)
        stop.set()
        for t in threads:
            t.join()
        total = sum(d for d, _ in acked)
        tries = sum(t for _, t in acked)
        for h in hosts:
            wait_for(lambda: read(h.mnt / "counter.md") == f"count={total};\n", 60,
                     f"{h.mnt}: the count is {total}")
        rows = pg.sql("""
            SELECT r->>'version', r->>'replaces' FROM memfs_batches,
                json_array_elements(changes::json) c, json_array_elements(c->'rows') r
            WHERE store = 'counter' AND r->>'path' = '/memories/counter.md' ORDER BY seq""")
        assert len(rows) == total + 1, (len(rows), total)
        broken = [(p, r) for p, r in zip(rows, rows[1:]) if r[1] != p[0]]
        assert not broken, broken[:5]
        truth = tree(hosts[0].mnt)
        for h in hosts[1:]:
            wait_for(lambda: tree(h.mnt) == truth, 60, f"{h.mnt} is the same tree")
    finally:
        stop.set()
        for h in hosts:
            h.stop()
        pg.remove()
    took = time.time() - began
    text = "\n".join([
        f"- Command: `scripts/shared_counter.py target/release/memfs --hosts {args.hosts} --agents {args.agents} --seconds {args.seconds:g}`; {took:.0f} s in all.",
        "",
        "| hosts × agents | seconds | increments acknowledged | str_replace calls (lost races re-read) | final count, every host | versions whose `replaces` is not the one before | person's saves on 2 mounts |",
        "|---|---|---|---|---|---|---|",
        f"| {args.hosts} × {args.agents} | {args.seconds:g} | {total} | {tries} | {total} | 0 | {sum(saves)} |",
    ])
    print(text)
    if args.out:
        pathlib.Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
