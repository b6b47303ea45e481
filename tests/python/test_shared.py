"""One memory across hosts: several memfs processes share a store through a
real PostgreSQL 15, each with its own copy and its own live mount. Every
step goes through a door a user has: `memfs exec` (which attaches to the
host's running memfs through its socket), the mount, `memfs log`."""
import json
import os
import signal
import subprocess
import threading
import time

import pytest

from page_conflicts import use_instead
from shared_hosts import Host, Postgres, read, wait_for

NEEDS = "the shared store's tests need root, /dev/fuse and PostgreSQL 15 (scripts/pg.sh)"


def can_run() -> bool:
    return os.geteuid() == 0 and os.path.exists("/dev/fuse") and (
        os.path.exists("/usr/lib/postgresql/15/bin/pg_ctl"))


@pytest.fixture
def pg(tmp_path):
    if not can_run():
        if os.environ.get("CI") == "true":
            pytest.fail(NEEDS)
        pytest.skip(NEEDS)
    server = Postgres(tmp_path)
    server.start()
    yield server
    server.remove()


@pytest.fixture
def hosts(pg, tmp_path, memfs_bin):
    made = []

    def make(name, store="team", mount=True):
        h = Host(memfs_bin, pg.url(store), tmp_path, name)
        if mount:
            h.mount()
        made.append(h)
        return h

    yield make
    for h in made:
        h.stop()


def test_a_change_on_one_host_reaches_the_others_mounts_even_what_their_kernels_cached(hosts):
    a, b = hosts("a"), hosts("b")
    r = a.tool(command="create", path="/memories/notes.md", file_text="one\n")
    assert not r["is_error"], r
    # B shows it, through its mount and its tool.
    wait_for(lambda: read(b.mnt / "notes.md") == "one\n", 10, "b's mount shows a's create")
    assert "one" in b.tool(command="view", path="/memories/notes.md")["content"]
    # B's kernel has the file's attributes and content cached now; A's next
    # change must show there at once, not after a cache timeout.
    assert os.stat(b.mnt / "notes.md").st_size == 4
    r = a.tool(command="str_replace", path="/memories/notes.md", old_str="one", new_str="one, two")
    assert not r["is_error"], r
    wait_for(lambda: read(b.mnt / "notes.md") == "one, two\n", 30, "b's cached file changed")
    assert os.stat(b.mnt / "notes.md").st_size == 9
    # A person on B: the agent on A sees the save.
    (b.mnt / "todo.md").write_text("from b\n")
    wait_for(lambda: "from b" in a.tool(command="view", path="/memories/todo.md")["content"],
             10, "a's tool sees b's save")
    # Renames and deletes travel too, and each host's history holds every
    # version with the host that made it.
    assert not a.tool(command="rename", old_path="/memories/todo.md",
                      new_path="/memories/done/todo.md")["is_error"]
    wait_for(lambda: read(b.mnt / "done" / "todo.md") == "from b\n", 10, "rename reached b")
    assert read(b.mnt / "todo.md") is None
    os.unlink(b.mnt / "notes.md")
    wait_for(lambda: read(a.mnt / "notes.md") is None, 10, "b's delete reached a")
    rows_a, rows_b = a.log_rows(), b.log_rows()
    key = lambda r: (r["version"], r["op"], r["path"])
    assert sorted(map(key, rows_a)) == sorted(map(key, rows_b))
    origins = {r["origin"] for r in rows_b}
    assert len(origins) == 2, origins


def test_agents_on_several_hosts_racing_on_one_counter_lose_no_increment(hosts, pg):
    a, b, c = hosts("a"), hosts("b"), hosts("c", mount=False)
    assert not a.tool(command="create", path="/memories/counter.md", file_text="count=0;\n")["is_error"]
    wait_for(lambda: read(b.mnt / "counter.md") == "count=0;\n", 10, "b has the counter")
    acked = []

    def agent(host, n):
        done = 0
        while done < n:
            text = host.tool(command="view", path="/memories/counter.md")["content"]
            value = int(text.split("count=")[1].split(";")[0])
            r = host.tool(command="str_replace", path="/memories/counter.md",
                          old_str=f"count={value};", new_str=f"count={value + 1};")
            if not r["is_error"]:
                done += 1
        acked.append(done)

    threads = [threading.Thread(target=agent, args=(h, 15)) for h in (a, a, b, b, c)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = sum(acked)
    assert total == 75
    for h in (a, b):
        wait_for(lambda: read(h.mnt / "counter.md") == f"count={total};\n", 10, "the final count")
    # In the database: every version of the file names the one before it.
    rows = pg.sql("""
        SELECT r->>'version', r->>'replaces', r->>'op' FROM memfs_batches,
            json_array_elements(changes::json) c, json_array_elements(c->'rows') r
        WHERE store = 'team' AND r->>'path' = '/memories/counter.md' ORDER BY seq""")
    assert len(rows) == total + 1
    for prev, row in zip(rows, rows[1:]):
        assert row[1] == prev[0], (prev, row)


def test_while_the_database_is_down_reads_work_agents_hear_so_and_a_persons_saves_wait(hosts, pg):
    a, b = hosts("a"), hosts("b")
    assert not a.tool(command="create", path="/memories/kept.md", file_text="kept\n")["is_error"]
    wait_for(lambda: read(b.mnt / "kept.md") == "kept\n", 10, "b has it")
    pg.crash()
    # Reads keep working from memory.
    assert "kept" in a.tool(command="view", path="/memories/kept.md")["content"]
    assert read(b.mnt / "kept.md") == "kept\n"
    # An agent's write fails fast, saying why, and leaves nothing.
    began = time.monotonic()
    r = a.tool(command="create", path="/memories/lost.md", file_text="never\n")
    assert r["is_error"], r
    assert "shared store cannot be reached" in r["content"], r
    assert "did not take effect" in r["content"], r
    assert time.monotonic() - began < 20
    assert read(a.mnt / "lost.md") is None
    # A person's save is taken by write(2) and kept; fsync says it is not
    # safely stored yet.
    path = b.mnt / "person.md"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    assert os.write(fd, b"saved while down\n") == 17
    with pytest.raises(OSError):
        os.fsync(fd)
    os.close(fd)
    assert read(path) == "saved while down\n"
    # A person on A saves the same file meanwhile: both saves are kept.
    (a.mnt / "person.md").write_text("from a\n")
    pg.start()
    # When the database is back, both are sent: the first makes the file;
    # the second, made from the same version (none: an empty base), is
    # merged with it in its person's name, both texts kept, the first's
    # first; both hosts end the same.
    wait_for(lambda: read(a.mnt / "person.md") == read(b.mnt / "person.md"), 30,
             "the kept saves were sent")
    wait_for(lambda: len([r for r in b.log_rows() if r["path"] == "/memories/person.md"]) == 2,
             10, "two versions")
    rows = [r for r in b.log_rows() if r["path"] == "/memories/person.md"]
    assert [r["op"] for r in rows] == ["write", "create"], rows
    assert rows[0]["note"].startswith("merged:"), rows
    assert {r["actor"]["kind"] for r in rows} == {"person"}, rows
    assert rows[0]["replaces"] == rows[1]["version"], rows
    assert rows[0]["origin"] != rows[1]["origin"], rows
    assert read(a.mnt / "person.md") in ("from a\nsaved while down\n", "saved while down\nfrom a\n")
    assert read(b.mnt / "lost.md") is None
    assert not a.tool(command="create", path="/memories/after.md", file_text="x\n")["is_error"]
    wait_for(lambda: read(b.mnt / "after.md") == "x\n", 10, "writes flow again")
    # Each host's log says when the store was lost and when it answered again.
    for h in (a, b):
        log = h.log.read_text()
        assert "the shared store cannot be reached" in log, log[-2000:]
        wait_for(lambda: "the shared store answers again after" in h.log.read_text(), 10,
                 "the log says the store is back")


def test_a_host_that_was_stopped_or_killed_catches_up_and_applies_nothing_twice(hosts, pg):
    a, b = hosts("a"), hosts("b")
    assert not a.tool(command="create", path="/memories/one.md", file_text="1\n")["is_error"]
    wait_for(lambda: read(b.mnt / "one.md") == "1\n", 10, "b has one")
    b.stop(signal.SIGKILL)
    for i in range(5):
        assert not a.tool(command="create", path=f"/memories/while-{i}.md", file_text=f"{i}\n")["is_error"]
    b.mount()
    wait_for(lambda: read(b.mnt / "while-4.md") == "4\n", 15, "b caught up")
    # A killed mid-stream: every acknowledged change is there once.
    stop = threading.Event()
    acked = []

    def writer():
        i = 0
        while not stop.is_set():
            r = a.tool(command="create", path=f"/memories/stream-{i}.md", file_text=f"{i}\n")
            if not r["is_error"]:
                acked.append(i)
            i += 1

    t = threading.Thread(target=writer)
    t.start()
    time.sleep(1.0)
    a.stop(signal.SIGKILL)
    stop.set()
    t.join()
    a.mount()
    for i in acked:
        wait_for(lambda: read(b.mnt / f"stream-{i}.md") == f"{i}\n", 15, f"stream-{i} on b")
    wait_for(lambda: sorted(os.listdir(a.mnt)) == sorted(os.listdir(b.mnt)), 15, "same trees")
    # No batch is in the database twice, and each host's history matches it.
    dup = pg.sql("SELECT origin, batch, count(*) FROM memfs_batches GROUP BY 1, 2 HAVING count(*) > 1")
    assert dup == []
    versions = {r[0] for r in pg.sql("""SELECT r->>'version' FROM memfs_batches,
        json_array_elements(changes::json) c, json_array_elements(c->'rows') r WHERE store = 'team'""")}
    for h in (a, b):
        mine = [r["version"] for r in h.log_rows()]
        assert len(mine) == len(set(mine)), "a version twice in a host's history"
        assert set(mine) == versions


def test_stores_in_one_database_are_kept_apart(hosts):
    a = hosts("a", store="left")
    b = hosts("b", store="right")
    a2 = hosts("a2", store="left")
    assert not a.tool(command="create", path="/memories/l.md", file_text="left\n")["is_error"]
    assert not b.tool(command="create", path="/memories/r.md", file_text="right\n")["is_error"]
    wait_for(lambda: read(a2.mnt / "l.md") == "left\n", 10, "same store shares")
    time.sleep(1.5)
    assert read(a2.mnt / "r.md") is None
    assert read(b.mnt / "l.md") is None


def test_a_bad_url_is_a_clear_error(memfs_bin, tmp_path):
    for url, says in [
        ("postgres://u@127.0.0.1:1/db", "store=NAME"),
        ("postgres://u@127.0.0.1:1/db?store=../x", "a store's name"),
    ]:
        out = subprocess.run([memfs_bin, "--data", url, "exec", '{"command":"view","path":"/memories"}'],
                             capture_output=True, text=True, cwd=tmp_path, timeout=30)
        assert out.returncode == 2, out
        assert says in out.stderr, out.stderr
        assert str(tmp_path) not in out.stderr


def test_what_could_not_be_sent_before_stopping_is_kept_and_sent_by_the_next_start(hosts, pg):
    a, b = hosts("a"), hosts("b")
    assert not a.tool(command="create", path="/memories/x.md", file_text="x\n")["is_error"]
    wait_for(lambda: read(b.mnt / "x.md") == "x\n", 10, "b has it")
    pg.crash()
    (b.mnt / "late.md").write_text("written while down\n")
    os.unlink(b.mnt / "x.md")
    b.stop()
    said = b.log.read_text()
    assert "could not take 2 path(s) before stopping" in said, said
    assert (b.cache / ".memfs" / "unsent.json").exists()
    pg.start()
    b.mount()
    wait_for(lambda: read(a.mnt / "late.md") == "written while down\n", 30, "sent by the next start")
    wait_for(lambda: read(a.mnt / "x.md") is None, 10, "the delete too")
    assert not (b.cache / ".memfs" / "unsent.json").exists()


def test_mcp_and_the_history_commands_work_on_a_shared_store(hosts, pg):
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    a, b = hosts("a"), hosts("b")

    async def agent():
        params = StdioServerParameters(command=a.memfs, args=a.args("mcp")[1:])
        async with Client(params) as client:
            r = await client.call_tool("memory", {"command": "create", "path": "/memories/m.md",
                                                  "file_text": "first\n"})
            assert not r.is_error, r
            r = await client.call_tool("memory", {"command": "str_replace", "path": "/memories/m.md",
                                                  "old_str": "first", "new_str": "second"})
            assert not r.is_error, r

    anyio.run(agent)
    wait_for(lambda: read(b.mnt / "m.md") == "second\n", 10, "b has the MCP agent's change")
    rows = [r for r in b.log_rows() if r["path"] == "/memories/m.md"]
    assert [r["op"] for r in rows] == ["write", "create"], rows
    assert rows[0]["actor"]["door"] == "mcp", rows
    # A person on B takes A's agent's change back with `memfs revert`; A has it.
    first = rows[1]["version"]
    out = subprocess.run(b.args("revert", first), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out
    wait_for(lambda: read(a.mnt / "m.md") == "first\n", 10, "the revert reached a")
    rows = [r for r in a.log_rows() if r["path"] == "/memories/m.md"]
    assert rows[0]["op"] == "revert", rows
    out = subprocess.run(a.args("diff", rows[1]["version"], rows[0]["version"]), capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and "-second" in out.stdout and "+first" in out.stdout, out


def test_what_one_host_writes_is_found_by_search_on_the_other(hosts, pg):
    a, b = hosts("a"), hosts("b")

    def found(host, query):
        out = subprocess.run(host.args("search", "--json", "--", query), capture_output=True,
                             text=True, timeout=60)
        assert out.returncode in (0, 1), out
        return [r["path"] for r in json.loads(out.stdout)["results"]]

    r = a.tool(command="create", path="/memories/notes/zoo.md", file_text="the quokka smiles\n")
    assert not r["is_error"], r
    # B's index takes in A's change as B's copy does (its journal records it).
    wait_for(lambda: found(b, "quokka") == ["/memories/notes/zoo.md"], 10, "b finds a's create")
    # A person's save on B's mount is found on A; what A's agent changed
    # next is found as it is now, and not as it was, on both.
    (b.mnt / "people.md").write_text("Ana prefers the axolotl\n")
    wait_for(lambda: found(a, "axolotl") == ["/memories/people.md"], 10, "a finds b's save")
    r = a.tool(command="str_replace", path="/memories/notes/zoo.md", old_str="quokka", new_str="wombat")
    assert not r["is_error"], r
    for host in (a, b):
        wait_for(lambda: found(host, "wombat") == ["/memories/notes/zoo.md"], 10, "the write found")
        assert found(host, "quokka") == []


def failing_and_plain(pg, tmp_path, memfs_bin, failpoints_bin, failpoints, flags=()):
    """Host A, a failpoints build mounted with FAILPOINTS set, and host B,
    the plain build, both mounted on one store (each with `flags`)."""
    a = Host(failpoints_bin, pg.url("team"), tmp_path, "a")
    b = Host(memfs_bin, pg.url("team"), tmp_path, "b")
    a.flags = b.flags = list(flags)
    os.environ["FAILPOINTS"] = failpoints
    try:
        a.mount()
    finally:
        os.environ.pop("FAILPOINTS", None)
    b.mount()
    return a, b


def save_as_an_editor_does(path, text: str, tag: str):
    """A tmp file written, then renamed over `path` (vim's and Claude Code's way)."""
    tmp = path.with_name(f"{path.name}.tmp.{tag}")
    tmp.write_text(text)
    os.rename(tmp, path)


def race_on_two_hosts(a, b, b_text: str, a_text: str):
    """Both hosts show MEMORY.md at one version; B saves `b_text` over it,
    the store takes it, then A (which follows the store 3 s late) saves
    `a_text` over the same version before it has seen B's: A's save loses
    the race."""
    md_a, md_b = a.mnt / "MEMORY.md", b.mnt / "MEMORY.md"
    save_as_an_editor_does(md_b, "# Memory\n- one\n", "b0")
    wait_for(lambda: read(md_a) == "# Memory\n- one\n", 20, "a shows MEMORY.md")
    # A's catch-ups of it are over: its next one starts 3 s after a wake.
    time.sleep(3.5)
    save_as_an_editor_does(md_b, b_text, "b1")
    wait_for(lambda: sum(r["path"] == "/memories/MEMORY.md" for r in b.log_rows()) >= 2, 10,
             "the store took b's save")
    assert read(md_a) == "# Memory\n- one\n", "a must not have seen b's save yet"
    save_as_an_editor_does(md_a, a_text, "a1")


def settled_on(hosts, text: str):
    """Every host's MEMORY.md is `text`, and no editor's tmp file is left."""
    for host in hosts:
        wait_for(lambda: read(host.mnt / "MEMORY.md") == text, 20, f"{host.mnt} shows the outcome")
        wait_for(lambda: sorted(os.listdir(host.mnt)) == ["MEMORY.md"], 10, f"{host.mnt}: no tmp file")


def test_two_hosts_saving_one_file_from_one_version_keep_both_edits(pg, tmp_path, memfs_bin, failpoints_bin):
    """Two people each add a line to MEMORY.md on their host, from the same
    version, and A's save loses the race. When B's change arrives, A merges
    the two against the version both started from: both hosts end with both
    lines (B's first: the store took it first), no editor's tmp file is left
    anywhere, and nothing is recorded as an overwrite."""
    a, b = failing_and_plain(pg, tmp_path, memfs_bin, failpoints_bin, "shared::follow-off=sleep(3000)")
    try:
        race_on_two_hosts(a, b, "# Memory\n- one\n- from b\n", "# Memory\n- one\n- from a\n")
        settled_on((a, b), "# Memory\n- one\n- from b\n- from a\n")
        rows = a.log_rows()
        assert not [r for r in rows if r["op"] == "overwrite"], rows
        merged = [r for r in rows if r.get("note", "").startswith("merged:")]
        assert len(merged) == 1 and merged[0]["actor"]["kind"] == "person", rows
        # It replaces b's version: the history reads b's save, then the merge.
        before = next(r for r in rows if r["version"] == merged[0]["replaces"])
        assert subprocess.run(a.args("show", str(before["version"])), capture_output=True, text=True,
                              timeout=60).stdout == "# Memory\n- one\n- from b\n"
    finally:
        a.stop()
        b.stop()


def test_overlapping_saves_on_two_hosts_keep_one_and_record_the_other(pg, tmp_path, memfs_bin, failpoints_bin):
    """The same race where both people changed the same line: the later
    save stays the file on both hosts, and the history records it as an
    overwrite of the other (whose text stays one revert away); no tmp file
    is left."""
    a, b = failing_and_plain(pg, tmp_path, memfs_bin, failpoints_bin, "shared::follow-off=sleep(3000)")
    try:
        race_on_two_hosts(a, b, "# Memory\n- one, said b\n", "# Memory\n- one, said a\n")
        settled_on((b, a), "# Memory\n- one, said a\n")
        rows = a.log_rows()
        over = [r for r in rows if r["op"] == "overwrite" and r["path"] == "/memories/MEMORY.md"]
        assert len(over) == 1, rows
        out = subprocess.run(a.args("show", str(over[0]["replaces"])), capture_output=True, text=True, timeout=60)
        assert out.stdout == "# Memory\n- one, said b\n", out
        # The review page offers the other text; a real browser takes it,
        # and both hosts show it.
        said = use_instead(a.args(), over[0]["replaces"])
        assert "the file is version" in said, said
        settled_on((a, b), "# Memory\n- one, said b\n")
    finally:
        a.stop()
        b.stop()


def agents_create_races(a, b, b_edit: dict, a_text: str):
    """Both hosts show MEMORY.md at one version; B's agent edits it (the
    store takes it), then A's agent, which follows the store 3 s late,
    creates the file whole from the version it saw: A's create loses the
    race and is run again on B's text."""
    r = b.tool(command="create", path="/memories/MEMORY.md", file_text="# Memory\n- one\n- two\n- three\n")
    assert not r["is_error"], r
    wait_for(lambda: read(a.mnt / "MEMORY.md") == "# Memory\n- one\n- two\n- three\n", 20, "a shows MEMORY.md")
    time.sleep(3.5)
    r = b.tool(command="str_replace", path="/memories/MEMORY.md", **b_edit)
    assert not r["is_error"], r
    assert read(a.mnt / "MEMORY.md") == "# Memory\n- one\n- two\n- three\n", "a must not have seen b's edit yet"
    r = a.tool(command="create", path="/memories/MEMORY.md", file_text=a_text)
    assert not r["is_error"] and r["content"] == "File created successfully at: /memories/MEMORY.md", r


def test_an_agents_create_racing_another_host_is_merged_not_overwritten(pg, tmp_path, memfs_bin, failpoints_bin):
    """Issue 50: with `--create-overwrites`, an agent's `create` of a whole
    file that lost the race to another host's edit of other lines holds
    both (it used to save over the winner); the same lines: the create's
    text is the file and the winner's is flagged as the version it
    overwrote. The agent's next view says so, once. (Without the flag a
    create over an existing file is refused, race or not: the agent hears
    "already exists" and nothing is lost.)"""
    a, b = failing_and_plain(pg, tmp_path, memfs_bin, failpoints_bin, "shared::follow-off=sleep(3000)",
                             flags=["--create-overwrites"])
    try:
        agents_create_races(a, b, {"old_str": "- one", "new_str": "- ONE"}, "# Memory\n- one\n- two\n- THREE\n")
        both = "# Memory\n- ONE\n- two\n- THREE\n"
        for h in (a, b):
            wait_for(lambda: read(h.mnt / "MEMORY.md") == both, 20, f"{h.mnt} holds both edits")
        merged = [r for r in a.log_rows() if r.get("note", "").startswith("merged:")]
        assert len(merged) == 1 and merged[0]["actor"]["kind"] == "agent", merged
        view = a.tool(command="view", path="/memories/MEMORY.md")["content"]
        assert "on other lines: the file holds both, merged" in view, view
        assert "memfs:" not in a.tool(command="view", path="/memories/MEMORY.md")["content"]

        # The same line, changed by both: the agent's text is the file, B's
        # the version it overwrote (flagged), and both hosts agree.
        time.sleep(3.5)
        agents_create_races(a, b, {"old_str": "- two", "new_str": "- two, said b"},
                            "# Memory\n- one\n- two, said a\n- three\n")
        mine = "# Memory\n- one\n- two, said a\n- three\n"
        for h in (a, b):
            wait_for(lambda: read(h.mnt / "MEMORY.md") == mine, 20, f"{h.mnt} holds the create's text")
        over = [r for r in a.log_rows() if r["op"] == "overwrite"]
        assert len(over) == 1 and over[0]["actor"]["kind"] == "agent", over
        out = subprocess.run(a.args("show", str(over[0]["replaces"])), capture_output=True, text=True, timeout=60)
        assert out.stdout == "# Memory\n- one\n- two, said b\n- three\n", out
        view = a.tool(command="view", path="/memories/MEMORY.md")["content"]
        assert "on the same lines while this create was on its way" in view, view
    finally:
        a.stop()
        b.stop()


def test_quotes_and_every_byte_reach_the_other_host_intact(hosts, pg):
    """A batch's values go to the database inlined as literals (one round
    trip): quotes, backslashes, SQL in a name and every byte value arrive
    as they were, through both doors."""
    a, b = hosts("a"), hosts("b")
    name = "o'neil's notes; DROP TABLE memfs_batches; --.md"
    text = "it's \\'quoted\\' \\\\ and ''doubled'' ☃ $$ E'\\x00' %_\n"
    r = a.tool(command="create", path=f"/memories/{name}", file_text=text)
    assert not r["is_error"], r
    every = bytes(range(256)) * 8
    (a.mnt / "bytes.bin").write_bytes(every)
    wait_for(lambda: read(b.mnt / name) == text, 10, "b shows the quoted name and text")
    wait_for(lambda: (b.mnt / "bytes.bin").exists()
             and (b.mnt / "bytes.bin").read_bytes() == every, 10, "b shows every byte")
    assert "''doubled'' ☃ $$" in b.tool(command="view", path=f"/memories/{name}")["content"]
    # The database holds the name as it is.
    paths = [r[0] for r in pg.sql("SELECT path FROM memfs_touches WHERE path LIKE '%neil%'")]
    assert any(p.endswith(name) for p in paths), paths


def test_a_host_stopped_holding_the_head_holds_the_others_up_for_seconds_only(
        pg, tmp_path, memfs_bin, failpoints_bin):
    """A host that stops inside a batch's transaction (as one cut off
    does) holds the store's head: the server ends its session once it is
    idle in the transaction for seconds, so another host's write goes
    through while the first is still stopped; the first then finds its
    COMMIT refused, asks the database (holding the head), and sends the
    batch again."""
    a, b = failing_and_plain(pg, tmp_path, memfs_bin, failpoints_bin, "shared-holding-head=1*sleep(25000)")
    try:
        first = {}
        stuck = threading.Thread(target=lambda: first.update(
            a.tool(command="create", path="/memories/from-a.md", file_text="a\n")))
        stuck.start()
        # A holds the head (its first batch, stopped inside its transaction).
        wait_for(lambda: pg.sql(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'memfs' "
            "AND state = 'idle in transaction'")[0][0] == "1", 10, "a holds the head")
        r = b.tool(command="create", path="/memories/from-b.md", file_text="b\n")
        assert not r["is_error"], r
        assert stuck.is_alive(), "b's write went through only once a was going again"
        stuck.join(timeout=60)
        assert not stuck.is_alive()
        assert first and not first["is_error"], first
        for h in (a, b):
            wait_for(lambda: read(h.mnt / "from-a.md") == "a\n"
                     and read(h.mnt / "from-b.md") == "b\n", 15, "both hosts show both")
        rows = pg.sql("SELECT origin, batch FROM memfs_batches")
        assert len(rows) == len({tuple(r) for r in rows}), rows
    finally:
        a.stop()
        b.stop()


def test_a_host_whose_disk_refuses_its_journal_loses_nothing_and_takes_it_back(
        pg, tmp_path, memfs_bin, failpoints_bin):
    """Host A's own journal cannot be flushed (every flush after its start
    fails): the shared store holds every change, so A's agents' writes and
    a person's save still succeed, and B shows them. A's plain files are
    never ahead of its journal, so after a restart A takes the changes back
    from the database (as the versions they were: no `found` row, no
    version twice)."""
    a, b = failing_and_plain(pg, tmp_path, memfs_bin, failpoints_bin, "journal::sync=2*off->return(EIO)")
    try:
        for i in range(5):
            r = a.tool(command="create", path=f"/memories/f{i}.md", file_text=f"{i}\n")
            assert not r["is_error"], r
        (a.mnt / "person.md").write_text("saved\n")
        for i in range(5):
            wait_for(lambda: read(b.mnt / f"f{i}.md") == f"{i}\n", 10, f"b shows f{i}")
        wait_for(lambda: read(b.mnt / "person.md") == "saved\n", 10, "b shows the save")
        assert "refuses this host's copy of the journal" in a.log.read_text()
        a.stop()
        a.memfs = memfs_bin
        a.mount()
        for i in range(5):
            assert read(a.mnt / f"f{i}.md") == f"{i}\n"
        assert read(a.mnt / "person.md") == "saved\n"
        rows = a.log_rows()
        assert not [r for r in rows if r["op"] == "found"], rows
        ids = [r["version"] for r in rows]
        assert len(ids) == len(set(ids)) == 6, rows
    finally:
        a.stop()
        b.stop()


def test_a_batch_whose_frame_a_crash_lost_is_taken_back_after_a_second_crash(
        pg, tmp_path, memfs_bin, failpoints_bin):
    """Host A's frame of a batch the database holds is lost (the failpoint
    drops the unflushed frame and aborts, as a power cut after the answer
    would). A starts again with its follower held back, commits and flushes
    a newer batch, and is killed before it took the lost one back. At its
    next start A still takes the lost batch back from the database: the
    journal says which of A's batches it holds (once, it was a number below
    which all were taken as held, and the lost one was skipped for ever)."""
    a, b = failing_and_plain(pg, tmp_path, memfs_bin, failpoints_bin,
                             "journal::lose-deferred=return")
    try:
        # (The frame that begins a segment is flushed before the answer.)
        r = a.tool(command="create", path="/memories/first.md", file_text="first\n")
        assert not r["is_error"], r
        a.tool(command="create", path="/memories/lost.md", file_text="lost\n")
        wait_for(lambda: a.proc.poll() is not None, 15, "a stopped at the power cut")
        wait_for(lambda: read(b.mnt / "lost.md") == "lost\n", 10, "the database holds lost.md")
        a.stop(signal.SIGKILL)
        os.environ["FAILPOINTS"] = "shared::follow-off=return"
        try:
            a.mount()
        finally:
            os.environ.pop("FAILPOINTS", None)
        assert read(a.mnt / "lost.md") is None, "the follower was held back"
        r = a.tool(command="create", path="/memories/newer.md", file_text="newer\n")
        assert not r["is_error"], r
        # A person's fsync: every frame before it is on the disk.
        with open(a.mnt / "synced.md", "w") as f:
            f.write("synced\n")
            f.flush()
            os.fsync(f.fileno())
        assert read(a.mnt / "lost.md") is None, "still not taken back"
        a.stop(signal.SIGKILL)
        a.memfs = memfs_bin
        a.mount()
        wait_for(lambda: read(a.mnt / "lost.md") == "lost\n", 15, "a took lost.md back")
        for name, text in (("first.md", "first\n"), ("newer.md", "newer\n"),
                           ("synced.md", "synced\n")):
            assert read(a.mnt / name) == text
            wait_for(lambda: read(b.mnt / name) == text, 10, f"b shows {name}")
        wait_for(lambda: sorted(os.listdir(a.mnt)) == sorted(os.listdir(b.mnt)), 15, "same trees")
        mine = [r["version"] for r in a.log_rows()]
        assert len(mine) == len(set(mine)), "a version twice in a's history"
    finally:
        a.stop()
        b.stop()


def test_a_store_that_cannot_be_reached_and_has_no_copy_here_is_a_clear_error(pg, memfs_bin, tmp_path):
    """A wrong port, user or database on a host with no copy of the store:
    exit 2 with the server's address and the cause in plain words; nothing
    answered as an empty memory. With a copy, the copy is served, and a view
    says it may be stale and since when."""
    view = '{"command":"view","path":"/memories"}'
    port = pg.base.rsplit(":", 1)[1].split("/")[0]
    cases = [
        ("postgres://postgres@127.0.0.1:1/postgres?store=team", "connection refused"),
        (f"postgres://nobody@127.0.0.1:{port}/postgres?store=team", 'role "nobody" does not exist'),
        (f"postgres://postgres@127.0.0.1:{port}/nodb?store=team", 'database "nodb" does not exist'),
    ]
    for i, (url, cause) in enumerate(cases):
        r = subprocess.run([memfs_bin, "--data", url, "--cache", str(tmp_path / f"c{i}"), "exec", view],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, r
        assert r.stdout == "", r
        assert cause in r.stderr, r.stderr
        assert url.split("?")[0] in r.stderr, r.stderr
    # A host with a copy: served from it while the database is away.
    url = pg.url("team")
    made = subprocess.run([memfs_bin, "--data", url, "--cache", str(tmp_path / "copy"), "exec",
                           '{"command":"create","path":"/memories/kept.md","file_text":"kept\\n"}'],
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made
    pg.crash()
    seen = subprocess.run([memfs_bin, "--data", url, "--cache", str(tmp_path / "copy"), "exec", view],
                          capture_output=True, text=True, timeout=60)
    assert seen.returncode == 0 and "kept.md" in seen.stdout, seen
    assert "cannot be reached since" in seen.stdout and "may be stale" in seen.stdout, seen
    pg.start()
    seen = subprocess.run([memfs_bin, "--data", url, "--cache", str(tmp_path / "copy"), "exec", view],
                          capture_output=True, text=True, timeout=60)
    assert seen.returncode == 0 and "kept.md" in seen.stdout, seen
    assert "may be stale" not in seen.stdout, seen
