"""memfs's store over HTTP against a fake of the hosted memory stores API
(fake_store_api.py: its documented limits and answers, and the harsher
answer where the documents are silent), and the fake checked against a
real memfs server with the SDK's own client, so that the two agree."""
import json
import types

import anthropic
import pytest

from fake_store_api import FakeStoreApi
from http_server import Server
from test_remote import PULL, Agent, every_door, until

KEY = "sk-fake-0123456789"


def Cache(memfs_bin, api, cache, pull=PULL):
    """A cache of the fake's store: test_remote's agent on its URL."""
    target = types.SimpleNamespace(url=f"{api.url}/v1/memory_stores/{api.store_id}", key=KEY)
    agent = Agent(memfs_bin, target, cache, pull=pull)
    agent.view = lambda path: str(agent.call(command="view", path=path).get("content"))
    return agent


def test_the_fake_and_serve_http_answer_the_sdk_alike(memfs_bin, tmp_path):
    server = Server(memfs_bin, tmp_path / "root")
    try:
        admin = anthropic.Anthropic(api_key=server.token("--admin"), base_url=server.url, max_retries=0)
        real_store = admin.beta.memory_stores.create(name="x").id
        with FakeStoreApi(key=KEY) as fake:
            sdk_fake = anthropic.Anthropic(api_key=KEY, base_url=fake.url, max_retries=0)
            for sdk, store in ((admin, real_store), (sdk_fake, fake.store_id)):
                mem = sdk.beta.memory_stores.memories
                m = mem.create(store, path="/a.md", content="one\n")
                assert m.path == "/a.md" and len(m.content_sha256) == 64
                with pytest.raises(anthropic.ConflictError):
                    mem.update(m.id, memory_store_id=store, content="two\n",
                               precondition={"type": "content_sha256", "content_sha256": "0" * 64})
                got = mem.update(m.id, memory_store_id=store, content="two\n",
                                 precondition={"type": "content_sha256", "content_sha256": m.content_sha256})
                assert mem.retrieve(m.id, memory_store_id=store).content == "two\n"
                assert got.content_sha256 == mem.retrieve(m.id, memory_store_id=store).content_sha256
                with pytest.raises(anthropic.BadRequestError):
                    mem.create(store, path="/" + "/".join("d" * 21), content="x")
                vs = list(sdk.beta.memory_stores.memory_versions.list(store))
                assert [v.operation for v in vs] == ["modified", "created"], vs
                mem.delete(m.id, memory_store_id=store)
                assert list(mem.list(store)) == []
    finally:
        assert server.stop() == 0


def test_a_cache_of_the_hosted_api_pulls_pushes_merges_and_never_sends_the_extension(memfs_bin, tmp_path):
    with FakeStoreApi(key=KEY, lag=0.3) as api:
        api.put("/MEMORY.md", "# memory\n")
        one = Cache(memfs_bin, api, tmp_path / "one")
        two = Cache(memfs_bin, api, tmp_path / "two")
        for c in (one, two):
            assert "# memory" in c.view("/memories/MEMORY.md")
        # Both append at once; the store ends with both lines (a 409, merged).
        one.call(command="insert", path="/memories/MEMORY.md", insert_line=1, insert_text="- one")
        two.call(command="insert", path="/memories/MEMORY.md", insert_line=1, insert_text="- two")
        until(lambda: all(x in api.files().get("/MEMORY.md", "") for x in ("- one\n", "- two\n")),
              what="both lines in the store")
        # Another machine's change, listed a little after its time, reaches both.
        api.put("/notes.md", "from elsewhere\n")
        for c in (one, two):
            until(lambda: "from elsewhere" in c.view("/memories/notes.md"), what="the pull")
        # A rename keeps the memory's id; a delete goes out.
        before = {m["path"]: i for i, m in api.memories.items()}
        one.call(command="rename", old_path="/memories/notes.md", new_path="/memories/n2.md")
        until(lambda: "/n2.md" in api.files(), what="the rename")
        assert {m["path"]: i for i, m in api.memories.items()}["/n2.md"] == before["/notes.md"]
        two.call(command="delete", path="/memories/MEMORY.md")
        until(lambda: "/MEMORY.md" not in api.files(), what="the delete")
        for c in (one, two):
            code, err = c.stop()
            assert code == 0, err
        asked = {k for _, _, keys in api.requests for k in keys}
        assert not asked & {"wait", "after"}, asked


def test_an_archived_or_revoked_store_halts_with_nothing_here_lost(memfs_bin, tmp_path):
    with FakeStoreApi(key=KEY) as api:
        api.put("/a.md", "one\n")
        cache = Cache(memfs_bin, api, tmp_path / "c")
        assert "one" in cache.view("/memories/a.md")
        state = tmp_path / "c" / ".memfs" / "remote" / "state.json"
        for act, said in (("archive", "archived"), ("revoke", "401")):
            import urllib.request
            urllib.request.urlopen(urllib.request.Request(f"{api.url}/_fake/{act}", method="POST")).read()
            cache.call(command="create", path=f"/memories/{act}.md", file_text=f"after the {act}\n")
            until(lambda: said in (json.loads(state.read_text()).get("halted") or ""), what=f"the halt ({act})")
            assert f"/{act}.md" not in api.files()
            assert f"after the {act}" in cache.view(f"/memories/{act}.md")
        code, err = cache.stop()
        assert code == 0, err
        assert KEY not in err


class FakeStore:
    """The fake's store as test_remote's tests name a store: its URL, the
    key, the SDK on it, its files."""

    def __init__(self, api):
        self.api = api
        self.id = api.store_id
        self.url = f"{api.url}/v1/memory_stores/{api.store_id}"
        self.key = KEY
        self.sdk = anthropic.Anthropic(api_key=KEY, base_url=api.url, max_retries=0)

    def files(self):
        return self.api.files()


def test_every_door_works_on_a_cache_of_the_hosted_api(memfs_bin, tmp_path):
    with FakeStoreApi(key=KEY) as api:
        every_door(memfs_bin, FakeStore(api), tmp_path)


def test_a_memfs_server_in_front_of_the_hosted_api_serves_its_store(memfs_bin, tmp_path):
    """`memfs --stores ROOT mirror URL` on the fake hosted API: the SDK
    through the memfs server (its own token) reads and writes the hosted
    store, and a change made there is read through the server."""
    import subprocess
    with FakeStoreApi(key=KEY) as api:
        api.put("/up.md", "made upstream\n")
        key = tmp_path / "hosted.key"
        key.write_text(KEY + "\n")
        key.chmod(0o600)
        root = tmp_path / "front"
        r = subprocess.run([memfs_bin, "--stores", str(root), "--store-key-file", str(key), "mirror",
                            FakeStore(api).url], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and r.stdout.strip() == api.store_id, r
        front = Server(memfs_bin, root, "--store-key-file", str(key), "--pull-every", "0.2")
        try:
            sdk = anthropic.Anthropic(api_key=front.token("--store", api.store_id), base_url=front.url)
            mem = sdk.beta.memory_stores.memories

            def through_front():
                return {m.path: m.content for m in mem.list(api.store_id, view="full")}
            assert through_front() == {"/up.md": "made upstream\n"}
            mem.create(api.store_id, path="/front.md", content="through memfs\n")
            until(lambda: api.files().get("/front.md") == "through memfs\n", what="the write in the hosted store")
            api.put("/up.md", "changed there\n")
            until(lambda: through_front() == {"/up.md": "changed there\n", "/front.md": "through memfs\n"},
                  what="the hosted change through the server")
        finally:
            assert front.stop() == 0, "".join(front.log)
        assert not any(KEY in line for line in front.log)
