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
from page_conflicts import use_instead

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

    def __init__(self, memfs_bin, store, cache, key=None, pull=PULL, extra=()):
        self.proc = subprocess.Popen(
            [memfs_bin, "--data", store.url, "--cache", str(cache), "--pull-every", pull, *extra, "serve", "--stdio"],
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


def test_two_machines_appending_to_one_file_at_once_keep_both_lines(memfs_bin, server, tmp_path):
    store = Store(server)
    store.sdk.beta.memory_stores.memories.create(store.id, path="/MEMORY.md", content="# memory\n")
    one = Agent(memfs_bin, store, tmp_path / "one")
    two = Agent(memfs_bin, store, tmp_path / "two")
    for agent in (one, two):
        until(lambda: "# memory" in str(agent.text(command="view", path="/memories/MEMORY.md")), what="the first pull")
    # Twenty rounds, each machine appending its own line at the same time
    # (both from the same version: the second push meets a 409 and merges).
    for i in range(20):
        one.call(command="insert", path="/memories/MEMORY.md", insert_line=1 + 2 * i, insert_text=f"- one {i}")
        two.call(command="insert", path="/memories/MEMORY.md", insert_line=1 + 2 * i, insert_text=f"- two {i}")
        until(lambda: all(f"- {w} {i}\n" in (store.files().get("/MEMORY.md") or "") for w in ("one", "two")),
              what=f"round {i}'s two lines in the store")
        for agent in (one, two):
            until(lambda: all(f"- {w} {i}" in str(agent.text(command="view", path="/memories/MEMORY.md"))
                              for w in ("one", "two")), what=f"round {i}'s lines on both machines")
    final = store.files()["/MEMORY.md"]
    for i in range(20):
        for w in ("one", "two"):
            assert final.count(f"- {w} {i}\n") == 1, final
    for agent in (one, two):
        code, err = agent.stop()
        assert code == 0, err


def both_sides_change(memfs_bin, store, cache, first, theirs, old, new):
    """/a.md holds `first` here and in the store; while this machine is
    off, the store's becomes `theirs` and this machine's memory has `old`
    replaced by `new` (its data dir opened as a plain memory). Returns the
    agent started on the cache again."""
    made = store.sdk.beta.memory_stores.memories.create(store.id, path="/a.md", content=first)
    agent = Agent(memfs_bin, store, cache)
    until(lambda: first.split()[-1] in str(agent.text(command="view", path="/memories/a.md")), what="the first pull")
    code, err = agent.stop()
    assert code == 0, err
    store.sdk.beta.memory_stores.memories.update(made.id, memory_store_id=store.id, content=theirs)
    r = subprocess.run([memfs_bin, "--data", str(cache), "exec",
                        json.dumps({"command": "str_replace", "path": "/memories/a.md", "old_str": old,
                                    "new_str": new})], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return Agent(memfs_bin, store, cache)


def test_overlapping_edits_keep_the_stores_version_and_this_one_in_the_history(memfs_bin, server, tmp_path):
    store = Store(server)
    # The same line changed here and in the store: back on the store, the
    # push meets a 409, the texts conflict.
    agent = both_sides_change(memfs_bin, store, tmp_path / "cache", "colour: red\n", "colour: blue\n", "red", "green")
    view = until(lambda: (lambda t: "blue" in t and t)(str(agent.text(command="view", path="/memories/a.md"))),
                 what="the store's version here")
    assert store.files() == {"/a.md": "colour: blue\n"}
    # The agent is told once, in one line, at its next view of the file.
    assert "another machine changed /a.md on the same lines" in view, view
    assert "another machine" not in str(agent.text(command="view", path="/memories/a.md"))
    code, err = agent.stop()
    assert code == 0, err
    assert "overlap" in err, err
    log = subprocess.run([memfs_bin, "--data", str(tmp_path / "cache"), "log", "--json", "/memories/a.md"],
                         capture_output=True, text=True)
    assert log.returncode == 0, log.stderr
    state = json.loads((tmp_path / "cache" / ".memfs" / "remote" / "state.json").read_text())
    assert [c["path"] for c in state["conflicts"]] == ["/a.md"], state
    shown = subprocess.run([memfs_bin, "--data", str(tmp_path / "cache"), "log", "/memories/a.md"],
                           capture_output=True, text=True).stdout
    assert "remote:" in shown, shown
    # This machine's text is one version back, and the store's version is
    # flagged: an overwrite by the remote of it, which its writer had not read.
    rows = [json.loads(line) for line in log.stdout.splitlines() if line.strip()]
    ours = [r for r in rows if r.get("sha256") == state["conflicts"][0]["ours"]]
    assert ours, rows
    over = [r for r in rows if r["op"] == "overwrite"]
    assert len(over) == 1 and over[0]["actor"]["kind"] == "remote", rows
    assert over[0]["replaces"] == ours[0]["version"], rows
    assert "which its writer had not read" in shown, shown

    # The review page offers "use this one instead"; a real browser clicks
    # it, and this machine's text is the file again, here and in the store.
    agent = Agent(memfs_bin, store, tmp_path / "cache")
    said = use_instead([memfs_bin, "--data", store.url, "--cache", str(tmp_path / "cache")], ours[0]["version"],
                       env=env_with(store.key))
    assert f"the file is version {ours[0]['version']}'s text again" in said, said
    assert "green" in str(agent.text(command="view", path="/memories/a.md"))
    until(lambda: store.files() == {"/a.md": "colour: green\n"}, what="the chosen text in the store")
    code, err = agent.stop()
    assert code == 0, err


def test_edits_on_other_lines_made_on_both_sides_are_merged_and_noted(memfs_bin, server, tmp_path):
    store = Store(server)
    agent = both_sides_change(memfs_bin, store, tmp_path / "cache", "one\ntwo\nthree\n", "ONE\ntwo\nthree\n",
                              "three", "THREE")
    until(lambda: store.files() == {"/a.md": "ONE\ntwo\nTHREE\n"}, what="the merge in the store")
    assert "ONE" in str(agent.text(command="view", path="/memories/a.md"))
    code, err = agent.stop()
    assert code == 0, err
    log = subprocess.run([memfs_bin, "--data", str(tmp_path / "cache"), "log", "--json", "/memories/a.md"],
                         capture_output=True, text=True)
    rows = [json.loads(line) for line in log.stdout.splitlines() if line.strip()]
    merged = [r for r in rows if r.get("note", "").startswith("merged:")]
    assert len(merged) == 1 and merged[0]["actor"]["kind"] == "remote", rows
    # Its first parent is this machine's edit (the other is the store's version).
    mine = [r for r in rows if r["version"] == merged[0]["replaces"]]
    assert mine and mine[0]["actor"]["kind"] != "remote", rows
    assert not [r for r in rows if r["op"] == "overwrite"], rows


def test_edits_made_while_the_store_is_down_survive_a_restart_and_go_out_after(memfs_bin, tmp_path):
    root = tmp_path / "root"
    server = Server(memfs_bin, root)
    port = server.url.rsplit(":", 1)[1]
    store = Store(server)
    store.sdk.beta.memory_stores.memories.create(store.id, path="/a.md", content="one\n")
    agent = Agent(memfs_bin, store, tmp_path / "cache")
    until(lambda: "one" in str(agent.text(command="view", path="/memories/a.md")), what="the first pull")
    assert server.stop() == 0
    # Down: the tool still answers, and says the copy may be stale.
    agent.call(command="str_replace", path="/memories/a.md", old_str="one", new_str="one, offline")
    agent.call(command="create", path="/memories/b.md", file_text="made offline\n")
    view = until(lambda: (lambda t: "cannot be reached" in t and t)(str(agent.text(command="view", path="/memories/a.md"))),
                 what="the stale note")
    assert "changes are kept here and sent when the store answers again" in view, view

    def log_says():
        r = subprocess.run([memfs_bin, "--data", str(tmp_path / "cache"), "log"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return r.stderr
    said = until(lambda: (lambda e: "2 change(s) not sent yet" in e and e)(log_says()), what="memfs log saying so")
    assert "/a.md, /b.md" in said, said
    code, err = agent.stop()
    assert code == 0, err
    # Back, on the same address; a new process on the same cache sends what waited.
    server = Server(memfs_bin, root, listen=f"127.0.0.1:{port}")
    try:
        agent = Agent(memfs_bin, store, tmp_path / "cache")
        until(lambda: store.files() == {"/a.md": "one, offline\n", "/b.md": "made offline\n"},
              what="the offline edits reaching the store")
        view = agent.text(command="view", path="/memories/a.md")
        assert "cannot be reached" not in str(view), view
        until(lambda: "everything here is sent" in log_says(), what="memfs log saying all is sent")
        code, err = agent.stop()
        assert code == 0, err
    finally:
        assert server.stop() == 0, "".join(server.log)


def test_a_store_that_cannot_be_reached_and_no_cache_is_a_clear_error(memfs_bin, tmp_path):
    env = env_with("sk-not-a-real-key-123")
    r = subprocess.run([memfs_bin, "--data", "http://127.0.0.1:9/v1/memory_stores/memstore_x", "--cache",
                        str(tmp_path / "cache"), "exec", '{"command":"view","path":"/memories"}'],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode != 0
    assert "memstore_x" in r.stderr and "cannot reach" in r.stderr, r.stderr
    assert "sk-not-a-real-key" not in r.stderr + r.stdout


def test_a_url_that_is_not_a_store_or_sends_the_key_in_clear_is_refused(memfs_bin, tmp_path):
    env = env_with("sk-secret-in-env")
    for url, said in [
        ("http://10.1.2.3/v1/memory_stores/s", "in clear"),
        ("https://sk-secret-in-url@example.com/v1/memory_stores/s", "never from the URL"),
        ("https://example.com/v1/other", "memory_stores/STORE_ID"),
    ]:
        r = subprocess.run([memfs_bin, "--data", url, "--cache", str(tmp_path / "c"), "exec",
                            '{"command":"view","path":"/memories"}'], capture_output=True, text=True, env=env)
        assert r.returncode == 2 and said in r.stderr, (url, r.stderr)
        assert "sk-secret" not in r.stderr


def test_the_apis_limits_are_refused_at_the_tool_before_anything_is_sent(memfs_bin, server, tmp_path):
    store = Store(server)
    agent = Agent(memfs_bin, store, tmp_path / "cache")
    out = agent.call(command="create", path="/memories/big.md", file_text="x" * 102_401)
    assert out.get("is_error") or "Error" in str(out), out
    ok = agent.call(command="create", path="/memories/fits.md", file_text="x" * 102_400)
    assert not ok.get("is_error"), ok
    deep = "/".join(f"d{i}" for i in range(20))
    out = agent.call(command="create", path=f"/memories/{deep}/f.md", file_text="deep")
    assert out.get("is_error") or "Error" in str(out), out
    until(lambda: set(store.files()) == {"/fits.md"}, what="the file that fits reaching the store")
    code, err = agent.stop()
    assert code == 0, err


def test_a_revoked_key_is_a_clear_error_and_nothing_here_is_lost(memfs_bin, server, tmp_path):
    store = Store(server)
    agent = Agent(memfs_bin, store, tmp_path / "cache")
    agent.call(command="create", path="/memories/a.md", file_text="before\n")
    until(lambda: store.files() == {"/a.md": "before\n"}, what="the first push")
    r = subprocess.run([memfs_bin, "--stores", str(server.root), "token", "revoke", f"writer-shared"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    agent.call(command="str_replace", path="/memories/a.md", old_str="before", new_str="after")
    state_file = tmp_path / "cache" / ".memfs" / "remote" / "state.json"
    until(lambda: state_file.exists() and json.loads(state_file.read_text()).get("halted"), what="the halt")
    assert "401" in json.loads(state_file.read_text())["halted"]
    assert "after" in str(agent.text(command="view", path="/memories/a.md"))
    assert store.files() == {"/a.md": "before\n"}
    code, err = agent.stop()
    assert code == 0, err
    assert "refuses" in err, err
    assert store.key not in err
    assert (tmp_path / "cache" / "memories" / "a.md").read_text() == "after\n"
    r = subprocess.run([memfs_bin, "--data", str(tmp_path / "cache"), "log"], capture_output=True, text=True)
    assert "the store refuses this cache's changes" in r.stderr and "1 change(s) not sent yet" in r.stderr, r.stderr


def test_a_revoked_key_replaced_in_the_key_file_is_taken_without_a_restart(memfs_bin, server, tmp_path):
    """The key from --store-key-file (what `claude-code enable` keeps):
    revoked, the changes wait; a new key written into the file is taken
    within a second, and what waited goes out."""
    store = Store(server)
    key = tmp_path / "store.key"
    key.write_text(store.key + "\n")
    key.chmod(0o600)
    agent = Agent(memfs_bin, store, tmp_path / "cache", key="", extra=("--store-key-file", str(key)))
    agent.call(command="create", path="/memories/a.md", file_text="before\n")
    until(lambda: store.files() == {"/a.md": "before\n"}, what="the first push")
    r = subprocess.run([memfs_bin, "--stores", str(server.root), "token", "revoke", "writer-shared"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    agent.call(command="str_replace", path="/memories/a.md", old_str="before", new_str="after")
    state_file = tmp_path / "cache" / ".memfs" / "remote" / "state.json"
    until(lambda: state_file.exists() and json.loads(state_file.read_text()).get("halted"), what="the halt")
    assert store.files() == {"/a.md": "before\n"}
    fresh = server.token("--name", "writer-again", "--store", store.id)
    key.write_text(fresh + "\n")
    until(lambda: store.files() == {"/a.md": "after\n"}, seconds=10, what="the change sent with the new key")
    until(lambda: not json.loads(state_file.read_text()).get("halted"), what="the halt lifted")
    code, err = agent.stop()
    assert code == 0, err
    assert "a new key in --store-key-file" in err, err
    assert fresh not in err and store.key not in err


def test_a_person_saving_through_a_mount_of_the_cache_reaches_the_store(memfs_bin, server, tmp_path):
    import shutil
    ci = os.environ.get("CI") == "true"
    if not os.path.exists("/dev/fuse") or os.geteuid() != 0:
        if ci:
            pytest.fail("CI=true needs /dev/fuse and root for the mount test")
        pytest.skip("needs /dev/fuse and root")
    store = Store(server)
    made = store.sdk.beta.memory_stores.memories.create(store.id, path="/notes/a.md", content="from the API\n")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    p = subprocess.Popen([memfs_bin, "--data", store.url, "--cache", str(tmp_path / "cache"), "--pull-every", PULL,
                          "mount", str(mnt)], stderr=subprocess.PIPE, text=True, env=env_with(store.key))
    try:
        until(lambda: os.path.ismount(mnt) or p.poll() is not None, what="the mount")
        assert os.path.ismount(mnt), p.stderr.read()
        assert (mnt / "notes" / "a.md").read_text() == "from the API\n"
        # An editor's save (temp file renamed over the memory): an update of
        # the same memory.
        vim = shutil.which("vim")
        if vim:
            subprocess.run([vim, "-Es", "-u", "NONE", "-c", "%s/API/vim/", "-c", "wq", str(mnt / "notes" / "a.md")],
                           check=True, timeout=30)
            want = "from the vim\n"
        elif ci:
            pytest.fail("CI=true needs vim")
        else:
            (mnt / "notes" / ".a.md.tmp").write_text("from the vim\n")
            os.rename(mnt / "notes" / ".a.md.tmp", mnt / "notes" / "a.md")
            want = "from the vim\n"
        until(lambda: store.files() == {"/notes/a.md": want}, what="the save reaching the store")
        assert store.memory("/notes/a.md").id == made.id
        # A new file, and a change made there, each reach the other side.
        (mnt / "b.md").write_text("a person's note\n")
        until(lambda: store.files().get("/b.md") == "a person's note\n", what="the new file reaching the store")
        store.sdk.beta.memory_stores.memories.update(made.id, memory_store_id=store.id, content="changed there\n")
        until(lambda: (mnt / "notes" / "a.md").read_text() == "changed there\n", what="the change reaching the mount")
    finally:
        subprocess.run(["umount", str(mnt)])
        p.wait(timeout=30)


def test_a_memfs_server_pushes_changes_to_the_cache_without_waiting_for_a_pull(memfs_bin, server, tmp_path):
    """With the pull an hour apart, only memfs's long poll of the versions
    listing (`wait=`, offered by a memfs server's `memfs-extensions`
    header) can bring the other machine's changes: fifty of them arrive."""
    store = Store(server)
    one = Agent(memfs_bin, store, tmp_path / "one", pull="3600")
    two = Agent(memfs_bin, store, tmp_path / "two", pull="3600")
    one.call(command="create", path="/memories/a.md", file_text="0\n")
    until(lambda: "0" in str(two.text(command="view", path="/memories/a.md")), what="the first change")
    took = []
    for i in range(1, 51):
        t = time.monotonic()
        out = one.call(command="str_replace", path="/memories/a.md", old_str=f"{i - 1}\n", new_str=f"{i}\n")
        assert not out.get("is_error"), out
        until(lambda: f"\t{i}" in str(two.text(command="view", path="/memories/a.md")), what=f"change {i}")
        took.append(time.monotonic() - t)
    took.sort()
    print(f"save here to view there: p50 {took[24] * 1000:.0f} ms, p99 {took[-1] * 1000:.0f} ms")
    for agent in (one, two):
        code, err = agent.stop()
        assert code == 0, err


def test_every_door_works_on_a_store_over_http(memfs_bin, server, tmp_path):
    every_door(memfs_bin, Store(server), tmp_path)


def every_door(memfs_bin, store, tmp_path):
    """exec (one change and a stop: pushed before it exits), the memory
    tool over MCP with the `mcp` package's own client, `memfs log`, and the
    review page, each on the cache of `store` (a memfs server's, or the
    fake hosted API's: test_fake_store_api.py)."""
    import anyio
    import urllib.request
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters
    cache = tmp_path / "cache"
    base = [memfs_bin, "--data", store.url, "--cache", str(cache), "--pull-every", PULL]
    env = env_with(store.key)
    r = subprocess.run([*base, "exec", json.dumps({"command": "create", "path": "/memories/exec.md",
                                                   "file_text": "by exec\n"})],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert store.files() == {"/exec.md": "by exec\n"}, "exec's change is in the store when exec returns"

    async def over_mcp():
        params = StdioServerParameters(command=memfs_bin, args=[*base[1:], "mcp"], env=env)
        async with Client(params) as client:
            r = await client.call_tool("memory", {"command": "create", "path": "/memories/mcp.md", "file_text": "by mcp\n"})
            assert not r.is_error, r
            r = await client.call_tool("memory", {"command": "view", "path": "/memories/exec.md"})
            assert "by exec" in r.content[0].text
    anyio.run(over_mcp)
    assert store.files() == {"/exec.md": "by exec\n", "/mcp.md": "by mcp\n"}
    store.sdk.beta.memory_stores.memories.create(store.id, path="/api.md", content="by the API\n")
    r = subprocess.run([*base, "log"], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "/memories/api.md" in r.stdout and "remote:" in r.stdout, r.stdout
    # The review page on the cache, logged in with the link it prints.
    import http.cookiejar
    page = subprocess.Popen([*base, "web"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        url = page.stdout.readline().strip()
        assert "/login?t=" in url, url
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        opener.open(url, timeout=30).read()
        html = opener.open(url.split("/login")[0] + "/history", timeout=30).read().decode()
        assert "api.md" in html and "remote:127.0.0.1" in html, html[:3000]
        # The page says, as memfs log does, that everything is sent.
        assert "a cache of http://127.0.0.1:" in html and "everything here is sent" in html, html[:3000]
    finally:
        page.terminate()
        page.wait(timeout=30)


def test_a_directory_moved_or_removed_here_moves_or_removes_every_memory_below_it(memfs_bin, server, tmp_path):
    store = Store(server)
    agent = Agent(memfs_bin, store, tmp_path / "cache")
    for name in ("a", "b", "deep/c"):
        agent.call(command="create", path=f"/memories/dir/{name}.md", file_text=f"{name}\n")
    until(lambda: len(store.files()) == 3, what="three memories in the store")
    ids = {m.path: m.id for m in store.sdk.beta.memory_stores.memories.list(store.id)}
    out = agent.call(command="rename", old_path="/memories/dir", new_path="/memories/moved")
    assert not out.get("is_error"), out
    until(lambda: set(store.files()) == {"/moved/a.md", "/moved/b.md", "/moved/deep/c.md"}, what="the move")
    moved = {m.path: m.id for m in store.sdk.beta.memory_stores.memories.list(store.id)}
    assert moved["/moved/deep/c.md"] == ids["/dir/deep/c.md"], "a move keeps each memory's id"
    out = agent.call(command="delete", path="/memories/moved")
    assert not out.get("is_error"), out
    until(lambda: store.files() == {}, what="the removal")
    code, err = agent.stop()
    assert code == 0, err


def test_a_memfs_server_in_front_of_a_store_over_http_serves_it_through_its_api(memfs_bin, server, tmp_path):
    """`memfs --stores ROOT mirror URL`: a second memfs server (the front)
    serves a store of the first (standing in for the hosted API) through
    its own API and tokens: what the SDK writes through the front is in
    the upstream store, what is written upstream is read through the
    front, and a store or key that does not answer leaves nothing behind."""
    store = Store(server)
    other = Store(server, name="other")
    store.sdk.beta.memory_stores.memories.create(store.id, path="/up.md", content="made upstream\n")
    other.sdk.beta.memory_stores.memories.create(other.id, path="/other.md", content="in the other store\n")
    # One key for the front, as an account's API key reaches its stores.
    key = tmp_path / "upstream.key"
    key.write_text(server.token("--name", "front", "--store", store.id, "--store", other.id) + "\n")
    key.chmod(0o600)
    front_root = tmp_path / "front"
    env = env_with("")
    r = subprocess.run([memfs_bin, "--stores", str(front_root), "--store-key-file", str(key), "mirror", store.url,
                        "--name", "team"], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == store.id, r.stdout
    # A wrong key: refused, and nothing is added.
    bad = tmp_path / "bad.key"
    bad.write_text("memfs_" + "0" * 64 + "\n")
    bad.chmod(0o600)
    r = subprocess.run([memfs_bin, "--stores", str(front_root), "--store-key-file", str(bad), "mirror", other.url],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 2 and "no store was added" in r.stderr, r
    assert not (front_root / other.id).exists()
    assert store.key not in r.stderr and "0" * 64 not in r.stderr, r.stderr

    front = Server(memfs_bin, front_root, "--store-key-file", str(key), "--pull-every", "0.2")
    try:
        admin = front.token("--store", store.id, "--name", "front-writer")
        sdk = anthropic.Anthropic(api_key=admin, base_url=front.url, max_retries=2)
        assert sdk.beta.memory_stores.retrieve(store.id).name == "team"
        seen = {m.path: m.content for m in sdk.beta.memory_stores.memories.list(store.id, view="full")}
        assert seen == {"/up.md": "made upstream\n"}, seen
        # Written through the front: in the upstream store.
        sdk.beta.memory_stores.memories.create(store.id, path="/front.md", content="made at the front\n")
        until(lambda: store.files().get("/front.md") == "made at the front\n", what="the front's write upstream")
        # Written upstream: read through the front.
        up = store.memory("/up.md")
        store.sdk.beta.memory_stores.memories.update(up.id, memory_store_id=store.id, content="changed upstream\n")

        def front_files():
            return {m.path: m.content for m in sdk.beta.memory_stores.memories.list(store.id, view="full")}
        until(lambda: front_files() == {"/up.md": "changed upstream\n", "/front.md": "made at the front\n"},
              what="the upstream change at the front")
        # A mirror added while the front runs is served at once.
        r = subprocess.run([memfs_bin, "--stores", str(front_root), "--store-key-file", str(key), "mirror",
                            other.url], capture_output=True, text=True, env=env, timeout=60)
        assert r.returncode == 0 and r.stdout.strip() == other.id, r
        reader = anthropic.Anthropic(api_key=front.token("--store", other.id, "--read-only"), base_url=front.url)
        got = {m.path: m.content for m in reader.beta.memory_stores.memories.list(other.id, view="full")}
        assert got == {"/other.md": "in the other store\n"}, got
    finally:
        assert front.stop() == 0, "".join(front.log)
    secret = key.read_text().strip()
    assert not any(secret in line for line in front.log), "the key is never logged"
