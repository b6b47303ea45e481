"""Hostile clients of `serve --http` (issue 52): a request whose head
already decides it is answered before a byte of its body is read (a write
by a read-only token, a store the token cannot reach); one token holding
requests open with bodies sent a byte at a time holds at most its share of
the server's slots (--http-max-per-token), so another tenant's reads go on;
a search made to be slow is cut at its deadline through the API and MCP,
and never holds up a cheap search of the same store."""
import json
import socket
import statistics
import threading
import time

import anthropic
import anyio
import urllib.parse
import urllib.request
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from http_server import Server


def get(url, params, token, timeout):
    """A GET with the token, its JSON answer."""
    request = urllib.request.Request(f"{url}?{urllib.parse.urlencode(params)}", headers={"x-api-key": token})
    with urllib.request.urlopen(request, timeout=timeout) as r:
        return json.loads(r.read())


def sdk(server, token):
    return anthropic.Anthropic(api_key=token, base_url=server.url, max_retries=0)


def host_port(server):
    host, port = server.url.removeprefix("http://").split(":")
    return host, int(port)


def open_request(server, token, path, length):
    """A POST whose head is sent whole and whose body is not sent at all."""
    s = socket.create_connection(host_port(server), timeout=20)
    s.sendall(
        f"POST {path} HTTP/1.1\r\nhost: x\r\nx-api-key: {token}\r\n"
        f"content-type: application/json\r\ncontent-length: {length}\r\n\r\n".encode()
    )
    return s


def status_of(s, wait):
    """The status of the answer `s` gets within `wait` seconds (None: none
    yet; the body was never sent, so any answer was decided from the head)."""
    s.settimeout(wait)
    try:
        got = s.recv(4096)
    except socket.timeout:
        return None
    if not got:
        return 0
    return int(got.split(b" ", 2)[1]), got


def answered_within(sockets, wait):
    """What each socket that is answered within `wait` seconds gets (by index)."""
    import selectors
    sel = selectors.DefaultSelector()
    for i, s in enumerate(sockets):
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, i)
    got = {}
    deadline = time.monotonic() + wait
    while len(got) < len(sockets) and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=max(0.0, deadline - time.monotonic())):
            got[key.data] = key.fileobj.recv(4096)
            sel.unregister(key.fileobj)
    sel.close()
    return got


def test_the_head_decides_a_write_by_a_read_only_token_and_a_store_out_of_reach(memfs_bin, tmp_path):
    server = Server(memfs_bin, tmp_path / "stores")
    try:
        admin = sdk(server, server.token("--admin", "--name", "admin"))
        a = admin.beta.memory_stores.create(name="a").id
        b = admin.beta.memory_stores.create(name="b").id
        reader = server.token("--name", "reader", "--store", a, "--read-only")
        cases = [
            (f"/v1/memory_stores/{a}/memories", 403, b"read-only"),
            (f"/v1/memory_stores/{b}/memories", 404, b"no memory store"),
            ("/v1/memory_stores", 403, b"admin"),
            (f"/v1/memory_stores/{a}/archive", 403, b"admin"),
            (f"/mcp?store={b}", 404, b"no memory store"),
        ]
        for path, want, says in cases:
            s = open_request(server, reader, path, 100_000)
            got = status_of(s, 15)
            s.close()
            assert got is not None, f"{path}: no answer until the body came"
            assert got[0] == want and says in got[1], (path, got)
    finally:
        assert server.stop() == 0, "".join(server.log)


def test_one_token_holding_slow_bodies_holds_only_its_share_and_another_tenant_reads_on(memfs_bin, tmp_path):
    server = Server(memfs_bin, tmp_path / "stores", "--http-timeout", "60", "--http-max-per-token", "32")
    held = []
    try:
        admin = sdk(server, server.token("--admin", "--name", "admin"))
        a = admin.beta.memory_stores.create(name="a").id
        b = admin.beta.memory_stores.create(name="b").id
        admin.beta.memory_stores.memories.create(b, path="/x.md", content="x\n")
        flooder = server.token("--name", "flooder", "--store", a)
        other = sdk(server, server.token("--name", "other", "--store", b))
        # 300 writes whose bodies never come: 32 are taken in (waiting for
        # their bodies), every other one is refused from its head at once.
        for _ in range(300):
            held.append(open_request(server, flooder, f"/v1/memory_stores/{a}/memories", 100_000))
        answers = answered_within(held, 10)
        for got in answers.values():
            assert got.startswith(b"HTTP/1.1 429") and b"in flight" in got, got
        assert (len(held) - len(answers), len(answers)) == (32, 268)
        # Meanwhile the other tenant's reads are answered.
        took = []
        for _ in range(50):
            t = time.monotonic()
            assert other.beta.memory_stores.memories.list(b).data[0].path == "/x.md"
            took.append(time.monotonic() - t)
        took.sort()
        print(f"another tenant's GET during the flood: p50 {statistics.median(took) * 1000:.1f} ms, "
              f"p99 {took[int(len(took) * 0.99) - 1] * 1000:.1f} ms (50 calls; 300 slow bodies open)")
        # The flooder's slots come back when its requests end.
        for s in held:
            s.close()
        held.clear()
        flood = sdk(server, flooder)
        deadline = time.monotonic() + 30
        while True:
            try:
                flood.beta.memory_stores.memories.create(a, path="/after.md", content="after\n")
                break
            except anthropic.RateLimitError:
                assert time.monotonic() < deadline, "the token's slots never came back"
                time.sleep(0.2)
    finally:
        for s in held:
            s.close()
        assert server.stop() == 0, "".join(server.log)


PHRASE = '"' + " ".join(["a"] * 8) + '"'


def slow_store(server, files):
    admin = sdk(server, server.token("--admin", "--name", "admin"))
    a = admin.beta.memory_stores.create(name="a").id
    line = "a " * 500_000
    for i in range(files):
        admin.beta.memory_stores.memories.create(a, path=f"/f{i}.md", content=line)
    admin.beta.memory_stores.memories.create(a, path="/cheap.md", content="zebra quokka\n")
    return a, server.token("--name", "reader", "--store", a, "--read-only")


def test_a_slow_search_is_cut_at_its_deadline_through_the_api_and_mcp(memfs_bin, tmp_path):
    server = Server(memfs_bin, tmp_path / "stores", "--search-tool", "--search-deadline-ms", "1")
    try:
        a, reader = slow_store(server, 6)
        got = get(f"{server.url}/v1/memory_stores/{a}/search", {"q": PHRASE}, reader, 120)
        assert got.get("cut") is True and "was cut after 1 ms" in got["note"], got

        async def main():
            http = create_mcp_http_client(headers={"Authorization": f"Bearer {reader}"})
            async with Client(streamable_http_client(server.url + "/mcp", http_client=http)) as c:
                r = await c.call_tool("memory_search", {"query": PHRASE})
                assert not r.is_error, r
                assert "was cut after 1 ms" in r.content[0].text, r.content[0].text
                r = await c.call_tool("memory_search", {"query": '"' + "a " * 500 + '"'})
                assert r.is_error and "at most 8" in r.content[0].text

        anyio.run(main)
    finally:
        assert server.stop() == 0, "".join(server.log)


def test_a_long_search_holds_up_no_cheap_search_of_the_same_store(memfs_bin, tmp_path):
    # A deadline long enough that the slow search runs to its end.
    server = Server(memfs_bin, tmp_path / "stores", "--search-deadline-ms", "600000")
    try:
        a, reader = slow_store(server, 24)
        url = f"{server.url}/v1/memory_stores/{a}/search"
        # Indexed first (both searches then only search).
        assert get(url, {"q": "quokka"}, reader, 120)["data"]
        many = " ".join([PHRASE] * 6)
        done = {}

        def slow():
            r = get(url, {"q": many, "limit": 100}, reader, 600)
            done["slow"] = (time.monotonic(), r)

        t = threading.Thread(target=slow)
        t.start()
        time.sleep(0.3)
        cheap = []
        while "slow" not in done and len(cheap) < 20:
            began = time.monotonic()
            r = get(url, {"q": "quokka"}, reader, 600)
            cheap.append((time.monotonic(), time.monotonic() - began))
            assert [h["path"] for h in r["data"]] == ["/cheap.md"], r
        t.join()
        slow_done, slow_answer = done["slow"]
        assert len(slow_answer["data"]) == 24 and "cut" not in slow_answer
        # The first cheap search, asked while the slow one ran, was answered
        # before the slow one ended.
        assert cheap and cheap[0][0] < slow_done, (cheap, slow_done)
        print(f"cheap searches during a slow one: {len(cheap)}, the slowest {max(c[1] for c in cheap) * 1000:.1f} ms")
    finally:
        assert server.stop() == 0, "".join(server.log)
