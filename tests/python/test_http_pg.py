"""Many `memfs --stores postgres://... serve --http` servers on one real
PostgreSQL 15: one set of stores and tokens, every server serving every
store, and a host's own `--data postgres://...?store=ID` seeing the same
memory. The callers are the pinned SDK's own client and the memfs CLI."""
import os
import re
import subprocess

import anthropic
import pytest

from http_server import Server
from test_shared import pg  # noqa: F401 (the throwaway PostgreSQL 15 fixture)


@pytest.fixture
def two(pg, memfs_bin, tmp_path):
    servers = [Server(memfs_bin, pg.base, "--cache", str(tmp_path / name)) for name in ("a", "b")]
    yield servers
    for s in servers:
        assert s.stop() == 0, "".join(s.log)


def sdk(server, token):
    return anthropic.Anthropic(api_key=token, base_url=server.url, max_retries=0)


def test_two_servers_serve_one_databases_stores_and_tokens(two, pg, memfs_bin, tmp_path):
    a, b = two
    token = a.token("--admin", "--name", "app")  # made once, through the CLI
    on_a, on_b = sdk(a, token), sdk(b, token)
    store = on_a.beta.memory_stores.create(name="shared", description="one memory").id
    assert on_b.beta.memory_stores.retrieve(store).name == "shared", "made on a, served by b"
    assert [s.id for s in on_b.beta.memory_stores.list()] == [store]
    # A write one server acknowledged is seen on the next read from the other.
    stale = 0
    m = on_a.beta.memory_stores.memories.create(store, path="/n.md", content="0\n")
    for i in range(1, 101):
        writer, reader = (on_a, on_b) if i % 2 else (on_b, on_a)
        writer.beta.memory_stores.memories.update(m.id, memory_store_id=store, content=f"{i}\n")
        got = reader.beta.memory_stores.memories.retrieve(m.id, memory_store_id=store)
        stale += got.content != f"{i}\n"
    assert stale == 0, f"{stale} of 100 reads on the other server were stale"
    assert len(list(on_a.beta.memory_stores.memory_versions.list(store, memory_id=m.id, limit=100))) == 101
    # A host's own copy of the same store, through the CLI.
    url = f"{pg.base}?store={store}"
    seen = subprocess.run([memfs_bin, "--data", url, "--cache", str(tmp_path / "host"), "exec",
                           '{"command":"view","path":"/memories/n.md"}'], capture_output=True, text=True)
    assert "100" in seen.stdout, seen
    made = subprocess.run([memfs_bin, "--data", url, "--cache", str(tmp_path / "host"), "exec",
                           '{"command":"create","path":"/memories/from-host.md","file_text":"hi\\n"}'],
                          capture_output=True, text=True)
    assert made.returncode == 0, made
    paths = sorted(x.path for x in on_b.beta.memory_stores.memories.list(store))
    assert paths == ["/from-host.md", "/n.md"]
    # A token revoked through the CLI is refused by both from their next request.
    subprocess.run([memfs_bin, "--stores", pg.base, "token", "revoke", "app"], check=True)
    for server in (a, b):
        with pytest.raises(anthropic.AuthenticationError):
            sdk(server, token).beta.memory_stores.list()


def test_a_store_deleted_on_one_server_is_gone_on_the_other(two):
    a, b = two
    token = a.token("--admin")
    on_a, on_b = sdk(a, token), sdk(b, token)
    store = on_a.beta.memory_stores.create(name="brief").id
    on_b.beta.memory_stores.memories.create(store, path="/x.md", content="x\n")
    on_a.beta.memory_stores.delete(store)
    with pytest.raises(anthropic.NotFoundError):
        on_b.beta.memory_stores.memories.list(store).data
    # (b may hold the store open until it reads the catalog: a moment.)
    assert on_b.beta.memory_stores.list().data == []


def test_a_stores_root_url_naming_a_store_is_refused_clearly(memfs_bin, pg):
    r = subprocess.run([memfs_bin, "--stores", pg.url("x"), "token", "list"], capture_output=True, text=True)
    assert r.returncode == 2 and "drop ?store=" in r.stderr, r


def test_a_retry_through_the_other_server_is_answered_as_the_first(two):
    """A write acknowledged by one server whose answer was lost, sent again
    with the same Idempotency-Key through the other server: answered with
    the same memory (the request's tag travels with the version)."""
    a, b = two
    token = a.token("--admin")
    store = sdk(a, token).beta.memory_stores.create(name="retry").id
    key = {"Idempotency-Key": "order-7"}
    first = sdk(a, token).beta.memory_stores.memories.create(store, path="/o.md", content="o\n", extra_headers=key)
    again = sdk(b, token).beta.memory_stores.memories.create(store, path="/o.md", content="o\n", extra_headers=key)
    assert again.id == first.id
    assert len(list(sdk(b, token).beta.memory_stores.memory_versions.list(store, memory_id=first.id))) == 1


def test_fault_trials_quick(memfs_bin, pg):
    """scripts/http_faults.py, bounded: one trial of each fault (kill -9 a
    server, PostgreSQL crashed and started, every connection cut, one
    server cut off from the network in a namespace) while writers retry
    through the other server; 0 lost, 0 applied twice, both servers
    answering again. The long run is --trials 200."""
    import sys
    script = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "http_faults.py")
    faults = ["kill", "database", "cut", "netcut"]
    if os.geteuid() != 0:  # a network namespace needs root
        if os.environ.get("CI") == "true":
            pytest.fail("the netcut fault must run under CI=true, but it needs root")
        faults.remove("netcut")
    run = subprocess.run([sys.executable, script, memfs_bin, "--trials", str(len(faults)),
                          "--seconds", "3", "--cut-seconds", "3-6", "--faults", ",".join(faults)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    for fault in faults:
        assert f"| {fault} | 1 |" in run.stdout, run.stdout


def test_every_door_on_two_servers_is_one_memory(two, pg):
    """The memory tool over remote MCP (the official `mcp` client) on one
    server, the page (a real headless browser) and the SDK on the other:
    what the agent writes through a is on b's page and in b's API."""
    import anyio
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client
    from test_web import CHROMIUM, need, sync_api

    a, b = two
    admin = sdk(a, a.token("--admin"))
    store = admin.beta.memory_stores.create(name="doors").id
    agent = a.token("--name", "agent", "--store", store)

    async def write():
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {agent}"})
        async with Client(streamable_http_client(a.url + "/mcp", http_client=http)) as c:
            r = await c.call_tool("memory", {"command": "create", "path": "/memories/from-mcp.md",
                                             "file_text": "the agent's note\n"})
            assert not r.is_error, r

    anyio.run(write)
    on_b = sdk(b, agent)
    [m] = [x for x in on_b.beta.memory_stores.memories.list(store)]
    assert m.path == "/from-mcp.md"
    assert on_b.beta.memory_stores.memories.retrieve(m.id, memory_store_id=store).content == "the agent's note\n"
    need(os.path.exists(CHROMIUM), "Debian's chromium")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_page()
        page.goto(b.url + "/web/")
        page.fill("input[name=token]", agent)
        page.click("button[type=submit]")
        assert page.url == f"{b.url}/web/{store}/"
        assert "from-mcp.md" in page.inner_text("main")
        browser.close()


def test_open_stores_in_postgresql_share_threads_and_connections(two, pg):
    """A store in PostgreSQL once cost a thread and two connections of its
    own (its follower's and its writer's): 10,000 open stores would have
    needed 20,000 connections. Now 200 stores open on one server cost a
    fixed few of each, and every one of them still follows what another
    server writes to it, on its next read."""
    import concurrent.futures
    from test_http_doors import proc_status
    a, b = two
    token = a.token("--admin")
    on_a, on_b = sdk(a, token), sdk(b, token)
    ids = [on_a.beta.memory_stores.create(name=f"s{i}").id for i in range(200)]

    def write(client, sid, text):
        m = client.beta.memory_stores.memories.list(sid).data
        if m:
            client.beta.memory_stores.memories.update(m[0].id, memory_store_id=sid, content=text)
        else:
            client.beta.memory_stores.memories.create(sid, path="/a.md", content=text)

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        list(ex.map(lambda sid: write(on_a, sid, "a\n"), ids))  # all 200 open on a
        list(ex.map(lambda sid: write(on_b, sid, "b\n"), ids))  # changed through b
    threads, _ = proc_status(a.proc.pid)
    assert threads <= 64, f"{threads} threads on a with 200 stores in PostgreSQL open"
    # Each server's connections (application_name memfs...): a handful.
    by_server = pg.sql(
        "SELECT client_port, count(*) FROM pg_stat_activity "
        "WHERE application_name LIKE 'memfs%' GROUP BY client_addr, client_port")
    total = int(pg.sql("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'memfs%'")[0][0])
    assert total <= 2 * 20, f"{total} connections for two servers with 200 stores open ({by_server})"
    # a follows every store b changed: its next read of each shows b's write.
    # (A read that finds a still catching up is a 503 that says to try
    # again, which the SDK's client does when let.)
    reader = on_a.with_options(max_retries=2)
    stale = [sid for sid in ids
             if reader.beta.memory_stores.memories.list(sid, view="full").data[0].content != "b\n"]
    assert stale == [], f"{len(stale)} of 200 stores on a did not follow b's write"


def test_an_mcp_session_is_served_by_whichever_server_a_request_reaches(two):
    """Behind a load balancer that keeps no client on one server (each
    request to the next server in turn), the official `mcp` client's session
    works: its id is signed with the catalog's key, so the other server
    takes it up. A session ended through one server is refused by both."""
    import anyio
    import httpx2 as httpx  # (the pinned SDK's HTTP client)
    from lossy_proxy import LossyProxy
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    a, b = two
    admin = sdk(a, a.token("--admin"))
    store = admin.beta.memory_stores.create(name="balanced").id
    agent = a.token("--name", "agent", "--store", store)
    balancer = LossyProxy(a.url, b.url)
    seen = {}

    async def session():
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {agent}"})
        async with Client(streamable_http_client(balancer.url + "/mcp", http_client=http)) as c:
            for i in range(6):
                r = await c.call_tool("memory", {"command": "create", "path": f"/memories/n{i}.md",
                                                 "file_text": f"{i}\n"})
                assert not r.is_error, r
            r = await c.call_tool("memory", {"command": "view", "path": "/memories"})
            seen["view"] = r.content[0].text

    anyio.run(session)
    assert all(n > 2 for n in balancer.sent), f"both servers served the session: {balancer.sent}"
    assert all(f"n{i}.md" in seen["view"] for i in range(6)), seen["view"]
    # A session made on a, ended through b: refused by both.
    headers = {"Authorization": f"Bearer {agent}", "Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "probe", "version": "1"}}}
    r = httpx.post(a.url + "/mcp", json=init, headers=headers)
    sid = r.headers["mcp-session-id"]
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    assert httpx.post(b.url + "/mcp", json=call, headers={**headers, "Mcp-Session-Id": sid}).status_code == 200
    assert httpx.delete(b.url + "/mcp", headers={**headers, "Mcp-Session-Id": sid}).status_code == 200
    for server in (a, b):
        r = httpx.post(server.url + "/mcp", json=call, headers={**headers, "Mcp-Session-Id": sid})
        assert r.status_code == 404, (server.url, r.status_code, r.text)
    # An id another token's, or one not signed with the key, is no session.
    other = a.token("--name", "other", "--store", store)
    r = httpx.post(b.url + "/mcp", json=call,
                   headers={**headers, "Authorization": f"Bearer {other}", "Mcp-Session-Id": sid})
    assert r.status_code == 404
    forged = sid.rsplit(".", 1)[0] + "." + "0" * 64
    r = httpx.post(b.url + "/mcp", json=call, headers={**headers, "Mcp-Session-Id": forged})
    assert r.status_code == 404
    balancer.close()


def second_server(memfs_bin, root, *extra, cwd=None):
    """A second `serve --http` on `root`: what it says, and its exit code."""
    return subprocess.run([memfs_bin, "--stores", str(root), "serve", "--http", "127.0.0.1:0", *extra],
                          cwd=cwd, capture_output=True, text=True, timeout=30)


def test_a_second_server_on_a_held_cache_stops_at_start_saying_how(pg, memfs_bin, tmp_path):
    """Two servers of one database started in one working directory share
    the default cache dir: the second stops at once (exit 2), naming the
    dir, the first server's pid and --cache; the first serves on. With a
    cache of its own, the second serves too."""
    first = Server(memfs_bin, pg.base, cwd=tmp_path)
    try:
        r = second_server(memfs_bin, pg.base, cwd=tmp_path)
        assert r.returncode == 2, r
        assert "memory-shared" in r.stderr and f"(pid {first.proc.pid})" in r.stderr, r.stderr
        # (No status 503 in it; a pid such as 15037 holds those digits.)
        assert "--cache DIR" in r.stderr and not re.search(r"\b503\b", r.stderr), r.stderr
        token = first.token("--admin", "--name", "app")
        client = sdk(first, token)
        store = client.beta.memory_stores.create(name="still served")
        assert client.beta.memory_stores.retrieve(store.id).name == "still served"
        other = Server(memfs_bin, pg.base, "--cache", str(tmp_path / "b"), cwd=tmp_path)
        try:
            assert sdk(other, token).beta.memory_stores.retrieve(store.id).name == "still served"
        finally:
            assert other.stop() == 0, "".join(other.log)
    finally:
        assert first.stop() == 0, "".join(first.log)


def test_a_second_server_on_one_stores_root_stops_at_start(memfs_bin, tmp_path):
    """The same for a directory root: the second server stops at start,
    naming the root and the first's pid; once the first has stopped, a
    new one serves the root."""
    root = tmp_path / "root"
    first = Server(memfs_bin, root)
    try:
        r = second_server(memfs_bin, root)
        assert r.returncode == 2, r
        assert str(root) in r.stderr and f"(pid {first.proc.pid})" in r.stderr, r.stderr
    finally:
        assert first.stop() == 0, "".join(first.log)
    again = Server(memfs_bin, root)
    assert again.stop() == 0, "".join(again.log)


def healthz(server):
    """GET /healthz without a token: (status, answer)."""
    import json
    import urllib.error
    import urllib.request
    try:
        with urllib.request.urlopen(server.url + "/healthz", timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_healthz_says_whether_the_server_can_serve(pg, memfs_bin, tmp_path):
    """A load balancer's check, no token: 200 while the database answers;
    503 with the reason (no host, no path) while it is down; 200 again once
    it is back. A directory root's server answers 200."""
    import time
    server = Server(memfs_bin, pg.base, "--cache", str(tmp_path / "cache"))
    try:
        assert healthz(server) == (200, {"status": "ok", "stores": 0, "stores_open": 0})
        pg.crash()
        status, said = healthz(server)
        assert status == 503 and said == {"status": "unavailable", "reason": "the database does not answer"}, said
        pg.start()
        deadline = time.monotonic() + 30
        while healthz(server)[0] != 200:
            assert time.monotonic() < deadline, "healthz did not answer 200 once the database was back"
            time.sleep(0.2)
    finally:
        assert server.stop() == 0, "".join(server.log)
    on_dir = Server(memfs_bin, tmp_path / "root")
    try:
        assert healthz(on_dir) == (200, {"status": "ok", "stores": 0, "stores_open": 0})
    finally:
        assert on_dir.stop() == 0, "".join(on_dir.log)

