"""Search through the HTTP doors of `memfs --stores ROOT serve --http`: the
memory stores API's `GET /v1/memory_stores/ID/search` (memfs' own extension,
called with the pinned SDK's own client and its tokens), remote MCP's
`memory_search` with the official `mcp` client, and `memfs search` on a
store of the root beside the server."""
import subprocess

import anthropic
import anyio
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from http_server import Server


@pytest.fixture
def server(memfs_bin, tmp_path):
    s = Server(memfs_bin, tmp_path / "stores", "--hide", "private-*", "--search-tool")
    yield s
    assert s.stop() == 0, "".join(s.log)


def sdk(server, token):
    return anthropic.Anthropic(api_key=token, base_url=server.url, max_retries=0)


def search(client, store, **params):
    """The endpoint through the SDK client's own request path."""
    return client.get(f"/v1/memory_stores/{store}/search", options={"params": params}, cast_to=object)


def test_search_endpoint_ranks_marks_hides_and_keeps_the_token_rules(server):
    admin = sdk(server, server.token("--admin", "--name", "admin"))
    ms = admin.beta.memory_stores
    a = ms.create(name="a").id
    b = ms.create(name="b").id
    http = ms.memories.create(a, path="/notes/http.md", content="# Replies\nWe call parse_http_reply here.\n")
    ms.memories.create(a, path="/notes/draft.md", content="a thread about replies\n")
    ms.memories.create(a, path="/private-plan.md", content="the secret thread\n")
    ms.memories.create(b, path="/b.md", content="b's thread and parse_http_reply\n")
    reader = sdk(server, server.token("--name", "reader", "--store", a, "--read-only"))

    got = search(reader, a, q="http_reply")
    assert [r["path"] for r in got["data"]] == ["/notes/http.md"]
    hit = got["data"][0]
    assert hit["type"] == "memory_search_result" and hit["memory_id"] == http.id
    line = hit["lines"][0]
    assert (line["line"], line["snippet"]) == (2, "We call parse_http_reply here.")
    s, e = line["highlights"][0]
    assert line["snippet"][s:e] == "http_reply"  # the part of the identifier that matched
    # The names the tool hides stay hidden; a path prefix narrows; a limit cuts.
    assert sorted(r["path"] for r in search(reader, a, q="thread")["data"]) == ["/notes/draft.md"]
    assert search(reader, a, q="secret")["data"] == []
    assert sorted(r["path"] for r in search(reader, a, q="replies", path_prefix="/notes/")["data"]) == ["/notes/draft.md", "/notes/http.md"]
    assert search(reader, a, q="replies", path_prefix="/other/")["data"] == []
    assert len(search(reader, a, q="replies", limit=1)["data"]) == 1
    # A write is found by the next search.
    ms.memories.create(a, path="/new.md", content="an ocelot\n")
    assert [r["path"] for r in search(reader, a, q="ocelot")["data"]] == ["/new.md"]
    # Another store is the same 404 as a missing one; no token is a 401.
    with pytest.raises(anthropic.NotFoundError):
        search(reader, b, q="thread")
    with pytest.raises(anthropic.NotFoundError):
        search(reader, "memstore_doesnotexist", q="thread")
    with pytest.raises(anthropic.AuthenticationError):
        search(sdk(server, "memfs_" + "0" * 64), a, q="thread")
    # A query it cannot run, or a bad parameter: 400 with the reason.
    for params, says in [
        ({"q": '"open'}, "not closed"),
        ({}, "`q` is required"),
        ({"q": "x", "limit": "0"}, "`limit`"),
        ({"q": "x", "path_prefix": "notes"}, "starts with /"),
        ({"q": "w " * 600}, "too long"),
    ]:
        with pytest.raises(anthropic.BadRequestError) as bad:
            search(reader, a, **params)
        assert says in bad.value.body["error"]["message"], bad.value.body
    # Only GET.
    with pytest.raises(anthropic.APIStatusError) as wrong:
        admin.post(f"/v1/memory_stores/{a}/search", cast_to=object, body={})
    assert wrong.value.status_code == 405
    # `memfs search` on the store, beside the server that holds it.
    out = subprocess.run([server.memfs_bin, "--data", str(server.root / a), "search", "ocelot"],
                         capture_output=True, text=True)
    assert (out.returncode, out.stdout) == (0, "/memories/new.md:1: an ocelot\n"), out.stderr


def test_remote_mcp_offers_memory_search_with_the_flag(server):
    admin = sdk(server, server.token("--admin", "--name", "admin"))
    a = admin.beta.memory_stores.create(name="a").id
    admin.beta.memory_stores.memories.create(a, path="/notes/plan.md", content="deploy on friday\n")
    admin.beta.memory_stores.memories.create(a, path="/private-x.md", content="deploy the secret\n")
    tok = server.token("--name", "agent", "--store", a, "--read-only")

    async def main():
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {tok}"})
        async with Client(streamable_http_client(server.url + "/mcp", http_client=http)) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert sorted(tools) == ["memory", "memory_search"]
            assert tools["memory_search"].annotations.read_only_hint is True
            r = await c.call_tool("memory_search", {"query": "deploy"})
            assert not r.is_error, r
            assert r.content[0].text == "/memories/notes/plan.md:1: deploy on friday\n"
            r = await c.call_tool("memory_search", {"query": "-deploy"})
            assert r.is_error and "only leaves out" in r.content[0].text

    anyio.run(main)
