"""The memory stores API of `memfs --stores ROOT serve --http`, driven by the
pinned Anthropic SDK's own client (`client.beta.memory_stores`) pointed at it."""
import hashlib
import json
import subprocess

import anthropic
import pytest

from http_server import Server


def sha(text):
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def server(memfs_bin, tmp_path):
    s = Server(memfs_bin, tmp_path / "stores")
    yield s
    assert s.stop() == 0, "".join(s.log)


def client(server, token):
    return anthropic.Anthropic(api_key=token, base_url=server.url, max_retries=0)


@pytest.fixture
def admin(server):
    return client(server, server.token("--admin", "--name", "admin"))


def memfs(server, store, *args, input=None):
    return subprocess.run(
        [server.memfs_bin, "--data", str(server.root / store), *args],
        capture_output=True, text=True, input=input,
    )


def test_stores_create_retrieve_update_list_archive_delete(server, admin):
    ms = admin.beta.memory_stores
    a = ms.create(name="Team notes", description="what the team knows", metadata={"owner": "ana"})
    assert a.id.startswith("memstore_") and a.type == "memory_store"
    assert (a.name, a.description, a.metadata, a.archived_at) == ("Team notes", "what the team knows", {"owner": "ana"}, None)
    assert ms.retrieve(a.id) == a
    b = ms.update(a.id, name="Team", metadata={"owner": None, "team": "core"})
    assert (b.name, b.metadata, b.description) == ("Team", {"team": "core"}, "what the team knows")
    assert b.updated_at >= a.updated_at
    more = [ms.create(name=f"s{i}") for i in range(4)]
    page = ms.list(limit=2)
    assert len(page.data) == 2 and page.has_next_page()
    ids = [s.id for s in ms.list(limit=2)]  # the SDK's auto-pagination follows next_page
    assert sorted(ids) == sorted([a.id] + [s.id for s in more])
    archived = ms.archive(more[0].id)
    assert archived.archived_at is not None
    assert more[0].id not in [s.id for s in ms.list()]
    assert more[0].id in [s.id for s in ms.list(include_archived=True)]
    # Archived is read-only: no new memories, no store update.
    with pytest.raises(anthropic.ConflictError):
        ms.memories.create(more[0].id, path="/a.md", content="x")
    with pytest.raises(anthropic.ConflictError):
        ms.update(more[0].id, name="again")
    gone = ms.delete(more[1].id)
    assert (gone.id, gone.type) == (more[1].id, "memory_store_deleted")
    with pytest.raises(anthropic.NotFoundError):
        ms.retrieve(more[1].id)
    assert not (server.root / more[1].id).exists()
    with pytest.raises(anthropic.BadRequestError):
        ms.create(name="")


def test_memories_by_path_with_preconditions_and_the_other_doors(server, admin):
    ms = admin.beta.memory_stores
    store = ms.create(name="m").id
    mem = ms.memories.create(store, path="/notes/a.md", content="hello\n")
    assert mem.id.startswith("mem_") and mem.content is None  # basic by default on create
    assert (mem.path, mem.content_sha256, mem.content_size_bytes) == ("/notes/a.md", sha("hello\n"), 6)
    full = ms.memories.retrieve(mem.id, memory_store_id=store)
    assert full.content == "hello\n" and full.memory_version_id == mem.memory_version_id
    # The same memory through the tool (attached to the server) and the history.
    seen = memfs(server, store, "exec", '{"command":"view","path":"/memories/notes/a.md"}')
    assert "1\thello" in json.loads(seen.stdout)["content"], seen
    log = memfs(server, store, "log", "--json")
    rows = [json.loads(l) for l in log.stdout.splitlines()]
    request = rows[0]["actor"].pop("request")  # the request's tag: its retry is answered from it
    assert len(request) == 32 and int(request, 16) >= 0, request
    assert rows[0]["actor"] == {"kind": "api", "token": "admin"} and rows[0]["op"] == "create", rows
    with pytest.raises(anthropic.ConflictError) as e:
        ms.memories.create(store, path="/notes/a.md", content="again")
    assert e.value.type == "memory_path_conflict_error"
    # Preconditions.
    with pytest.raises(anthropic.ConflictError) as e:
        ms.memories.update(mem.id, memory_store_id=store, content="lost",
                           precondition={"type": "content_sha256", "content_sha256": sha("other")})
    assert e.value.type == "memory_precondition_failed_error"
    up = ms.memories.update(mem.id, memory_store_id=store, content="hello, world\n",
                            precondition={"type": "content_sha256", "content_sha256": sha("hello\n")})
    assert up.id == mem.id and up.content_sha256 == sha("hello, world\n")
    assert up.memory_version_id != mem.memory_version_id
    # A change through the tool is a version with its actor, and the API sees it at once.
    r = memfs(server, store, "--as", "claude", "exec",
              '{"command":"str_replace","path":"/memories/notes/a.md","old_str":"world","new_str":"team"}')
    assert r.returncode == 0, r
    now = ms.memories.retrieve(mem.id, memory_store_id=store)
    assert now.content == "hello, team\n"
    versions = list(ms.memory_versions.list(store, memory_id=mem.id))
    assert [v.operation for v in versions] == ["modified", "modified", "created"]
    assert versions[0].created_by.type == "session_actor" and versions[0].created_by.session_id == "exec:claude"
    assert versions[1].created_by.type == "api_actor" and versions[1].created_by.api_key_id == "admin"
    assert versions[0].id == now.memory_version_id
    # Rename keeps the id; a path conflict is a 409.
    ms.memories.create(store, path="/b.md", content="b")
    with pytest.raises(anthropic.ConflictError) as e:
        ms.memories.update(mem.id, memory_store_id=store, path="/b.md")
    assert e.value.type == "memory_path_conflict_error"
    moved = ms.memories.update(mem.id, memory_store_id=store, path="/archive/a.md")
    assert (moved.id, moved.path) == (mem.id, "/archive/a.md")
    # The tool renames it back: still the same id.
    r = memfs(server, store, "exec", '{"command":"rename","old_path":"/memories/archive/a.md","new_path":"/memories/a.md"}')
    assert r.returncode == 0, r
    assert ms.memories.retrieve(mem.id, memory_store_id=store).path == "/a.md"
    # Delete with a precondition.
    with pytest.raises(anthropic.ConflictError):
        ms.memories.delete(mem.id, memory_store_id=store, expected_content_sha256=sha("nope"))
    d = ms.memories.delete(mem.id, memory_store_id=store, expected_content_sha256=sha("hello, team\n"))
    assert (d.id, d.type) == (mem.id, "memory_deleted")
    with pytest.raises(anthropic.NotFoundError):
        ms.memories.retrieve(mem.id, memory_store_id=store)
    deleted = list(ms.memory_versions.list(store, memory_id=mem.id, operation="deleted"))
    assert len(deleted) == 1 and deleted[0].content_sha256 is None
    # Bad input is a 400 in the API's error shape.
    for bad in ["no-slash", "/a//b", "/a/../b", "/a\u0007", "/e\u0301", "/x" * 600, "/" + "/".join("s" * 21)]:
        with pytest.raises(anthropic.BadRequestError):
            ms.memories.create(store, path=bad, content="")


def test_listing_prefix_depth_views_and_pagination(server, admin):
    ms = admin.beta.memory_stores
    store = ms.create(name="l").id
    paths = ["/a.md", "/notes/x.md", "/notes/y.md", "/notes/deep/z.md", "/notes-archive/w.md"] + [f"/many/{i:02}.md" for i in range(25)]
    for p in paths:
        ms.memories.create(store, path=p, content=p)
    everything = [m.path for m in ms.memories.list(store, limit=7)]
    assert everything == sorted(paths)
    notes = [m.path for m in ms.memories.list(store, path_prefix="/notes/")]
    assert notes == ["/notes/deep/z.md", "/notes/x.md", "/notes/y.md"]
    top = ms.memories.list(store, path_prefix="/notes/", depth=1)
    assert [(i.type, i.path) for i in top.data] == [("memory_prefix", "/notes/deep/"), ("memory", "/notes/x.md"), ("memory", "/notes/y.md")]
    root = ms.memories.list(store, depth=1, limit=100)
    assert [i.path for i in root.data] == ["/a.md", "/many/", "/notes-archive/", "/notes/"]
    basic = ms.memories.list(store, path_prefix="/many/", limit=100)
    assert len(basic.data) == 25 and all(m.content is None for m in basic.data)
    full = ms.memories.list(store, path_prefix="/many/", limit=100, view="full")
    assert len(full.data) == 20 and full.data[0].content == "/many/00.md" and full.next_page
    newest = ms.memories.list(store, extra_query={"order_by": "updated_at", "order": "desc"}, limit=3)
    assert [m.path for m in newest.data] == ["/many/24.md", "/many/23.md", "/many/22.md"]
    # Editor scratch files and hidden names made through the mount's doors stay out, as in the tool's view.
    (server.root / store / "memories" / ".hidden").write_text("x")
    with pytest.raises(anthropic.BadRequestError):
        ms.memories.list(store, path_prefix="notes")
    with pytest.raises(anthropic.BadRequestError):
        ms.memories.list(store, limit=101)


def test_versions_filters_retrieve_and_redaction(server, admin):
    ms = admin.beta.memory_stores
    store = ms.create(name="v").id
    m = ms.memories.create(store, path="/secret.md", content="password hunter2\n")
    ms.memories.update(m.id, memory_store_id=store, content="nothing here\n")
    versions = list(ms.memory_versions.list(store))
    assert [v.operation for v in versions] == ["modified", "created"]
    old = ms.memory_versions.retrieve(versions[1].id, memory_store_id=store)
    assert old.content == "password hunter2\n" and old.path == "/secret.md" and old.redacted_at is None
    assert [v.id for v in ms.memory_versions.list(store, operation="created")] == [old.id]
    assert [v.id for v in ms.memory_versions.list(store, api_key_id="admin")] == [v.id for v in versions]
    assert list(ms.memory_versions.list(store, api_key_id="someone-else")) == []
    assert len(list(ms.memory_versions.list(store, created_at_gte="2000-01-01T00:00:00Z"))) == 2
    assert list(ms.memory_versions.list(store, created_at_lte="2000-01-01T00:00:00Z")) == []
    # The current content cannot be redacted (a file still holds it).
    with pytest.raises(anthropic.ConflictError):
        ms.memory_versions.redact(versions[0].id, memory_store_id=store)
    red = ms.memory_versions.redact(old.id, memory_store_id=store)
    assert red.redacted_at is not None and red.redacted_by.api_key_id == "admin"
    assert (red.content, red.path, red.content_sha256, red.content_size_bytes) == (None, None, None, None)
    again = ms.memory_versions.retrieve(old.id, memory_store_id=store)
    assert again.redacted_at == red.redacted_at and again.content is None
    # Gone from the journal on disk too.
    journal = b"".join(p.read_bytes() for p in (server.root / store / ".memfs" / "journal").iterdir())
    assert b"hunter2" not in journal
    with pytest.raises(anthropic.NotFoundError):
        ms.memory_versions.retrieve("memver_999999", memory_store_id=store)
    page = ms.memory_versions.list(store, limit=1)
    assert len(page.data) == 1 and page.has_next_page()
    assert [v.id for v in ms.memory_versions.list(store, limit=1)] == [v.id for v in versions]


def test_tokens_isolate_stores_and_read_only_tokens_cannot_write(server, admin):
    ms = admin.beta.memory_stores
    a = ms.create(name="a").id
    b = ms.create(name="b").id
    mb = ms.memories.create(b, path="/b.md", content="b's")
    ta = client(server, server.token("--name", "alice", "--store", a))
    tb = client(server, server.token("--name", "bob", "--store", b, "--read-only"))
    # A token for store A never reads, lists or learns of store B: the same 404 as a missing store.
    with pytest.raises(anthropic.NotFoundError) as seen:
        ta.beta.memory_stores.retrieve(b)
    with pytest.raises(anthropic.NotFoundError) as missing:
        ta.beta.memory_stores.retrieve("memstore_doesnotexist")
    assert seen.value.body["error"]["message"].replace(b, "X") == missing.value.body["error"]["message"].replace("memstore_doesnotexist", "X")
    with pytest.raises(anthropic.NotFoundError):
        ta.beta.memory_stores.memories.retrieve(mb.id, memory_store_id=b)
    with pytest.raises(anthropic.NotFoundError):
        list(ta.beta.memory_stores.memories.list(b))
    assert [s.id for s in ta.beta.memory_stores.list()] == [a]
    made = ta.beta.memory_stores.memories.create(a, path="/x.md", content="alice's")
    assert made.path == "/x.md"
    # Managing stores needs an admin token.
    with pytest.raises(anthropic.PermissionDeniedError):
        ta.beta.memory_stores.create(name="mine")
    with pytest.raises(anthropic.PermissionDeniedError):
        ta.beta.memory_stores.delete(a)
    # Read-only reads and cannot write.
    assert tb.beta.memory_stores.memories.retrieve(mb.id, memory_store_id=b).content == "b's"
    with pytest.raises(anthropic.PermissionDeniedError):
        tb.beta.memory_stores.memories.create(b, path="/y.md", content="no")
    with pytest.raises(anthropic.PermissionDeniedError):
        tb.beta.memory_stores.memories.delete(mb.id, memory_store_id=b)
    # No token, a wrong one, a revoked one: 401.
    for bad in [client(server, "memfs_" + "0" * 64)]:
        with pytest.raises(anthropic.AuthenticationError):
            bad.beta.memory_stores.list()
    subprocess.run([server.memfs_bin, "--stores", str(server.root), "token", "revoke", "alice"], check=True)
    with pytest.raises(anthropic.AuthenticationError):
        ta.beta.memory_stores.list()
    listed = subprocess.run([server.memfs_bin, "--stores", str(server.root), "token", "list", "--json"],
                            capture_output=True, text=True, check=True).stdout
    names = [json.loads(l)["name"] for l in listed.splitlines()]
    assert names == ["admin", "bob"] and "sha256" not in listed and "memfs_" not in listed
    # Tokens are kept hashed.
    assert "memfs_" not in (server.root / ".memfs" / "tokens.json").read_text()


@pytest.fixture
def unlimited(memfs_bin, tmp_path):
    """A server whose tokens may send as fast as six threads can."""
    s = Server(memfs_bin, tmp_path / "stores", "--http-rate", "100000", "--http-burst", "100000")
    yield s
    assert s.stop() == 0, "".join(s.log)


def test_a_memorys_id_hash_and_content_come_from_one_version_under_concurrent_writes(unlimited):
    """Three writers and three readers on one memory: every answer's
    memory_version_id names a version whose stored content is the content
    the answer carries, and its content_sha256 is that content's (issue 39:
    the id and the bytes were read at different moments; 43 of 470
    retrieves mixed two versions)."""
    import threading
    import time

    admin = client(unlimited, unlimited.token("--admin", "--name", "admin"))
    ms = admin.beta.memory_stores
    store = ms.create(name="race").id
    mem = ms.memories.create(store, path="/hot.md", content="start")
    stop = threading.Event()
    mixed, checked, errors = [], [0], []

    def writer(k):
        i = 0
        try:
            while not stop.is_set():
                i += 1
                ms.memories.update(mem.id, memory_store_id=store, content=f"writer {k} wrote {i}\n")
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    def reader():
        try:
            while not stop.is_set():
                got = ms.memories.retrieve(mem.id, memory_store_id=store)
                version = ms.memory_versions.retrieve(got.memory_version_id, memory_store_id=store)
                checked[0] += 1
                if version.content != got.content or sha(got.content) != got.content_sha256:
                    mixed.append((got.memory_version_id, got.content, version.content))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(3)]
    threads += [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(4)
    stop.set()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors[:3]
    assert checked[0] >= 30, f"only {checked[0]} retrieves"
    assert not mixed, f"{len(mixed)} of {checked[0]} answers mixed two versions: {mixed[:3]}"


def test_a_memorys_id_outlives_the_compaction_that_drops_its_first_versions(memfs_bin, tmp_path):
    """With a small --history-keep, a memory updated until the compaction
    has dropped the version that created it keeps its id while the server
    has the store open (the 10-minute soak through every door found the id
    changed to the oldest kept version: a 404 for the id a client held)."""
    s = Server(memfs_bin, tmp_path / "stores", "--history-keep", "64K")
    try:
        admin = client(s, s.token("--admin", "--name", "admin"))
        ms = admin.beta.memory_stores
        store = ms.create(name="kept").id
        mem = ms.memories.create(store, path="/churn.md", content="v0\n")
        other = ms.memories.create(store, path="/still.md", content="never written again\n")
        first = mem.memory_version_id
        for i in range(1, 200):
            ms.memories.update(mem.id, memory_store_id=store, content=f"v{i}\n" + "x" * 2000)
        # The creating version is gone from the history: compacted.
        versions = [v.id for v in ms.memory_versions.list(store, memory_id=mem.id)]
        assert first not in versions, "never compacted: raise the updates"
        got = ms.memories.retrieve(mem.id, memory_store_id=store)
        assert got.content.startswith("v199\n")
        assert ms.memories.retrieve(other.id, memory_store_id=store).content == "never written again\n"
        listed = {m.path: m.id for m in ms.memories.list(store)}
        assert listed == {"/churn.md": mem.id, "/still.md": other.id}, listed
        ms.memories.update(mem.id, memory_store_id=store, content="after\n")
        ms.memories.delete(mem.id, memory_store_id=store)
    finally:
        assert s.stop() == 0, "".join(s.log)


def test_a_final_answer_is_not_retried_by_the_sdks_client(server, admin):
    """A 409 (a precondition, a path taken), a 404, a 400, a 405: the server says
    `x-should-retry: false`, so the SDK's client, with its default two
    retries, sends each request once (it sent three before, with back-off)."""
    import httpx2 as httpx

    sent = []
    http = httpx.Client(event_hooks={"request": [lambda r: sent.append((r.method, r.url.path))]})
    token = server.token("--admin", "--name", "retries")
    sdk = anthropic.Anthropic(api_key=token, base_url=server.url, http_client=http)  # default max_retries
    ms = sdk.beta.memory_stores
    store = ms.create(name="final").id
    ms.memories.create(store, path="/a.md", content="one\n")
    for call, error in [
        (lambda: ms.memories.create(store, path="/a.md", content="again\n"), anthropic.ConflictError),
        (lambda: ms.memories.retrieve("mem_999999", memory_store_id=store), anthropic.NotFoundError),
        (lambda: ms.memories.create(store, path="no-slash", content="x"), anthropic.BadRequestError),
        (lambda: sdk.get(f"/v1/memory_stores/{store}/archive", cast_to=object), anthropic.APIStatusError),
    ]:
        sent.clear()
        with pytest.raises(error) as raised:
            call()
        assert raised.value.response.headers.get("x-should-retry") == "false"
        assert len(sent) == 1, sent


def test_a_postgres_stores_root_it_cannot_reach_is_a_clear_error_not_a_directory(memfs_bin, tmp_path):
    """--stores postgres://... is a database (it used to serve an empty root
    from a local directory named `postgres:`): one that cannot be reached
    is said so, exit 2, with no password or local path in the message."""
    for args in (["serve", "--http", "127.0.0.1:0"], ["token", "create", "--admin"]):
        run = subprocess.run([memfs_bin, "--stores", "postgres://u:secret@127.0.0.1:1/db", *args], cwd=tmp_path,
                             capture_output=True, text=True, timeout=60)
        assert run.returncode == 2, run
        assert "cannot open the stores root in postgres://u@127.0.0.1:1/db" in run.stderr, run.stderr
        assert "connection refused" in run.stderr and "secret" not in run.stderr, run.stderr
        assert not (tmp_path / "postgres:").exists()


def test_listing_ten_thousand_stores_pages_each_once_and_a_token_sees_its_own(memfs_bin, tmp_path):
    """A listing walks the stores newest first from its cursor, not a copy of
    every record: as admin, every one of 10,000 stores comes back exactly
    once, in order, archived ones only when asked; a token that reaches two
    sees its two (its cost is what it returns: BENCHMARKS-HTTP.md)."""
    root = tmp_path / "stores"
    records = root / ".memfs" / "stores"
    records.mkdir(parents=True)
    made = []
    for i in range(10_000):
        sid = "memstore_%026x" % (i * 7919 + 1)
        created = "2026-12-%02dT%02d:%02d:%02d.%03dZ" % (1 + i % 3, i % 24, i % 60, (i // 60) % 60, i % 1000)
        archived = created if i % 10 == 0 else None
        (records / f"{sid}.json").write_text(json.dumps({
            "id": sid, "name": f"s{i}", "created_at": created, "updated_at": created, "archived_at": archived}))
        (root / sid / "memories").mkdir(parents=True)
        made.append((created, sid, archived))
    s = Server(memfs_bin, root)
    try:
        admin = client(s, s.token("--admin"))
        seen = [m.id for m in admin.beta.memory_stores.list(limit=100)]  # the SDK follows next_page
        live = sorted((c, sid) for c, sid, a in made if a is None)
        assert seen == [sid for _, sid in reversed(live)]
        everything = [m.id for m in admin.beta.memory_stores.list(limit=100, include_archived=True)]
        assert len(everything) == 10_000 and len(set(everything)) == 10_000
        two = [made[5][1], made[4242][1]]
        mine = client(s, s.token("--store", two[0], "--store", two[1]))
        page = mine.beta.memory_stores.list(limit=1)
        assert len(page.data) == 1 and page.next_page
        assert sorted(m.id for m in mine.beta.memory_stores.list(limit=1)) == sorted(two)
    finally:
        assert s.stop() == 0, "".join(s.log)


def test_a_retry_after_a_lost_answer_is_applied_once_and_answered_as_the_first(server, admin):
    """The network loses the answer to a write the server made; the SDK's
    client (its default two retries) sends the same request again. The
    retry is answered as the first attempt was (a create with that memory,
    not a 409; an update with a precondition with the memory, not a 409; a
    delete as deleted, not a 404), and nothing is applied twice. Two first
    attempts stay two requests: the second create of a path is a 409."""
    from lossy_proxy import LossyProxy

    proxy = LossyProxy(server.url)
    token = server.token("--name", "retrying", "--admin")
    sdk = anthropic.Anthropic(api_key=token, base_url=proxy.url)  # default max_retries
    ms = sdk.beta.memory_stores
    lose = {"x-lose-answer": "1"}
    store = ms.create(name="retries").id

    m = ms.memories.create(store, path="/a.md", content="one\n", extra_headers=lose)
    assert m.path == "/a.md" and m.content_sha256 == sha("one\n")
    assert [x.id for x in ms.memories.list(store)] == [m.id]
    assert len(ms.memory_versions.list(store, memory_id=m.id).data) == 1

    u = ms.memories.update(m.id, memory_store_id=store, content="two\n",
                           precondition={"type": "content_sha256", "content_sha256": sha("one\n")},
                           extra_headers=lose)
    assert u.id == m.id and u.content_sha256 == sha("two\n")
    assert len(ms.memory_versions.list(store, memory_id=m.id).data) == 2

    d = ms.memories.delete(m.id, memory_store_id=store, extra_headers=lose)
    assert d.id == m.id
    assert ms.memories.list(store).data == []
    # A store's create too: one store, not two.
    lost = ms.create(name="lost-answer", extra_headers=lose)
    assert [s.id for s in ms.list() if s.name == "lost-answer"] == [lost.id]
    assert len(proxy.lost) == 4, proxy.lost

    # Two first attempts are two requests: the second is refused.
    ms.memories.create(store, path="/b.md", content="x\n")
    with pytest.raises(anthropic.ConflictError):
        ms.memories.create(store, path="/b.md", content="x\n")
    # An Idempotency-Key names one request across attempts the client makes itself.
    key = {"Idempotency-Key": "order-42"}
    first = ms.memories.create(store, path="/c.md", content="c\n", extra_headers=key)
    again = ms.memories.create(store, path="/c.md", content="c\n", extra_headers=key)
    assert again.id == first.id
    assert len(ms.memory_versions.list(store, memory_id=first.id).data) == 1
    proxy.close()


def test_the_edge_names_the_field_a_body_gets_wrong_and_the_table_answers_paths_and_methods(server, admin):
    """Bodies are read into the API's request types at the edge: a field of
    the wrong type is refused with a 400 naming it, before anything is made;
    a path no route has is a 404, a method its routes lack a 405 naming
    theirs (one route table answers both)."""
    ms = admin.beta.memory_stores
    store = ms.create(name="edge")
    bad = [
        ("memory_stores", {"name": 5}, "`name`"),
        ("memory_stores", {"name": "x", "metadata": {"k": 1}}, "`metadata.k`"),
        (f"memory_stores/{store.id}/memories", {"path": "/a.md", "content": ["x"]}, "`content`"),
        (f"memory_stores/{store.id}/memories", {"path": "/a.md"}, "`content` is required"),
    ]
    for path, body, named in bad:
        with pytest.raises(anthropic.BadRequestError) as seen:
            admin.post(f"/v1/{path}", body=body, cast_to=object)
        assert named in seen.value.body["error"]["message"], seen.value.body
    made = ms.memories.create(store.id, path="/b.md", content="b")
    with pytest.raises(anthropic.BadRequestError) as seen:
        admin.post(f"/v1/memory_stores/{store.id}/memories/{made.id}", cast_to=object,
                   body={"content": "c", "precondition": {"type": "etag", "value": "1"}})
    assert "`precondition.type`: unknown variant `etag`" in seen.value.body["error"]["message"]
    assert ms.memories.retrieve(made.id, memory_store_id=store.id).content == "b"
    assert [m.path for m in ms.memories.list(store.id)] == ["/b.md"]
    with pytest.raises(anthropic.NotFoundError) as seen:
        admin.get(f"/v1/memory_stores/{store.id}/nothing", cast_to=object)
    assert seen.value.body["error"]["message"] == "no such API path"
    for path, allowed in [
        (f"memory_stores/{store.id}", "GET, POST or DELETE"),
        (f"memory_stores/{store.id}/archive", "POST"),
        (f"memory_stores/{store.id}/memories", "GET or POST"),
    ]:
        with pytest.raises(anthropic.APIStatusError) as seen:
            admin.put(f"/v1/{path}", body={}, cast_to=object)
        assert seen.value.status_code == 405
        assert seen.value.body["error"]["message"] == f"this path takes {allowed}"


def test_versions_wait_answers_as_soon_as_a_version_is_made_and_is_offered_in_a_header(server, admin):
    """memfs's extension of the versions listing: `after=ID` lists only
    newer versions, `wait=S` holds an empty answer until one is made (or S
    seconds); every answer offers it in `memfs-extensions`."""
    import threading
    import time
    import urllib.request
    store = admin.beta.memory_stores.create(name="polled").id
    first = admin.beta.memory_stores.memories.create(store, path="/a.md", content="one\n")
    newest = admin.beta.memory_stores.memory_versions.list(store, limit=1).data[0].id
    key = server.token("--name", "poller", "--store", store, "--read-only")

    def get(query):
        req = urllib.request.Request(f"{server.url}/v1/memory_stores/{store}/memory_versions?{query}",
                                     headers={"x-api-key": key})
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.headers.get("memfs-extensions"), json.loads(r.read())

    offered, page = get("limit=1")
    assert offered == "versions-wait"
    # Nothing newer, no wait: an empty page at once.
    assert get(f"after={newest}")[1]["data"] == []
    # A change made while a poll waits ends the wait with that version.
    threading.Timer(0.5, lambda: admin.beta.memory_stores.memories.update(
        first.id, memory_store_id=store, content="two\n")).start()
    t = time.monotonic()
    _, page = get(f"after={newest}&wait=20")
    assert page["data"] and page["data"][0]["memory_id"] == first.id, page
    assert time.monotonic() - t < 20, "answered by the change, not by the end of the wait"
    # Bounded and checked.
    with pytest.raises(urllib.error.HTTPError) as e:
        get("wait=31")
    assert e.value.code == 400
    with pytest.raises(urllib.error.HTTPError) as e:
        get("after=nonsense")
    assert e.value.code == 400
    # A wait with nothing made ends empty, after the wait.
    newest = page["data"][0]["id"]
    t = time.monotonic()
    assert get(f"after={newest}&wait=1")[1]["data"] == []
    assert time.monotonic() - t >= 0.9
