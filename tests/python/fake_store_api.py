"""A fake of Anthropic's hosted memory stores API, for what memfs's store
over HTTP needs of it, following its documented behaviour and limits (the
SDK's types: 102,400 bytes a memory, paths of 1 to 20 segments and at most
1,024 bytes in NFC, 2,000 memories, 409 on a failed precondition, at most
100 a page and 20 with view=full). Where the documents are silent it gives
the harsher answer: random opaque ids, created_at with microseconds, newest
first; a create at a taken path is a 409; an unknown query parameter is a
400 (so memfs's long-poll extension must never be sent to it); no
Idempotency-Key is honoured; no memfs-extensions header; `lag` seconds
before a version is listed.

Also a control door for tests: POST /_fake/revoke (the key stops working),
POST /_fake/archive (the store is archived); `requests` records every
(method, path, query keys) asked.

    with FakeStoreApi(key="sk-fake") as api:
        api.url, api.store_id
"""
import hashlib
import json
import random
import string
import threading
import time
import unicodedata
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

MEMORY_MOST = 102_400
MEMORIES_MOST = 2_000
KNOWN = {
    ("GET", "store"): set(),
    ("GET", "memories"): {"view", "limit", "page", "path_prefix", "depth", "order", "order_by"},
    ("POST", "memories"): {"view"},
    ("GET", "memory"): {"view"},
    ("POST", "memory"): {"view"},
    ("DELETE", "memory"): {"expected_content_sha256"},
    ("GET", "versions"): {"view", "limit", "page", "created_at[gte]", "created_at[lte]", "memory_id", "operation"},
}


def rid(prefix):
    return prefix + "".join(random.choice(string.ascii_letters + string.digits) for _ in range(24))


def now():
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def sha(text):
    return hashlib.sha256(text.encode()).hexdigest()


class FakeStoreApi:
    def __init__(self, key="sk-fake", lag=0.0):
        self.key = key
        self.lag = lag
        self.store_id = rid("memstore_")
        self.archived = False
        self.memories = {}  # id -> {path, content, created_at, updated_at, version}
        self.versions = []  # oldest first: dicts, plus "_listed_at"
        self.requests = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                fake.serve(self, "GET")

            def do_POST(self):
                fake.serve(self, "POST")

            def do_DELETE(self):
                fake.serve(self, "DELETE")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    # ---- the state, as a test sees it ----

    def files(self):
        with self.lock:
            return {m["path"]: m["content"] for m in self.memories.values()}

    def put(self, path, content):
        """A change made by another machine: create or update at path."""
        with self.lock:
            for mid, m in self.memories.items():
                if m["path"] == path:
                    self._change(mid, content=content)
                    return mid
            return self._create(path, content)["id"]

    # ---- the API ----

    def serve(self, h, method):
        parts = urlsplit(h.path)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        length = int(h.headers.get("content-length") or 0)
        body = h.rfile.read(length) if length else b""
        segs = [s for s in parts.path.split("/") if s]
        self.requests.append((method, parts.path, sorted(query)))
        if segs[:1] == ["_fake"]:
            if segs[1:] == ["revoke"]:
                self.key = None
            elif segs[1:] == ["archive"]:
                self.archived = True
            return self.reply(h, 200, {})
        given = h.headers.get("x-api-key") or (h.headers.get("authorization") or "").removeprefix("Bearer ")
        if self.key is None or given != self.key:
            return self.error(h, 401, "authentication_error", "invalid x-api-key")
        if segs[:2] != ["v1", "memory_stores"] or len(segs) < 3 or segs[2] != self.store_id:
            return self.error(h, 404, "not_found_error", "no such memory store")
        rest = segs[3:]
        kind = {0: "store", 1: {"memories": "memories", "memory_versions": "versions"}.get(rest[0] if rest else "", "?"),
                2: "memory" if rest[:1] == ["memories"] else "?"}.get(len(rest), "?")
        allowed = KNOWN.get((method, kind))
        if allowed is None:
            return self.error(h, 404, "not_found_error", "no such route")
        unknown = set(query) - allowed
        if unknown:
            return self.error(h, 400, "invalid_request_error", f"unknown query parameter(s): {sorted(unknown)}")
        try:
            data = json.loads(body) if body else {}
        except ValueError:
            return self.error(h, 400, "invalid_request_error", "body is not JSON")
        with self.lock:
            if self.archived and method != "GET":
                return self.error(h, 409, "invalid_request_error", "the memory store is archived")
            return getattr(self, f"{method.lower()}_{kind}")(h, query, data, rest)

    def reply(self, h, status, obj):
        text = json.dumps(obj).encode()
        h.send_response(status)
        h.send_header("content-type", "application/json")
        h.send_header("content-length", str(len(text)))
        h.send_header("request-id", rid("req_"))
        h.end_headers()
        h.wfile.write(text)

    def error(self, h, status, kind, message):
        return self.reply(h, status, {"type": "error", "error": {"type": kind, "message": message}})

    def memory(self, mid, full=True):
        m = self.memories[mid]
        out = {"type": "memory", "id": mid, "memory_store_id": self.store_id, "path": m["path"],
               "content_sha256": sha(m["content"]), "content_size_bytes": len(m["content"].encode()),
               "created_at": m["created_at"], "updated_at": m["updated_at"], "memory_version_id": m["version"]}
        if full:
            out["content"] = m["content"]
        return out

    def path_error(self, path):
        if not isinstance(path, str) or not path.startswith("/"):
            return "path must start with /"
        if len(path.encode()) > 1024:
            return "path is longer than 1,024 bytes"
        segs = path[1:].split("/")
        if len(segs) > 20 or any(s in ("", ".", "..") for s in segs):
            return "path must have 1 to 20 non-empty segments"
        if unicodedata.normalize("NFC", path) != path:
            return "path must be NFC"
        return None

    def _version(self, mid, operation):
        m = self.memories.get(mid)
        v = {"type": "memory_version", "id": rid("memver_"), "memory_id": mid, "memory_store_id": self.store_id,
             "operation": operation, "created_at": now(), "created_by": {"type": "api_actor", "api_key_id": "key"},
             "path": m["path"] if m and operation != "deleted" else None,
             "content_sha256": sha(m["content"]) if m and operation != "deleted" else None,
             "_listed_at": time.time() + self.lag}
        self.versions.append(v)
        return v

    def _create(self, path, content):
        mid = rid("mem_")
        t = now()
        self.memories[mid] = {"path": path, "content": content, "created_at": t, "updated_at": t, "version": None}
        self.memories[mid]["version"] = self._version(mid, "created")["id"]
        return self.memory(mid)

    def _change(self, mid, content=None, path=None):
        m = self.memories[mid]
        if content is not None:
            m["content"] = content
        if path is not None:
            m["path"] = path
        m["updated_at"] = now()
        m["version"] = self._version(mid, "modified")["id"]

    def get_store(self, h, query, data, rest):
        return self.reply(h, 200, {"type": "memory_store", "id": self.store_id, "name": "fake",
                                   "archived_at": now() if self.archived else None})

    def page_of(self, items, query, most):
        try:
            limit = int(query.get("limit", 20))
        except ValueError:
            limit = 0
        if not 1 <= limit <= 100:
            return None
        limit = min(limit, most)
        start = 0
        if "page" in query:
            ids = [i["id"] for i in items]
            if query["page"] not in ids:
                return None
            start = ids.index(query["page"]) + 1
        data = items[start:start + limit]
        more = start + limit < len(items)
        return {"data": data, "next_page": data[-1]["id"] if more and data else None}

    def get_memories(self, h, query, data, rest):
        full = query.get("view") == "full"
        items = [self.memory(mid, full) for mid in sorted(self.memories, key=lambda i: self.memories[i]["path"])]
        page = self.page_of(items, query, 20 if full else 100)
        if page is None:
            return self.error(h, 400, "invalid_request_error", "bad limit or page")
        return self.reply(h, 200, page)

    def post_memories(self, h, query, data, rest):
        path, content = data.get("path"), data.get("content")
        why = self.path_error(path)
        if why or not isinstance(content, str):
            return self.error(h, 400, "invalid_request_error", why or "content must be a string")
        if len(content.encode()) > MEMORY_MOST:
            return self.error(h, 413, "request_too_large", "content is over 102,400 bytes")
        if any(m["path"] == path for m in self.memories.values()):
            return self.error(h, 409, "invalid_request_error", "a memory exists at that path")
        if len(self.memories) >= MEMORIES_MOST:
            return self.error(h, 400, "invalid_request_error", "the store holds 2,000 memories")
        made = self._create(path, content)
        if query.get("view") != "full":
            del made["content"]
        return self.reply(h, 200, made)

    def get_memory(self, h, query, data, rest):
        mid = rest[1]
        if mid not in self.memories:
            return self.error(h, 404, "not_found_error", "no such memory")
        return self.reply(h, 200, self.memory(mid, query.get("view", "full") == "full"))

    def post_memory(self, h, query, data, rest):
        mid = rest[1]
        if mid not in self.memories:
            return self.error(h, 404, "not_found_error", "no such memory")
        pre = data.get("precondition")
        if pre is not None:
            if pre.get("type") != "content_sha256":
                return self.error(h, 400, "invalid_request_error", "unknown precondition")
            if pre.get("content_sha256") != sha(self.memories[mid]["content"]):
                return self.error(h, 409, "invalid_request_error", "precondition failed")
        content, path = data.get("content"), data.get("path")
        if path is not None:
            why = self.path_error(path)
            if why:
                return self.error(h, 400, "invalid_request_error", why)
            if any(m["path"] == path for i, m in self.memories.items() if i != mid):
                return self.error(h, 409, "invalid_request_error", "a memory exists at that path")
        if content is not None and len(content.encode()) > MEMORY_MOST:
            return self.error(h, 413, "request_too_large", "content is over 102,400 bytes")
        self._change(mid, content=content, path=path)
        return self.reply(h, 200, self.memory(mid, query.get("view") == "full"))

    def delete_memory(self, h, query, data, rest):
        mid = rest[1]
        if mid not in self.memories:
            return self.error(h, 404, "not_found_error", "no such memory")
        expect = query.get("expected_content_sha256")
        if expect is not None and expect != sha(self.memories[mid]["content"]):
            return self.error(h, 409, "invalid_request_error", "precondition failed")
        self._version(mid, "deleted")
        del self.memories[mid]
        return self.reply(h, 200, {"type": "memory_deleted", "id": mid})

    def get_versions(self, h, query, data, rest):
        t = time.time()
        listed = [v for v in reversed(self.versions) if v["_listed_at"] <= t]
        if "created_at[gte]" in query:
            listed = [v for v in listed if v["created_at"] >= normal(query["created_at[gte]"])]
        if "memory_id" in query:
            listed = [v for v in listed if v["memory_id"] == query["memory_id"]]
        items = [{k: x for k, x in v.items() if not k.startswith("_")} for v in listed]
        page = self.page_of(items, query, 100)
        if page is None:
            return self.error(h, 400, "invalid_request_error", "bad limit or page")
        return self.reply(h, 200, page)


def normal(text):
    """An RFC 3339 time in UTC as this fake writes them (to compare as text)."""
    t = datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
