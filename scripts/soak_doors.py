#!/usr/bin/env python3
"""Soak test: one memfs memory driven through every door at once.

One `memfs --stores ROOT serve --http` owns one store (made through the memory
stores API); beside it run a FUSE mount of that store (`memfs --data ROOT/ID
mount MNT`, served by the server), an agent on `memfs --data ROOT/ID serve
--stdio` (attached through the store's socket), and `memfs --data ROOT/ID log`
every few seconds. Four threads drive the doors at a modest steady rate, each
over its own fixed set of ~20 paths, and check what every door answers
against what that thread knows it wrote:

  http   memory stores API: create, update (content, or path = a rename),
         delete, retrieve, list (paginated, checked against the known set)
  stdio  the memory tool as JSON lines: create, str_replace, insert, view
         (checked line by line), view of the directory, rename, delete
  mount  plain Python file ops under MNT/person/: editor-style save (write a
         hidden temp file, fsync, os.replace), in-place rewrite, append,
         read back, rename, delete, listdir
  log    `memfs log`, `memfs log PATH`, `memfs log --json PATH`: exit 0
  mcp    the memory tool over MCP's streamable HTTP (`POST /mcp?store=ID`),
         one session for the run, as clients keep one: create, str_replace,
         view (checked line by line), delete
  search a memory with a new word through the API, then `GET .../search`
         for it at once (a search catches up first: it must be found) and
         for a word written earlier and still live; the oldest deleted past
         20 (the index takes new files and deletions, and closes and opens
         again when idle, the whole run)

Every SAMPLE_EVERY seconds it samples VmRSS of the server, the mount process
and the stdio process, the bytes of ROOT/ID/.memfs/journal and of the plain
files, and prints one line to stderr. The server runs with a small
`--history-keep` so that the journal must be compacted to stay flat.

At the end it stops everything cleanly (umount, close the agent's stdin,
SIGTERM the server), checks that the plain files on disk are what the doors
wrote, and judges flatness (--flatness): for runs from 5 minutes, the max
over the last third of the samples against the max over the middle third
(thresholds below); for runs from 30 minutes, each process's RSS from
--judge-after (600 s) on: its median over the last ten minutes against its
median over the minute after --judge-after, and its peaks over the last
third against those over the first third, each at most --rss-growth
(2 MiB) more (judge_after), the journal and the search index by thirds; below 5 minutes (CI's short run) no flatness, errors and the final
files only. Exit 0 when all is well, 1 otherwise.

Errors tolerated (counted, not failures):
  * HTTP 503 with Retry-After: documented as transient (a short-lived owner
    holds the store, or a memory changed while it was read); the request is
    retried after Retry-After, up to HTTP_RETRIES times. A 503 that outlasts
    the retries is an error. 429 is NOT tolerated: the writer stays far under
    the default per-token rate (200/s), so a 429 would be a limiter bug.
  * with --tolerate-id-change only: a memory's id changing while the store
    stays open (see IdChanged); off by default: it was a memfs bug (a
    compaction's rebuild of the id index), fixed in crates/http/src/http/ids.rs.
Everything else (any other HTTP status, a tool result with is_error, an
OSError in the mount, a non-zero `memfs log`, a content/listing mismatch, a
timeout) is an error, and any error fails the run.

usage: soak_doors.py [--seconds N] [--json OUT] [--seed N] [--history-keep AGE,SIZE]
                     [--sample-every S] [--flatness auto|thirds|after|off] [--judge-after S]
                     [--rss-growth BYTES] [--tolerate-id-change] [--keep-tmp] [--wait-bin S]
env:   MEMFS_BIN (default target/release/memfs of this repository)
Python 3 stdlib only. Needs root (FUSE mount) and /dev/fuse.
"""
import argparse
import collections
import hashlib
import http.client
import json
import os
import queue
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse

# ---- thresholds and knobs ---------------------------------------------------
# Flatness: the max of a series over the last third of the run may exceed the
# max over the middle third by at most FRAC of it plus SLACK. The first third
# is warm-up (caches, the journal filling up to its retention) and not judged.
RSS_GROWTH_FRAC = 0.20          # RSS (server, mount process, stdio process)
RSS_GROWTH_SLACK = 4 << 20      # + 4 MiB
JOURNAL_GROWTH_FRAC = 0.20      # bytes under ROOT/ID/.memfs/journal
JOURNAL_GROWTH_SLACK = 1 << 20  # + 1 MiB
MIN_SAMPLES = 6                 # fewer samples than this: cannot judge, fail
SAMPLE_EVERY = 10.0             # seconds between samples
# Retention given to every memfs process: a small size, so that the journal
# is compacted many times during a run and must plateau (age 1h never bites).
HISTORY_KEEP = "1h,2MiB"
PACE = (0.02, 0.05)             # seconds each door sleeps between ops
LOG_EVERY = 2.0                 # seconds between `memfs log` runs
N_PATHS = 20                    # paths per door
HTTP_RETRIES = 5                # retries of a 503 with Retry-After
CALL_TIMEOUT = 60.0             # seconds any one op may take before it is an error
BIN_WAIT = 0.0                  # seconds to wait for MEMFS_BIN to appear
MAX_MESSAGES = 25               # error messages kept per door

DEFAULT_BIN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "target", "release", "memfs")

WORDS = (
    "alpha bravo cedar delta ember falcon garden harbor island jasmine kettle "
    "lantern meadow nectar orchard pepper quarry river saddle timber umbrella "
    "valley willow yarrow zephyr amber breeze canyon dune echo fern glacier "
    "hollow ivory juniper kelp lagoon maple nutmeg olive pebble quill reed "
    "sorrel thistle upland violet walnut"
).split()


def log(msg):
    print(f"soak: {msg}", file=sys.stderr, flush=True)


def mib(n):
    return "-" if n is None else f"{n / (1 << 20):.2f}MiB"


def sha(b):
    return hashlib.sha256(b).hexdigest()


def text_of(rng, lo, hi, tag):
    """Lines of plain words, lo..hi bytes, ending in a newline; no digits in
    the word lines (so markers like `~rev 3~` stay unique), nothing that looks
    like a credential."""
    target = rng.randint(lo, hi)
    lines = [f"# {tag}"]
    size = len(lines[0]) + 1
    while size < target:
        line = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12)))
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines) + "\n"


# ---- per-door bookkeeping -----------------------------------------------------

class Door:
    def __init__(self, name):
        self.name = name
        self.lock = threading.Lock()
        self.ops = collections.Counter()
        self.errors = collections.Counter()
        self.tolerated = collections.Counter()
        self.messages = []
        self.latencies = []
        self.state_trusted = True  # False when a resync after an error failed
        self.tolerate_id_change = False
        self.id_changes = []

    def ok(self, op, seconds):
        with self.lock:
            self.ops[op] += 1
            self.latencies.append(seconds)

    def error(self, op, message):
        with self.lock:
            self.errors[op] += 1
            n = sum(self.errors.values())
            if len(self.messages) < MAX_MESSAGES:
                self.messages.append(f"{op}: {message}")
        if n <= MAX_MESSAGES:
            log(f"ERROR [{self.name}] {op}: {message}")

    def tolerate(self, kind):
        with self.lock:
            self.tolerated[kind] += 1

    def total_ops(self):
        with self.lock:
            return sum(self.ops.values())

    def total_errors(self):
        with self.lock:
            return sum(self.errors.values())

    def summary(self):
        with self.lock:
            lat = sorted(self.latencies)

            def pct(p):
                if not lat:
                    return None
                return round(lat[min(len(lat) - 1, int(p / 100 * (len(lat) - 1) + 0.5))] * 1000, 2)

            return {
                "ops": sum(self.ops.values()),
                "ops_by_kind": dict(sorted(self.ops.items())),
                "errors": sum(self.errors.values()),
                "errors_by_kind": dict(sorted(self.errors.items())),
                "tolerated": dict(sorted(self.tolerated.items())),
                "error_messages": list(self.messages),
                "latency_ms": {"p50": pct(50), "p99": pct(99), "max": pct(100)},
                "state_trusted": self.state_trusted,
                "id_changes": len(self.id_changes),
                "id_change_examples": self.id_changes[:10],
            }


class OpError(Exception):
    """An op failed: counted as an error of the door."""


class IdChanged(OpError):
    """A memory's id (mem_N) changed while the store stayed open: the memory
    is at the same path under another id. An error unless --tolerate-id-change."""


def timed(door, op, fn, *args):
    """Runs one op; success counts, an OpError/OSError is an error of the door.
    Returns True on success."""
    t = time.monotonic()
    try:
        fn(*args)
    except IdChanged as e:
        with door.lock:
            door.id_changes.append(str(e))
        if door.tolerate_id_change:
            door.tolerate("id changed under a live memory (--tolerate-id-change)")
            door.ok(op, time.monotonic() - t)
            return True
        door.error(f"{op}/id_changed", str(e))
        return False
    except (OpError, OSError, ValueError, KeyError, http.client.HTTPException) as e:
        door.error(op, f"{type(e).__name__}: {e}")
        return False
    dt = time.monotonic() - t
    if dt > CALL_TIMEOUT:
        door.error(op, f"took {dt:.1f}s (> {CALL_TIMEOUT:.0f}s)")
        return False
    door.ok(op, dt)
    return True


# ---- the HTTP door ------------------------------------------------------------

class Api:
    def __init__(self, port, token, door):
        self.port = port
        self.token = token
        self.door = door
        self.conn = None

    def close(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:
                pass
            self.conn = None

    def call(self, method, path, body=None, query=None):
        url = path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None if body is None else json.dumps(body).encode()
        headers = {
            "Authorization": f"Bearer {self.token}",
            "anthropic-version": "2023-06-01",
            "Accept": "application/json",
        }
        if data is not None:
            headers["Content-Type"] = "application/json"
        for attempt in range(HTTP_RETRIES + 1):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=CALL_TIMEOUT)
                self.conn.request(method, url, body=data, headers=headers)
                resp = self.conn.getresponse()
                raw = resp.read()
            except (OSError, http.client.HTTPException) as e:
                # Not retried: a POST may or may not have been applied.
                self.close()
                raise OpError(f"{method} {url}: transport: {type(e).__name__}: {e}")
            if resp.getheader("Connection", "").lower() == "close":
                self.close()
            try:
                doc = json.loads(raw) if raw else None
            except ValueError:
                doc = None
            if 200 <= resp.status < 300:
                if doc is None:
                    raise OpError(f"{method} {url}: {resp.status} with a body that is not JSON: {raw[:200]!r}")
                return doc
            retry_after = resp.getheader("Retry-After")
            if resp.status == 503 and retry_after is not None and attempt < HTTP_RETRIES:
                self.door.tolerate("503 Retry-After (retried)")
                try:
                    wait = float(retry_after)
                except ValueError:
                    wait = 1.0
                time.sleep(min(max(wait, 0.1), 5.0))
                continue
            err = (doc or {}).get("error") if isinstance(doc, dict) else None
            if isinstance(err, dict):
                detail = f"{err.get('type')}: {err.get('message')}"
            else:
                detail = repr(raw[:300])
            raise OpError(f"{method} {url}: HTTP {resp.status} {detail}")
        raise AssertionError("unreachable")


def http_door(ctx, door, rng):
    api = Api(ctx.port, ctx.token, door)
    base = f"/v1/memory_stores/{ctx.store_id}/memories"
    paths = [f"/http/f{i:02d}.md" if i % 2 == 0 else f"/http/sub/f{i:02d}.md" for i in range(N_PATHS)]
    state = ctx.http_state  # path -> [id, content]
    rev = [0]

    def new_content(p):
        rev[0] += 1
        return text_of(rng, 200, 3000, f"http {p} rev {rev[0]}")

    def check_memory(doc, path, content, mid=None, full=False):
        if doc.get("type") != "memory":
            raise OpError(f"answer is not a memory: {str(doc)[:200]}")
        if doc.get("path") != path:
            raise OpError(f"path {doc.get('path')!r}, expected {path!r}")
        if doc.get("content_sha256") != sha(content.encode()):
            raise OpError(f"content_sha256 of {path} is not the content's")
        if not re.fullmatch(r"mem_\d+", str(doc.get("id"))):
            raise OpError(f"id {doc.get('id')!r} is not mem_N")
        if mid is not None and doc.get("id") != mid:
            raise OpError(f"id of {path} changed from {mid} to {doc.get('id')}")
        if full and doc.get("content") != content:
            raise OpError(f"content of {path} differs from what was written")

    def by_id(fn):
        """fn(p, ...) addresses the memory by the id this thread knows. On a
        404, look the path up: if the memory is there under another id, its
        id changed under it (IdChanged, with the new id adopted)."""
        def run(p, *rest):
            known = state[p][0]
            try:
                return fn(p, *rest)
            except IdChanged:
                raise
            except OpError as e:
                if "HTTP 404" not in str(e):
                    raise
                now = listing().get(p)
                if now is None or now.get("id") == known:
                    raise
                state[p][0] = now["id"]
                raise IdChanged(f"{p} was {known}, which now answers 404; the listing shows it as "
                                f"{now['id']} ({len(state)} memories; journal {mib(tree_bytes(ctx.journal_dir)[0])})")
        return run

    def create(p):
        c = new_content(p)
        doc = api.call("POST", base, {"path": p, "content": c})
        check_memory(doc, p, c)
        state[p] = [doc["id"], c]

    def update(p):
        mid, _ = state[p]
        c = new_content(p)
        doc = api.call("POST", f"{base}/{mid}", {"content": c})
        check_memory(doc, p, c, mid)
        state[p][1] = c

    def update_checked(p):
        # With a precondition on the current content: must succeed, since
        # only this thread writes /http/.
        mid, old = state[p]
        c = new_content(p)
        doc = api.call("POST", f"{base}/{mid}", {
            "content": c,
            "precondition": {"type": "content_sha256", "content_sha256": sha(old.encode())},
        })
        check_memory(doc, p, c, mid)
        state[p][1] = c

    def rename(p, q):
        mid, c = state[p]
        doc = api.call("POST", f"{base}/{mid}", {"path": q})
        check_memory(doc, q, c, mid)
        state[q] = state.pop(p)

    def delete(p):
        mid, _ = state[p]
        doc = api.call("DELETE", f"{base}/{mid}")
        if doc.get("type") != "memory_deleted" or doc.get("id") != mid:
            raise OpError(f"delete answered {str(doc)[:200]}")
        del state[p]

    def retrieve(p):
        mid, c = state[p]
        doc = api.call("GET", f"{base}/{mid}")
        check_memory(doc, p, c, mid, full=True)

    def listing(full=False):
        limit = rng.choice([7, 20, 100]) if not full else 20
        seen = {}
        page = None
        for _ in range(100):
            q = {"path_prefix": "/http/", "limit": str(limit)}
            if full:
                q["view"] = "full"
            if page:
                q["page"] = page
            doc = api.call("GET", base, query=q)
            for item in doc.get("data", []):
                if item.get("type") == "memory":
                    if item["path"] in seen:
                        raise OpError(f"{item['path']} listed twice")
                    seen[item["path"]] = item
            page = doc.get("next_page")
            if not page:
                return seen
        raise OpError("listing did not end after 100 pages")

    def list_check():
        seen = listing()
        got = {p: d["id"] for p, d in seen.items()}
        want = {p: v[0] for p, v in state.items()}
        if got != want and set(got) == set(want):
            moved = {p: (want[p], got[p]) for p in got if got[p] != want[p]}
            for p, (_, new) in moved.items():
                state[p][0] = new
            raise IdChanged(f"the listing shows {len(moved)} memories under new ids (was -> now): "
                            f"{sorted(moved.items())[:4]}")
        if got != want:
            raise OpError(f"listing differs: extra {sorted(set(got.items()) - set(want.items()))[:5]}, "
                          f"missing {sorted(set(want.items()) - set(got.items()))[:5]}")
        for p, d in seen.items():
            if d.get("content_sha256") != sha(state[p][1].encode()):
                raise OpError(f"listed content_sha256 of {p} is not the last written")

    def resync():
        try:
            seen = listing(full=True)
            state.clear()
            for p, d in seen.items():
                state[p] = [d["id"], d.get("content") or ""]
        except Exception as e:
            door.state_trusted = False
            door.error("resync", f"{type(e).__name__}: {e}")

    i = 0
    while not ctx.stop.is_set():
        ctx.stop.wait(rng.uniform(*PACE))
        if ctx.stop.is_set():
            break
        i += 1
        try:
            if i % 15 == 0:
                ok = timed(door, "list", list_check)
            else:
                p = rng.choice(paths)
                if p not in state:
                    ok = timed(door, "create", create, p)
                else:
                    r = rng.random()
                    free = [q for q in paths if q not in state]
                    if r < 0.45:
                        ok = timed(door, "update", by_id(update), p)
                    elif r < 0.60:
                        ok = timed(door, "update_precondition", by_id(update_checked), p)
                    elif r < 0.70 and free:
                        ok = timed(door, "rename", by_id(rename), p, rng.choice(free))
                    elif r < 0.85:
                        ok = timed(door, "delete", by_id(delete), p)
                    else:
                        ok = timed(door, "retrieve", by_id(retrieve), p)
        except Exception as e:  # a bug of this script: still an error, never silent
            door.error("unexpected", traceback.format_exc(limit=3).strip().replace("\n", " | "))
            ok = False
        if not ok and not ctx.stop.is_set():
            resync()
    api.close()


# ---- the stdio door (the memory tool as JSON lines) -------------------------------

class StdioClient:
    def __init__(self, proc):
        self.proc = proc
        self.lines = queue.Queue()
        self.broken = None
        threading.Thread(target=self._read, daemon=True, name="stdio-reader").start()

    def _read(self):
        try:
            for line in self.proc.stdout:
                self.lines.put(line)
        finally:
            self.lines.put(None)

    def call(self, obj):
        if self.broken:
            raise OpError(f"the stdio stream is unusable: {self.broken}")
        try:
            self.proc.stdin.write((json.dumps(obj) + "\n").encode())
            self.proc.stdin.flush()
        except OSError as e:
            self.broken = f"write: {e}"
            raise OpError(self.broken)
        try:
            line = self.lines.get(timeout=CALL_TIMEOUT)
        except queue.Empty:
            # Answers come in order: after a lost one the stream is out of step.
            self.broken = f"no answer in {CALL_TIMEOUT:.0f}s"
            raise OpError(self.broken)
        if line is None:
            self.broken = f"memfs serve --stdio ended (rc {self.proc.poll()})"
            raise OpError(self.broken)
        doc = json.loads(line)
        if not isinstance(doc, dict) or "content" not in doc:
            raise OpError(f"answer is not a tool result: {line[:200]!r}")
        return doc


def split_lines(text):
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def stdio_door(ctx, door, rng):
    cli = ctx.stdio
    root = "/memories/agent"
    paths = [f"{root}/a{i:02d}.md" if i % 3 else f"{root}/deep/a{i:02d}.md" for i in range(N_PATHS)]
    state = ctx.agent_state  # path -> content (str)
    rev = collections.Counter()

    def ok_call(obj):
        doc = cli.call(obj)
        if doc.get("is_error"):
            raise OpError(f"{obj.get('command')} {obj.get('path') or obj.get('old_path')}: {str(doc.get('content'))[:300]}")
        return str(doc.get("content"))

    def create(p):
        rev[p] = 1
        c = f"~rev 1~\n" + text_of(rng, 200, 2500, f"agent note {p}")
        ok_call({"command": "create", "path": p, "file_text": c})
        state[p] = c

    def str_replace(p):
        c = state[p]
        m = re.search(r"~rev (\d+)~[^\n]*", c)
        if not m:
            raise OpError(f"model lost the marker of {p}")
        n = int(m.group(1)) + 1
        new = f"~rev {n}~ " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 40)))
        # old_str is the whole marker line (unique: word lines have no `~`).
        ok_call({"command": "str_replace", "path": p, "old_str": m.group(0), "new_str": new})
        state[p] = c[:m.start()] + new + c[m.end():]

    def insert(p):
        lines = split_lines(state[p])
        k = rng.randint(0, len(lines))
        line = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 30)))
        ok_call({"command": "insert", "path": p, "insert_line": k, "insert_text": line + "\n"})
        lines.insert(k, line)
        state[p] = "\n".join(lines) + "\n"

    def view(p):
        out = ok_call({"command": "view", "path": p})
        head, _, body = out.partition("\n")
        if "with line numbers" not in head:
            raise OpError(f"view of {p} answered {out[:200]!r}")
        got = []
        for row in body.split("\n") if body else []:
            num, tab, line = row.partition("\t")
            if not tab or not num.strip().isdigit():
                raise OpError(f"view of {p}: odd row {row[:100]!r}")
            got.append(line)
        if got != split_lines(state[p]):
            raise OpError(f"view of {p} differs from what the agent wrote "
                          f"({len(got)} lines, expected {len(split_lines(state[p]))})")

    def view_dir():
        out = ok_call({"command": "view", "path": root})
        files = set()
        for row in out.split("\n")[1:]:
            _, _, path = row.partition("\t")
            if path.endswith(".md"):
                files.add(path)
        if files != set(state):
            raise OpError(f"view of {root}: extra {sorted(files - set(state))[:5]}, "
                          f"missing {sorted(set(state) - files)[:5]}")

    def rename(p, q):
        ok_call({"command": "rename", "old_path": p, "new_path": q})
        state[q] = state.pop(p)

    def delete(p):
        ok_call({"command": "delete", "path": p})
        del state[p]

    def resync():
        # The mount shows what the tool did at once: rebuild from it.
        try:
            state.clear()
            top = os.path.join(ctx.mnt, "agent")
            for dirpath, _, files in os.walk(top):
                for f in files:
                    if f.endswith(".md"):
                        full = os.path.join(dirpath, f)
                        with open(full, encoding="utf-8") as fh:
                            state["/memories/" + os.path.relpath(full, ctx.mnt)] = fh.read()
        except Exception as e:
            door.state_trusted = False
            door.error("resync", f"{type(e).__name__}: {e}")

    i = 0
    while not ctx.stop.is_set():
        ctx.stop.wait(rng.uniform(*PACE))
        if ctx.stop.is_set():
            break
        if cli.broken:
            break
        i += 1
        try:
            if i % 20 == 0:
                ok = timed(door, "view_dir", view_dir)
            else:
                p = rng.choice(paths)
                if p not in state:
                    ok = timed(door, "create", create, p)
                else:
                    r = rng.random()
                    free = [q for q in paths if q not in state]
                    big = len(state[p]) > 4000
                    if r < 0.30:
                        ok = timed(door, "str_replace", str_replace, p)
                    elif r < 0.55 and not big:
                        ok = timed(door, "insert", insert, p)
                    elif r < 0.75:
                        ok = timed(door, "view", view, p)
                    elif r < 0.85 and free:
                        ok = timed(door, "rename", rename, p, rng.choice(free))
                    elif r < 0.95 or big:
                        ok = timed(door, "delete", delete, p)
                    else:
                        ok = timed(door, "view", view, p)
        except Exception:
            door.error("unexpected", traceback.format_exc(limit=3).strip().replace("\n", " | "))
            ok = False
        if not ok and not ctx.stop.is_set() and not cli.broken:
            resync()


# ---- the mount door (a person with plain file ops) -----------------------------------

def mount_door(ctx, door, rng):
    top = os.path.join(ctx.mnt, "person")
    names = [f"p{i:02d}.txt" if i % 4 else f"docs/p{i:02d}.txt" for i in range(N_PATHS)]
    state = ctx.person_state  # relative name -> bytes
    rev = [0]

    def full(n):
        return os.path.join(top, n)

    def new_content(n):
        rev[0] += 1
        return text_of(rng, 200, 3000, f"person {n} rev {rev[0]}").encode()

    def maybe_fsync(f):
        if rng.random() < 0.3:
            f.flush()
            os.fsync(f.fileno())

    def editor_save(n):
        # Like vim/gedit/VS Code's atomic save: a hidden temp file, renamed over.
        c = new_content(n)
        d, base = os.path.split(full(n))
        os.makedirs(d, exist_ok=True)
        tmp = os.path.join(d, f".{base}.tmp{rng.randint(0, 1 << 30)}")
        with open(tmp, "wb") as f:
            f.write(c)
            maybe_fsync(f)
        os.replace(tmp, full(n))
        state[n] = c

    def write_new(n):
        c = new_content(n)
        os.makedirs(os.path.dirname(full(n)), exist_ok=True)
        with open(full(n), "wb") as f:
            f.write(c)
            maybe_fsync(f)
        state[n] = c

    def rewrite_in_place(n):
        c = new_content(n)
        if rng.random() < 0.5:
            with open(full(n), "r+b") as f:
                f.write(c)
                f.truncate()
                maybe_fsync(f)
        else:
            with open(full(n), "wb") as f:  # O_TRUNC, then write
                f.write(c)
                maybe_fsync(f)
        state[n] = c

    def append(n):
        extra = (" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 40))) + "\n").encode()
        with open(full(n), "ab") as f:
            f.write(extra)
            maybe_fsync(f)
        state[n] = state[n] + extra

    def read(n):
        with open(full(n), "rb") as f:
            got = f.read()
        if got != state[n]:
            raise OpError(f"{n}: read {len(got)} bytes, not the {len(state[n])} written")

    def rename(n, m):
        os.makedirs(os.path.dirname(full(m)), exist_ok=True)
        os.rename(full(n), full(m))
        state[m] = state.pop(n)

    def delete(n):
        os.unlink(full(n))
        del state[n]

    def listdir():
        got = set()
        for dirpath, _, files in os.walk(top):
            for f in files:
                got.add(os.path.relpath(os.path.join(dirpath, f), top))
        if got != set(state):
            raise OpError(f"listing of person/: extra {sorted(got - set(state))[:5]}, "
                          f"missing {sorted(set(state) - got)[:5]}")

    def resync():
        try:
            state.clear()
            for dirpath, _, files in os.walk(top):
                for f in files:
                    p = os.path.join(dirpath, f)
                    rel = os.path.relpath(p, top)
                    if f.startswith("."):
                        os.unlink(p)  # a temp file left by a failed save
                        continue
                    with open(p, "rb") as fh:
                        state[rel] = fh.read()
        except Exception as e:
            door.state_trusted = False
            door.error("resync", f"{type(e).__name__}: {e}")

    i = 0
    while not ctx.stop.is_set():
        ctx.stop.wait(rng.uniform(*PACE))
        if ctx.stop.is_set():
            break
        i += 1
        try:
            if i % 20 == 0:
                ok = timed(door, "listdir", listdir)
            else:
                n = rng.choice(names)
                if n not in state:
                    if rng.random() < 0.5:
                        ok = timed(door, "editor_save", editor_save, n)
                    else:
                        ok = timed(door, "write_new", write_new, n)
                else:
                    r = rng.random()
                    free = [m for m in names if m not in state]
                    big = len(state[n]) > 4000
                    if r < 0.25:
                        ok = timed(door, "editor_save", editor_save, n)
                    elif r < 0.40 or (r < 0.60 and big):
                        ok = timed(door, "rewrite_in_place", rewrite_in_place, n)
                    elif r < 0.60:
                        ok = timed(door, "append", append, n)
                    elif r < 0.80:
                        ok = timed(door, "read", read, n)
                    elif r < 0.90 and free:
                        ok = timed(door, "rename", rename, n, rng.choice(free))
                    else:
                        ok = timed(door, "delete", delete, n)
        except Exception:
            door.error("unexpected", traceback.format_exc(limit=3).strip().replace("\n", " | "))
            ok = False
        if not ok and not ctx.stop.is_set():
            resync()


# ---- the log reader -------------------------------------------------------------------

def log_door(ctx, door, rng):
    k = 0
    next_at = time.monotonic()
    while not ctx.stop.is_set():
        next_at += LOG_EVERY
        ctx.stop.wait(max(0.0, next_at - time.monotonic()))
        if ctx.stop.is_set():
            break
        k += 1
        argv = ctx.memfs_data("log")
        kind = "log"
        if k % 5 == 0:
            kind = "log_json_path"
            argv += ["--json", rng.choice(["http/f04.md", "http/sub/f05.md", "agent/a01.md", "person/p01.txt"])]
        elif k % 5 == 2:
            kind = "log_path"
            argv += [rng.choice(["http/", "agent/a02.md", "person/p02.txt", "person/docs/p04.txt"])]

        def run(argv=argv, kind=kind):
            try:
                r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=CALL_TIMEOUT)
            except subprocess.TimeoutExpired:
                raise OpError(f"{' '.join(argv[3:])} did not end in {CALL_TIMEOUT:.0f}s")
            if r.returncode != 0:
                raise OpError(f"{' '.join(argv[-3:])} exited {r.returncode}: {r.stderr.decode(errors='replace')[-300:]}")
            if kind == "log":
                rows = r.stdout.count(b"\n")
                if rows == 0:
                    raise OpError("`memfs log` listed nothing")
                ctx.log_rows = rows
            if kind == "log_json_path":
                for line in r.stdout.splitlines():
                    json.loads(line)
            if r.stderr.strip():
                ctx.note(f"`{' '.join(argv[-3:])}` said on stderr: {r.stderr.decode(errors='replace').strip()[:300]}")

        try:
            timed(door, kind, run)
        except Exception:
            door.error("unexpected", traceback.format_exc(limit=3).strip().replace("\n", " | "))


# ---- the MCP door (the memory tool over the server's streamable HTTP) -------------------

class Mcp:
    """One MCP session on `POST /mcp?store=ID`, as a client keeps it: opened
    once with `initialize`, every tool call in it."""

    def __init__(self, ctx, door):
        self.ctx = ctx
        self.door = door
        self.conn = None
        self.session = None
        self.next_id = 0

    def post(self, message):
        headers = {"Authorization": f"Bearer {self.ctx.token}", "Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream"}
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.ctx.port, timeout=CALL_TIMEOUT)
            self.conn.request("POST", f"/mcp?store={self.ctx.store_id}", body=json.dumps(message).encode(),
                              headers=headers)
            resp = self.conn.getresponse()
            raw = resp.read()
        except (OSError, http.client.HTTPException) as e:
            self.conn = None
            raise OpError(f"POST /mcp: transport: {type(e).__name__}: {e}")
        if resp.status not in (200, 202):
            raise OpError(f"POST /mcp {message.get('method')}: HTTP {resp.status} {raw[:300]!r}")
        return resp, raw

    def request(self, method, params):
        self.next_id += 1
        resp, raw = self.post({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        doc = json.loads(raw)
        if "error" in doc:
            raise OpError(f"{method}: {doc['error']}")
        return resp, doc["result"]

    def open(self):
        resp, _ = self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                              "clientInfo": {"name": "soak", "version": "1"}})
        self.session = resp.getheader("Mcp-Session-Id")
        if not self.session:
            raise OpError("initialize answered no Mcp-Session-Id")
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def tool(self, arguments):
        """The memory tool's text, or OpError when it says isError."""
        _, result = self.request("tools/call", {"name": "memory", "arguments": arguments})
        text = "".join(c.get("text", "") for c in result.get("content", []))
        if result.get("isError"):
            raise OpError(f"{arguments['command']} {arguments.get('path', '')}: {text[:300]}")
        return text


def mcp_door(ctx, door, rng):
    """The memory tool over MCP in one session, on its own paths: create,
    str_replace, view (each line checked), delete."""
    mcp = Mcp(ctx, door)
    if not timed(door, "initialize", mcp.open):
        return
    paths = [f"/memories/mcp/m{i:02d}.md" for i in range(N_PATHS)]
    state = ctx.mcp_state  # path -> content
    while not ctx.stop.is_set():
        path = rng.choice(paths)
        have = state.get(path)
        roll = rng.random()
        try:
            if have is None:
                text = text_of(rng, 200, 2000, f"mcp {path}")
                if timed(door, "create", mcp.tool, {"command": "create", "path": path, "file_text": text}):
                    state[path] = text
            elif roll < 0.5:
                lines = split_lines(have)
                old = rng.choice(lines).rstrip("\n") if lines else ""
                if not old or have.count(old) != 1:
                    continue
                new = f"{old} {rng.choice(WORDS)}"
                if timed(door, "str_replace", mcp.tool,
                         {"command": "str_replace", "path": path, "old_str": old, "new_str": new}):
                    state[path] = have.replace(old, new)
            elif roll < 0.9:
                def view(path=path, have=have):
                    got = mcp.tool({"command": "view", "path": path})
                    # The view numbers each line: every line written is there, in order.
                    shown = [line.split("\t", 1)[1] if "\t" in line else line
                             for line in got.splitlines()[1:]]
                    if shown != split_lines(have):
                        raise OpError(f"view {path}: {got[:200]!r} is not what was written")
                timed(door, "view", view)
            else:
                if timed(door, "delete", mcp.tool, {"command": "delete", "path": path}):
                    del state[path]
        except Exception:
            door.error("unexpected", traceback.format_exc(limit=3).strip().replace("\n", " | "))
        ctx.stop.wait(rng.uniform(*PACE))


# ---- the search door (the API's search, memfs' own extension) ---------------------------

SEARCH_EVERY = 1.0     # seconds between a new word and its search
SEARCH_KEPT = 20       # memories with a word kept live (the oldest goes past it)


def search_door(ctx, door, rng):
    """Writes a memory holding a new word through the API, then searches for
    it at once (a search catches up first: it must be found) and for a
    word written earlier that is still live; the oldest is deleted past
    SEARCH_KEPT. So the index takes new files, deletions, and its own
    closing and opening when idle, the whole run."""
    api = Api(ctx.port, ctx.token, door)
    base = f"/v1/memory_stores/{ctx.store_id}"
    live = collections.deque()  # (word, id)
    n = 0

    def found(word, path):
        for _ in range(3):
            got = api.call("GET", f"{base}/search", query={"q": word})
            if not got.get("cut"):
                break
            # Documented: a search still running at its deadline (500 ms)
            # answers what it found, marked cut; on a loaded machine, again.
            door.tolerate("search cut at its deadline (asked again)")
        paths = [hit["path"] for hit in got.get("data", [])]
        if path not in paths:
            raise OpError(f"search {word}: {path} not in {paths[:5]} (cut: {bool(got.get('cut'))})")

    while not ctx.stop.is_set():
        n += 1
        word = "".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(10))
        path = f"/search/w{n:06d}.md"
        made = {}

        def create(word=word, path=path):
            made.update(api.call("POST", f"{base}/memories",
                                 {"path": path, "content": f"a note about {word}\n"}))

        try:
            if timed(door, "create", create):
                live.append((word, made["id"], path))
                timed(door, "search_new", found, word, path)
            if len(live) > 1:
                old_word, _, old_path = live[rng.randrange(len(live) - 1)]
                timed(door, "search_old", found, old_word, old_path)
            if len(live) > SEARCH_KEPT:
                _, gone, _ = live.popleft()
                timed(door, "delete", api.call, "DELETE", f"{base}/memories/{gone}")
        except Exception:
            door.error("unexpected", traceback.format_exc(limit=3).strip().replace("\n", " | "))
        ctx.stop.wait(SEARCH_EVERY)
    ctx.search_live = {p: f"a note about {w}\n".encode() for w, _, p in live}
    api.close()


# ---- processes, sampling ----------------------------------------------------------------

def vm_rss(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def tree_bytes(top):
    total = files = 0
    for dirpath, dirnames, filenames in os.walk(top):
        for f in filenames:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
                files += 1
            except FileNotFoundError:
                pass  # removed by a compaction meanwhile
    return total, files


def find_bin(wait):
    path = os.environ.get("MEMFS_BIN", DEFAULT_BIN)
    deadline = time.monotonic() + wait
    said = False
    last_size = os.path.getsize(path) if os.path.isfile(path) else None
    if last_size is not None:
        time.sleep(1)
    while True:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            size = os.path.getsize(path)
            if size == last_size:  # not still being written
                r = subprocess.run([path, "--version"], capture_output=True, text=True)
                if r.returncode == 0:
                    return path, r.stdout.strip()
            last_size = size
        if time.monotonic() > deadline:
            raise SystemExit(f"soak: {path} did not appear (or does not run) within {wait:.0f}s")
        if not said:
            log(f"waiting for the memfs binary at {path} (MEMFS_BIN) ...")
            said = True
        time.sleep(2)


class Ctx:
    def __init__(self, args, memfs, version):
        self.args = args
        self.memfs = memfs
        self.version = version
        self.stop = threading.Event()
        self.tmp = tempfile.mkdtemp(prefix="memfs-soak-")
        self.root = os.path.join(self.tmp, "stores")
        self.mnt = os.path.join(self.tmp, "mnt")
        os.makedirs(self.mnt)
        self.keep = args.history_keep
        self.server = self.mount = self.stdio_proc = self.stdio = None
        self.port = self.token = self.store_id = self.data = self.journal_dir = None
        self.http_state, self.agent_state, self.person_state = {}, {}, {}
        self.mcp_state, self.search_live = {}, {}
        self.log_rows = None
        self.notes = []
        self.threads = []
        self.files = {}
        self.cleaned = False

    def note(self, text):
        if len(self.notes) < 50 and text not in self.notes:
            self.notes.append(text)
            log(f"note: {text}")

    def memfs_data(self, *rest):
        return [self.memfs, "--data", self.data, "--history-keep", self.keep, *rest]

    def errfile(self, name):
        f = open(os.path.join(self.tmp, name), "wb")
        self.files[name] = f
        return f

    def read_err(self, name):
        try:
            with open(os.path.join(self.tmp, name), "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""


def start(ctx):
    args = ctx.args
    # 1. a token, and the server.
    r = subprocess.run([ctx.memfs, "--stores", ctx.root, "token", "create", "--admin", "--name", "soak"],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise SystemExit(f"soak: token create failed ({r.returncode}): {r.stderr}")
    ctx.token = r.stdout.strip()
    if not re.fullmatch(r"memfs_[0-9a-f]{64}", ctx.token):
        ctx.note(f"token create printed {r.stdout!r}, not memfs_ + 64 hex digits")
    # Port 0: memfs binds a free port and says which on stderr (no race with
    # another process taking a port picked beforehand).
    ctx.server = subprocess.Popen(
        [ctx.memfs, "-v", "--stores", ctx.root, "--history-keep", ctx.keep,
         "serve", "--http", "127.0.0.1:0"],
        stdin=subprocess.DEVNULL, stdout=ctx.errfile("server.out"), stderr=ctx.errfile("server.err"),
        start_new_session=True)
    deadline = time.monotonic() + 30
    while ctx.port is None:
        m = re.search(r"on http://127\.0\.0\.1:(\d+)", ctx.read_err("server.err"))
        if m:
            ctx.port = int(m.group(1))
        elif ctx.server.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"soak: the server did not start (rc {ctx.server.poll()}): {ctx.read_err('server.err')}")
        else:
            time.sleep(0.1)
    log(f"server pid {ctx.server.pid} on 127.0.0.1:{ctx.port}, stores {ctx.root}, --history-keep {ctx.keep}")

    # 2. the store, and a first memory (the server opens the store: it must
    # own it before the mount and the agent come, or they would own it).
    setup = Door("setup")
    api = Api(ctx.port, ctx.token, setup)
    store = api.call("POST", "/v1/memory_stores", {"name": "soak", "description": "soak_doors.py"})
    ctx.store_id = store["id"]
    ctx.data = os.path.join(ctx.root, ctx.store_id)
    ctx.journal_dir = os.path.join(ctx.data, ".memfs", "journal")
    api.call("POST", f"/v1/memory_stores/{ctx.store_id}/memories",
             {"path": "/soak.md", "content": "the soak test's marker\n"})
    api.close()
    if not os.path.isdir(os.path.join(ctx.data, ".memfs", "journal")):
        raise SystemExit(f"soak: no journal at {ctx.data}/.memfs/journal after the store's first write")
    log(f"store {ctx.store_id}, data dir {ctx.data}")

    # 3. the mount, beside the server.
    ctx.mount = subprocess.Popen(ctx.memfs_data("mount", ctx.mnt),
                                 stdin=subprocess.DEVNULL, stdout=ctx.errfile("mount.out"),
                                 stderr=ctx.errfile("mount.err"), start_new_session=True)
    deadline = time.monotonic() + 30
    while not (os.path.ismount(ctx.mnt) and os.path.exists(os.path.join(ctx.mnt, "soak.md"))):
        if ctx.mount.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"soak: the mount did not come up (rc {ctx.mount.poll()}): {ctx.read_err('mount.err')}")
        time.sleep(0.1)
    log(f"mounted at {ctx.mnt} (memfs mount pid {ctx.mount.pid})")

    # 4. the agent on stdio.
    ctx.stdio_proc = subprocess.Popen(ctx.memfs_data("--as", "soak-agent", "serve", "--stdio"),
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=ctx.errfile("stdio.err"), start_new_session=True)
    ctx.stdio = StdioClient(ctx.stdio_proc)
    first = ctx.stdio.call({"command": "view", "path": "/memories"})
    if first.get("is_error") or "/memories/soak.md" not in str(first.get("content")):
        raise SystemExit(f"soak: the stdio agent does not see the store: {first}")
    log(f"stdio agent pid {ctx.stdio_proc.pid}")


def sample(ctx, t0):
    j, jf = tree_bytes(os.path.join(ctx.data, ".memfs", "journal"))
    p, pf = tree_bytes(os.path.join(ctx.data, "memories"))
    ix, _ = tree_bytes(os.path.join(ctx.data, ".memfs", "search"))
    s = {
        "t": round(time.monotonic() - t0, 1),
        "server_rss": vm_rss(ctx.server.pid),
        "mount_rss": vm_rss(ctx.mount.pid),
        "stdio_rss": vm_rss(ctx.stdio_proc.pid),
        "journal_bytes": j,
        "journal_files": jf,
        "plain_bytes": p,
        "plain_files": pf,
        "index_bytes": ix,
        "log_rows": ctx.log_rows,
        "ops": {d.name: d.total_ops() for d in ctx.doors},
        "errors": sum(d.total_errors() for d in ctx.doors),
    }
    log(f"[{s['t']:6.0f}s] rss server={mib(s['server_rss'])} mount={mib(s['mount_rss'])} "
        f"stdio={mib(s['stdio_rss'])}  journal={mib(j)} ({jf} files)  index={mib(ix)}  "
        f"plain={p / 1024:.0f}KiB ({pf} files)  "
        f"log_rows={s['log_rows']}  ops " + " ".join(f"{k}={v}" for k, v in s["ops"].items())
        + f"  errors={s['errors']}")
    return s


# ---- stopping ---------------------------------------------------------------------------

def wait_proc(proc, timeout):
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


def stop_all(ctx, failures):
    """Idempotent, best effort, never raises: every process ends, the mount goes."""
    if ctx.cleaned:
        return
    ctx.cleaned = True
    ctx.stop.set()
    for t in ctx.threads:
        t.join(timeout=CALL_TIMEOUT + 5)
        if t.is_alive():
            failures.append(f"the {t.name} door did not stop within {CALL_TIMEOUT + 5:.0f}s (a hung call?)")

    # The mount: umount, then `memfs mount` exits by itself.
    if ctx.mount is not None:
        if os.path.ismount(ctx.mnt):
            cmd = ["fusermount3", "-u", ctx.mnt] if shutil.which("fusermount3") else ["umount", ctx.mnt]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                failures.append(f"`{' '.join(cmd)}` failed: {r.stderr.strip()}")
        rc = wait_proc(ctx.mount, 20)
        if rc is None:
            failures.append("memfs mount did not exit within 20s of the umount; SIGTERM")
            ctx.mount.terminate()
            rc = wait_proc(ctx.mount, 10)
        if rc is None:
            ctx.mount.kill()
            rc = wait_proc(ctx.mount, 5)
        if rc not in (0, None):
            failures.append(f"memfs mount exited {rc}")
        if os.path.ismount(ctx.mnt):
            subprocess.run(["umount", "-l", ctx.mnt], capture_output=True)
            failures.append("the mount had to be detached lazily (umount -l)")

    # The agent: end of stdin is its end.
    if ctx.stdio_proc is not None:
        try:
            ctx.stdio_proc.stdin.close()
        except OSError:
            pass
        rc = wait_proc(ctx.stdio_proc, 30)
        if rc is None:
            failures.append("memfs serve --stdio did not exit within 30s of the end of its stdin; killed")
            ctx.stdio_proc.kill()
            wait_proc(ctx.stdio_proc, 5)
        elif rc != 0:
            failures.append(f"memfs serve --stdio exited {rc}")

    # The server: SIGTERM.
    if ctx.server is not None:
        if ctx.server.poll() is None:
            ctx.server.terminate()
        rc = wait_proc(ctx.server, 60)
        if rc is None:
            failures.append("the server did not exit within 60s of SIGTERM; killed")
            ctx.server.kill()
            wait_proc(ctx.server, 5)
        elif rc != 0:
            failures.append(f"the server exited {rc} after SIGTERM")
    for f in ctx.files.values():
        try:
            f.close()
        except OSError:
            pass


# ---- judging ----------------------------------------------------------------------------

def judge(samples, key, frac, slack):
    vals = [s[key] for s in samples]
    n = len(vals)
    out = {"first": vals[0] if vals else None, "final": vals[-1] if vals else None}
    if any(v is None for v in vals):
        out.update(ok=False, why=f"{key}: the process was gone at some sample")
        return out
    if n < MIN_SAMPLES:
        out.update(ok=False, why=f"{key}: only {n} samples (need {MIN_SAMPLES}): run longer")
        return out
    mid = vals[n // 3: 2 * n // 3]
    last = vals[2 * n // 3:]
    mid_max, last_max = max(mid), max(last)
    limit = mid_max * (1 + frac) + slack
    out.update(mid=mid_max, last=last_max, max=max(vals), limit=int(limit), ok=last_max <= limit)
    if not out["ok"]:
        out["why"] = (f"{key} grew: max over the last third {mib(last_max)} > "
                      f"{mib(mid_max)} (max over the middle third) x {1 + frac:.2f} + {mib(slack)} = {mib(limit)}")
    return out


def judge_after(samples, key, after, growth):
    """For an hour's run, from `after` seconds on (the caches warm, the
    journal filled to its retention), two bounds of `growth` each:
      level  the median over the last ten minutes against the median over
             the minute from `after` on: what the process holds between
             bursts does not grow;
      peaks  the max over the last third of the samples after `after`
             against the max over their first third: the bursts (a
             compaction, a search reload, a listing) do not grow either.
    (A burst is no growth: an earlier judge compared every later max with
    the first minute's median, and failed flat runs on a burst seen from
    minute 5 on.)"""
    vals = [(x["t"], x[key]) for x in samples]
    out = {"first": vals[0][1] if vals else None, "final": vals[-1][1] if vals else None}
    if any(v is None for _, v in vals):
        out.update(ok=False, why=f"{key}: the process was gone at some sample")
        return out
    base = [v for t, v in vals if after <= t <= after + 60]
    late = [v for t, v in vals if t >= after]
    end = vals[-1][0]
    tail = [v for t, v in vals if t >= max(after, end - 600)]
    if len(base) < 3 or len(late) < MIN_SAMPLES:
        out.update(ok=False, why=f"{key}: too few samples after {after:.0f} s: run longer")
        return out
    med = sorted(base)[len(base) // 2]
    level = sorted(tail)[len(tail) // 2]
    third = len(late) // 3
    early_top, late_top = max(late[:third]), max(late[-third:])
    ok_level = level <= med + growth
    ok_peaks = late_top <= early_top + growth
    out.update(mid=med, last=level, max=max(v for _, v in vals), limit=int(med + growth),
               early_peak=early_top, late_peak=late_top, ok=ok_level and ok_peaks)
    if not ok_level:
        out["why"] = (f"{key} grew: median over the last 10 minutes {mib(level)} > {mib(med)} (median over "
                      f"{after:.0f}-{after + 60:.0f} s) + {mib(growth)}")
    elif not ok_peaks:
        out["why"] = (f"{key} peaks grew: max over the last third {mib(late_top)} > {mib(early_top)} "
                      f"(max over the first third after {after:.0f} s) + {mib(growth)}")
    return out


def final_state_check(ctx, failures):
    """After a clean stop the plain files are current: they must be what the
    doors last wrote."""
    mem = os.path.join(ctx.data, "memories")
    checks = {}

    def compare(door, prefix, want):
        if not door.state_trusted:
            checks[door.name] = "skipped (its state could not be resynced after an error)"
            return
        top = os.path.join(mem, prefix)
        got = {}
        for dirpath, _, files in os.walk(top):
            for f in files:
                p = os.path.join(dirpath, f)
                with open(p, "rb") as fh:
                    got[os.path.relpath(p, top)] = fh.read()
        bad = []
        for k in sorted(set(got) | set(want)):
            if k not in got:
                bad.append(f"missing {prefix}/{k}")
            elif k not in want:
                bad.append(f"unexpected {prefix}/{k}")
            elif got[k] != want[k]:
                bad.append(f"{prefix}/{k} differs ({len(got[k])} bytes on disk, {len(want[k])} written)")
        checks[door.name] = "ok" if not bad else bad[:10]
        if bad:
            failures.append(f"the plain files under {prefix}/ after the stop are not what the {door.name} door wrote: {bad[:5]}")

    d = {x.name: x for x in ctx.doors}
    compare(d["http"], "http", {p[len("/http/"):]: v[1].encode() for p, v in ctx.http_state.items()})
    compare(d["stdio"], "agent", {p[len("/memories/agent/"):]: v.encode() for p, v in ctx.agent_state.items()})
    compare(d["mount"], "person", dict(ctx.person_state))
    compare(d["mcp"], "mcp", {p[len("/memories/mcp/"):]: v.encode() for p, v in ctx.mcp_state.items()})
    compare(d["search"], "search", {p[len("/search/"):]: v for p, v in ctx.search_live.items()})
    # And the history still reads once no memfs runs.
    r = subprocess.run(ctx.memfs_data("log"), capture_output=True, timeout=120)
    rows = r.stdout.count(b"\n")
    checks["log_after_stop"] = f"exit {r.returncode}, {rows} rows"
    if r.returncode != 0:
        failures.append(f"`memfs log` after the stop exited {r.returncode}: {r.stderr.decode(errors='replace')[-300:]}")
    return checks


def server_log_summary(ctx):
    text = ctx.read_err("server.err")
    lines = [l for l in text.splitlines() if l.strip()]
    compactions = [l for l in lines if "history:" in l]
    warnings = [l for l in lines if re.search(r"\b(WARN|ERROR|warning|error)\b", l) and "history:" not in l]
    return {
        "lines": len(lines),
        "compactions": len(compactions),
        # memfs logs a compaction that dropped nothing too: how many of them.
        "compactions_dropping_nothing": sum(1 for l in compactions if "dropped 0 old version" in l),
        "last_compaction": compactions[-1] if compactions else None,
        "warnings_or_errors": warnings[:20],
        "tail": lines[-10:],
    }


def fmt_row(cells, widths):
    return "  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))


def print_summary(report):
    out = sys.stdout
    print("", file=out)
    print(f"memfs soak through every door: {report['seconds_run']:.0f}s, {report['version']}, "
          f"--history-keep {report['history_keep']}", file=out)
    w = [8, 8, 8, 9, 30]
    print(fmt_row(["door", "ops", "errors", "tolerated", "latency ms p50/p99/max"], w), file=out)
    for name, d in report["doors"].items():
        lat = d["latency_ms"]
        print(fmt_row([name, d["ops"], d["errors"], sum(d["tolerated"].values()),
                       f"{lat['p50']}/{lat['p99']}/{lat['max']}"], w), file=out)
    print("", file=out)
    w = [14, 10, 10, 10, 10, 10, 10, 4]
    print(fmt_row(["series", "first", "mid3 max", "last3 max", "max", "final", "limit", "ok"], w), file=out)
    for name, j in report["series"].items():
        print(fmt_row([name, mib(j.get("first")), mib(j.get("mid")), mib(j.get("last")), mib(j.get("max")),
                       mib(j.get("final")), mib(j.get("limit")), "yes" if j.get("ok") else "NO"], w), file=out)
    print("", file=out)
    sl = report["server_log"]
    print(f"server: {sl['compactions']} compactions logged ({sl['compactions_dropping_nothing']} of them dropped "
          f"nothing); last: {sl['last_compaction']}", file=out)
    for l in sl["warnings_or_errors"]:
        print(f"server said: {l}", file=out)
    for name in ("mount_log", "stdio_log"):
        for l in report[name]:
            print(f"{name.split('_')[0]} said: {l}", file=out)
    for n in report["notes"]:
        print(f"note: {n}", file=out)
    print(f"final state: {json.dumps(report['final_state'])}", file=out)
    for name, d in report["doors"].items():
        for m in d["error_messages"][:10]:
            print(f"error [{name}] {m}", file=out)
        if d["tolerated"]:
            print(f"tolerated [{name}] {d['tolerated']}", file=out)
        if d["id_changes"]:
            print(f"[{name}] {d['id_changes']} memory id(s) changed while the store stayed open; e.g. "
                  f"{d['id_change_examples'][0]}", file=out)
    if report["ok"]:
        print("RESULT: PASS", file=out)
    else:
        print("RESULT: FAIL", file=out)
        for f in report["failures"]:
            print(f"  - {f}", file=out)
    out.flush()


# ---- main -------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=600, help="how long to drive the doors (600)")
    ap.add_argument("--json", metavar="OUT", help="write the summary as JSON here")
    ap.add_argument("--sample-every", type=float, default=SAMPLE_EVERY, help=f"seconds between samples ({SAMPLE_EVERY:.0f})")
    ap.add_argument("--flatness", choices=["auto", "thirds", "after", "off"], default="auto",
                    help="how growth is judged: the last third against the middle one, or (an hour's run) "
                         "from --judge-after on against the minute after it; auto: after from 30 min, thirds "
                         "from 5 min, off below (a short run judges errors and the final files only)")
    ap.add_argument("--judge-after", type=float, default=600, help="seconds of warm-up before growth counts (600)")
    ap.add_argument("--rss-growth", type=float, default=2 << 20, help="bytes of RSS growth allowed after it (2 MiB)")
    ap.add_argument("--seed", type=int, default=None, help="random seed (printed)")
    ap.add_argument("--history-keep", default=HISTORY_KEEP, help=f"retention for every memfs ({HISTORY_KEEP})")
    ap.add_argument("--tolerate-id-change", action="store_true",
                    help="count a memory id that changes while the store stays open (mem_N -> the oldest "
                         "kept version after a compaction) as tolerated, not an error: to soak the rest "
                         "while that memfs issue stands")
    ap.add_argument("--keep-tmp", action="store_true", help="keep the temp dir (stores, logs) at the end")
    ap.add_argument("--wait-bin", type=float, default=BIN_WAIT, help="seconds to wait for MEMFS_BIN")
    args = ap.parse_args()
    if os.geteuid() != 0:
        log("warning: not root; the FUSE mount may fail")
    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    log(f"seed {seed}")

    memfs, version = find_bin(args.wait_bin)
    log(f"memfs {memfs}: {version}")

    def on_term(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    # SIGINT too: a shell may have started this with SIGINT ignored (`cmd &`).
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_term)

    ctx = Ctx(args, memfs, version)
    ctx.doors = [Door("http"), Door("stdio"), Door("mount"), Door("log"), Door("mcp"), Door("search")]
    ctx.doors[0].tolerate_id_change = args.tolerate_id_change
    failures = []
    samples = []
    interrupted = False
    t0 = time.monotonic()
    report = None
    try:
        start(ctx)
        bodies = {"http": http_door, "stdio": stdio_door, "mount": mount_door, "log": log_door,
                  "mcp": mcp_door, "search": search_door}
        t0 = time.monotonic()
        for k, door in enumerate(ctx.doors):
            t = threading.Thread(target=bodies[door.name], args=(ctx, door, random.Random(seed + k)),
                                 name=door.name, daemon=True)
            ctx.threads.append(t)
        samples.append(sample(ctx, t0))
        for t in ctx.threads:
            t.start()
        end = t0 + args.seconds
        next_sample = t0 + args.sample_every
        while True:
            now = time.monotonic()
            if now >= end:
                break
            time.sleep(max(0.0, min(next_sample, end) - now))
            for name, proc in (("server", ctx.server), ("mount", ctx.mount), ("stdio", ctx.stdio_proc)):
                if proc.poll() is not None:
                    raise RuntimeError(f"the {name} process exited early with {proc.returncode}")
            if time.monotonic() >= next_sample - 0.01:
                samples.append(sample(ctx, t0))
                next_sample += args.sample_every
        if time.monotonic() - t0 - samples[-1]["t"] >= 3:
            samples.append(sample(ctx, t0))
    except KeyboardInterrupt as e:
        interrupted = True
        failures.append(f"interrupted ({e or 'Ctrl-C'})")
    except SystemExit as e:
        failures.append(str(e))
    except Exception as e:
        failures.append(f"{type(e).__name__}: {e}")
        traceback.print_exc()
    finally:
        seconds_run = time.monotonic() - t0
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, lambda *_: log("already stopping; wait for the clean-up"))
        log("stopping: umount, end of the agent's stdin, SIGTERM to the server")
        try:
            stop_all(ctx, failures)
        except BaseException as e:  # still reach the cleanup below
            failures.append(f"stopping failed: {type(e).__name__}: {e}")
        if ctx.mount is not None and ctx.mount.poll() is None:
            ctx.mount.kill()
        for p in (ctx.server, ctx.stdio_proc):
            if p is not None and p.poll() is None:
                p.kill()
        if os.path.ismount(ctx.mnt):
            subprocess.run(["umount", "-l", ctx.mnt], capture_output=True)

    try:
        final = {}
        if ctx.data and samples and not interrupted:
            try:
                final = final_state_check(ctx, failures)
            except Exception as e:
                failures.append(f"final state check failed: {type(e).__name__}: {e}")
        series = {}
        flatness = args.flatness
        if flatness == "auto":
            flatness = "after" if args.seconds >= 1800 else "thirds" if args.seconds >= 300 else "off"
        if samples and flatness != "off":
            for key in ("server_rss", "mount_rss", "stdio_rss"):
                series[key] = (judge_after(samples, key, args.judge_after, args.rss_growth) if flatness == "after"
                               else judge(samples, key, RSS_GROWTH_FRAC, RSS_GROWTH_SLACK))
            for key in ("journal_bytes", "index_bytes", "plain_bytes"):
                series[key] = judge(samples, key, JOURNAL_GROWTH_FRAC, JOURNAL_GROWTH_SLACK)
            for key, j in series.items():
                if not j.get("ok") and key != "plain_bytes":  # plain files: informative only
                    failures.append(j.get("why", f"{key} not flat"))
        elif not samples:
            failures.append("no samples were taken")
        for d in ctx.doors:
            if d.total_errors():
                failures.append(f"the {d.name} door had {d.total_errors()} error(s): {dict(d.errors)}")
            if not d.total_ops():
                failures.append(f"the {d.name} door did no ops")
        report = {
            "ok": not failures,
            "failures": failures,
            "seconds": args.seconds,
            "seconds_run": round(seconds_run, 1),
            "seed": seed,
            "binary": memfs,
            "version": version,
            "history_keep": ctx.keep,
            "tolerate_id_change": args.tolerate_id_change,
            "store_id": ctx.store_id,
            "tmp": ctx.tmp if args.keep_tmp else None,
            "thresholds": {
                "rss_growth_frac": RSS_GROWTH_FRAC, "rss_growth_slack": RSS_GROWTH_SLACK,
                "journal_growth_frac": JOURNAL_GROWTH_FRAC, "journal_growth_slack": JOURNAL_GROWTH_SLACK,
                "sample_every": args.sample_every, "min_samples": MIN_SAMPLES,
            },
            "doors": {d.name: d.summary() for d in ctx.doors},
            "series": series,
            "server_log": server_log_summary(ctx),
            "mount_log": [l for l in ctx.read_err("mount.err").splitlines()
                          if l.strip() and not re.match(r"memfs: (mounted at|unmounted) ", l)][-20:],
            "stdio_log": [l for l in ctx.read_err("stdio.err").splitlines() if l.strip()][-20:],
            "notes": ctx.notes,
            "final_state": final,
            "samples": samples,
        }
        print_summary(report)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(report, f, indent=2)
            log(f"wrote {args.json}")
    finally:
        if args.keep_tmp or os.path.ismount(ctx.mnt):
            log(f"kept {ctx.tmp}")
        else:
            shutil.rmtree(ctx.tmp, ignore_errors=True)
    return 0 if report and report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
