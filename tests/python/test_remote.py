"""A memory store over HTTP as the data dir (`memfs --data
http://HOST/v1/memory_stores/ID`, issue 50): this machine's cache of the
store served by every door at local speed, kept in step with a real memfs
server (`serve --http`) by pushes (with the content's sha256 as the
precondition) and pulls (the versions listing since the last one), checked
with the pinned SDK's own client on the server's side."""
import json
import os
import signal
import subprocess
import time

import anthropic
import pytest

from http_server import Server

PULL = "0.2"


@pytest.fixture
def server(memfs_bin, tmp_path):
    s = Server(memfs_bin, tmp_path / "root")
    yield s
    assert s.stop() == 0, "".join(s.log)


class Store:
    """One store of the server, its SDK client, and the URL a cache names."""

    def __init__(self, server, name="shared"):
        admin = server.token("--admin", "--name", f"admin-{name}")
        self.sdk = anthropic.Anthropic(api_key=admin, base_url=server.url, max_retries=0)
        self.id = self.sdk.beta.memory_stores.create(name=name).id
        self.key = server.token("--name", f"writer-{name}", "--store", self.id)
        self.url = f"{server.url}/v1/memory_stores/{self.id}"

    def files(self):
        return {m.path: m.content for m in self.sdk.beta.memory_stores.memories.list(self.id, view="full")}

    def memory(self, path):
        for m in self.sdk.beta.memory_stores.memories.list(self.id, view="full"):
            if m.path == path:
                return m
        return None


def env_with(key):
    env = dict(os.environ)
    env["ANTHROPIC_API_KEY"] = key
    env.pop("MEMFS_DATA", None)
    return env


class Agent:
    """`memfs --data URL --cache DIR serve --stdio`: the memory tool over
    the cache, as an agent's harness runs it."""

    def __init__(self, memfs_bin, store, cache, key=None, *extra):
        self.proc = subprocess.Popen(
            [memfs_bin, "--data", store.url, "--cache", str(cache), "--pull-every", PULL, *extra, "serve", "--stdio"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=env_with(key or store.key),
        )

    def call(self, **command):
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, self.proc.stderr.read()
        return json.loads(line)

    def text(self, **command):
        out = self.call(**command)
        return out.get("content") if isinstance(out, dict) else out

    def stop(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        return self.proc.returncode, self.proc.stderr.read()


def until(check, seconds=15, what="the condition"):
    deadline = time.time() + seconds
    while time.time() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"{what} did not happen within {seconds} s")


def test_a_store_over_http_is_the_data_dir_both_ways(memfs_bin, server, tmp_path):
    store = Store(server)
    store.sdk.beta.memory_stores.memories.create(store.id, path="/notes/a.md", content="alpha\n")
    agent = Agent(memfs_bin, store, tmp_path / "cache")
    # What the store held is here at once (the first open fills the cache).
    out = agent.text(command="view", path="/memories/notes/a.md")
    assert "alpha" in str(out), out
    # A change made here reaches the store, with the memory's id kept.
    first = store.memory("/notes/a.md").id
    agent.call(command="str_replace", path="/memories/notes/a.md", old_str="alpha", new_str="alpha two")
    until(lambda: store.files().get("/notes/a.md") == "alpha two\n", what="the update reaching the store")
    assert store.memory("/notes/a.md").id == first
    agent.call(command="create", path="/memories/b.md", file_text="bee\n")
    until(lambda: store.files().get("/b.md") == "bee\n", what="the create reaching the store")
    # A rename is an update of the path: the id stays.
    b_id = store.memory("/b.md").id
    agent.call(command="rename", old_path="/memories/b.md", new_path="/memories/c.md")
    until(lambda: "/c.md" in store.files() and "/b.md" not in store.files(), what="the rename")
    assert store.memory("/c.md").id == b_id
    # A change made there (another machine) reaches the cache.
    store.sdk.beta.memory_stores.memories.update(first, memory_store_id=store.id, content="from elsewhere\n")
    until(lambda: "from elsewhere" in str(agent.text(command="view", path="/memories/notes/a.md")),
          what="the store's change reaching the cache")
    store.sdk.beta.memory_stores.memories.delete(b_id, memory_store_id=store.id)
    until(lambda: "does not exist" in str(agent.text(command="view", path="/memories/c.md")),
          what="the store's delete reaching the cache")
    agent.call(command="delete", path="/memories/notes/a.md")
    until(lambda: store.files() == {}, what="the delete reaching the store")
    code, err = agent.stop()
    assert code == 0, err
    # The history says who made the pulled versions.
    log = subprocess.run([memfs_bin, "--data", str(tmp_path / "cache"), "log"], capture_output=True, text=True)
    assert log.returncode == 0, log.stderr
    assert "remote:127.0.0.1:" in log.stdout, log.stdout
    assert store.key not in log.stdout + log.stderr + err
