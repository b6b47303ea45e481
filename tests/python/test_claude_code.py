"""The real Claude Code (pinned by scripts/claude_code.sh) with the memfs
the Python package carries (the wheel's binary), offline: its Messages API is the scripted one on loopback, its HOME a fresh
directory. The scripted model calls memfs's memory tool through Claude
Code's MCP client, set up with the README's own line (`claude mcp add memfs
-- MEMFS --data DIR mcp`), and every result must come back exactly.

CLAUDE_BIN names Claude Code's binary (CI=true: required)."""
import json
import os
import pathlib
import subprocess
import sys
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from scripted_api import ScriptedApi  # noqa: E402
from pngs import png  # noqa: E402
from conversation import script  # noqa: E402

CI = os.environ.get("CI") == "true"
CLAUDE = os.environ.get("CLAUDE_BIN")
TOOL = "mcp__memfs__memory"  # mcp__<the name given to claude mcp add>__<memfs' tool>


@pytest.fixture(scope="module")
def memfs_bin(tmp_path_factory):
    """The memfs a user of the packages has: the binary the wheel carries
    (MEMFS_WHEEL, as CI builds it); without a wheel, MEMFS_BIN."""
    import zipfile
    wheel = os.environ.get("MEMFS_WHEEL")
    if not wheel:
        if CI:
            pytest.fail("CI=true needs MEMFS_WHEEL (scripts/package_python.sh builds it)")
        return os.environ.get("MEMFS_BIN", str(pathlib.Path(__file__).resolve().parents[2] / "target/release/memfs"))
    out = tmp_path_factory.mktemp("wheel-bin") / "memfs"
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".data/scripts/memfs"))
        out.write_bytes(z.read(name))
    out.chmod(0o755)
    return str(out)


@pytest.fixture
def claude(tmp_path):
    if not CLAUDE or not os.path.exists(CLAUDE):
        if CI:
            pytest.fail("CI=true needs CLAUDE_BIN (scripts/claude_code.sh installs Claude Code)")
        pytest.skip("needs CLAUDE_BIN")
    home = tmp_path / "home"
    work = tmp_path / "work"
    home.mkdir()
    work.mkdir()

    def run(args, api=None, timeout=180):
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),  # nothing of anyone's own configuration
            "ANTHROPIC_API_KEY": "sk-ant-scripted",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            # MCP tools in the prompt itself, not deferred behind ToolSearch
            # (a direct call to a deferred tool works, but its error results
            # get a note about the schema appended).
            "ENABLE_TOOL_SEARCH": "false",
        }
        if api is not None:
            env["ANTHROPIC_BASE_URL"] = api.url
        return subprocess.run([CLAUDE, *args], env=env, cwd=work, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=timeout)

    return run


def test_claude_code_calls_the_memory_tool_through_mcp_exactly(claude, memfs_bin, tmp_path):
    data = tmp_path / "memory"
    (data / "memories").mkdir(parents=True)
    picture = png()
    (data / "memories" / "pic.png").write_bytes(picture)
    # The README's line, as a user types it (scope: this project).
    added = claude(["mcp", "add", "memfs", "--", memfs_bin, "--data", str(data), "mcp"])
    assert added.returncode == 0, added.stderr
    turns = script(str(len(picture)), tool=TOOL, image=False)
    with ScriptedApi(turns, main_tool=TOOL) as api:
        run = claude(["-p", "Remember where Ana lives, then tidy up.", "--allowedTools", TOOL], api)
        assert run.returncode == 0, (run.stdout, run.stderr[-3000:])
        api.check()
    assert run.stdout.strip().startswith("I noted that Ana"), run.stdout
    log = subprocess.run([memfs_bin, "--data", str(data), "log", "--json"], capture_output=True, text=True)
    assert log.returncode == 0, log.stderr
    rows = [json.loads(line) for line in log.stdout.splitlines()]
    ops = [(r["op"], r["path"]) for r in reversed(rows)]
    assert ops == [
        ("found", "/memories/pic.png"),
        ("create", "/memories/notes/ana.md"),
        ("write", "/memories/notes/ana.md"),
        ("write", "/memories/notes/ana.md"),
        ("rename", "/memories/people/ana.md"),
        ("delete", "/memories/people/ana.md"),
    ], ops
    agents = {json.dumps(r["actor"], sort_keys=True) for r in rows if r["op"] != "found"}
    assert agents == {json.dumps({"kind": "agent", "door": "mcp", "session": "claude-code"}, sort_keys=True)}, agents


NO_READ_BACK = " (file state is current in your context \u2014 no need to Read it back)"


def write_and_edit(md, topic):
    """The scripted model's turns: Write a topic file, Read MEMORY.md, Edit it."""
    return [
        [{"type": "tool_use", "id": "toolu_01", "name": "Write",
          "input": {"file_path": topic, "content": "Run pytest -q.\n"},
          "expect": {"content": f"File created successfully at: {topic}{NO_READ_BACK}", "is_error": False}}],
        [{"type": "tool_use", "id": "toolu_02", "name": "Read", "input": {"file_path": md}}],
        [{"type": "tool_use", "id": "toolu_03", "name": "Edit",
          "input": {"file_path": md, "old_string": "kept from before", "new_string": "replaced"},
          "expect": {"content": f"The file {md} has been updated successfully.{NO_READ_BACK}", "is_error": False}}],
        [{"type": "text", "text": "Memory written."}],
    ]


def wait_mounted(mnt, proc, timeout=20.0):
    import time
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.ismount(mnt):
            return
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.05)
    raise AssertionError(f"{mnt} was not mounted")


def test_claude_codes_auto_memory_on_a_memfs_mount_is_the_agents(claude, memfs_bin, tmp_path):
    """autoMemoryDirectory set to a memfs mount: Claude Code's own Write and
    Edit of MEMORY.md and a topic file land in the memory, and memfs credits
    them to the agent (its process, not a worker thread, and not a person)."""
    if not (os.path.exists("/dev/fuse") and os.geteuid() == 0):
        if CI:
            pytest.fail("CI=true needs /dev/fuse and root")
        pytest.skip("needs /dev/fuse and root")
    import signal
    data, mnt = tmp_path / "memory", tmp_path / "mnt"
    mnt.mkdir()
    settings = tmp_path / "home" / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"autoMemoryDirectory": str(mnt)}))
    md, topic = f"{mnt}/MEMORY.md", f"{mnt}/build.md"
    turns = [
        [{"type": "tool_use", "id": "toolu_01", "name": "Write",
          "input": {"file_path": md, "content": "# Memory\n- [Build](build.md) \u2014 how to build\n"},
          "expect": {"content": f"File created successfully at: {md}{NO_READ_BACK}", "is_error": False}},
         {"type": "tool_use", "id": "toolu_02", "name": "Write",
          "input": {"file_path": topic, "content": "Run cargo build.\n"},
          "expect": {"content": f"File created successfully at: {topic}{NO_READ_BACK}", "is_error": False}}],
        [{"type": "tool_use", "id": "toolu_03", "name": "Edit",
          "input": {"file_path": md, "old_string": "how to build", "new_string": "how to build and test"},
          "expect": {"content": f"The file {md} has been updated successfully.{NO_READ_BACK}", "is_error": False}}],
        [{"type": "text", "text": "Memory written."}],
    ]
    mount = subprocess.Popen([memfs_bin, "--data", str(data), "mount", str(mnt)], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_mounted(str(mnt), mount)
        with ScriptedApi(turns, main_tool="Write") as api:
            run = claude(["-p", "Remember how to build this project.", "--allowedTools", "Write,Edit,Read"], api)
            assert run.returncode == 0, (run.stdout, run.stderr[-3000:])
            api.check()
        assert run.stdout.strip() == "Memory written."
        assert (mnt / "MEMORY.md").read_text() == "# Memory\n- [Build](build.md) \u2014 how to build and test\n"
        assert (mnt / "build.md").read_text() == "Run cargo build.\n"
    finally:
        mount.send_signal(signal.SIGTERM)
        assert mount.wait(timeout=30) == 0, mount.stderr.read()
    log = subprocess.run([memfs_bin, "--data", str(data), "log", "--json", "--all"], capture_output=True, text=True)
    assert log.returncode == 0, log.stderr
    rows = [json.loads(line) for line in log.stdout.splitlines()]
    assert rows, "nothing in the history"
    actors = {(r["actor"]["kind"], r["actor"].get("door"), r["actor"].get("process")) for r in rows}
    assert actors == {("agent", "mount", "claude")}, [r["actor"] for r in rows]
    # One process: the claude process, not the threads that wrote.
    pids = {r["actor"]["pid"] for r in rows}
    assert len(pids) == 1, pids
    # Each file's history ends at what Claude Code left there.
    final = {r["path"] for r in rows if r["op"] in ("create", "write", "rename", "overwrite")}
    assert {"/memories/MEMORY.md", "/memories/build.md"} <= final, final


def test_memfs_claude_code_enable_puts_this_projects_auto_memory_on_memfs(claude, memfs_bin, tmp_path):
    """`memfs claude-code enable` in a project: what Claude Code kept becomes
    the memory's first versions, the memory is mounted where Claude Code
    looks, Claude Code's Write and Edit land there as the agent's, `memfs
    undo --by` takes them back, `disable` puts the plain directory back;
    each run twice changes nothing the second time."""
    if not (os.path.exists("/dev/fuse") and os.geteuid() == 0):
        if CI:
            pytest.fail("CI=true needs /dev/fuse and root")
        pytest.skip("needs /dev/fuse and root")
    home, work = tmp_path / "home", tmp_path / "work"
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    key = "".join(c if c.isascii() and c.isalnum() else "-" for c in str(work))
    place = home / ".claude" / "projects" / key / "memory"
    place.mkdir(parents=True)
    (place / "MEMORY.md").write_text("# Memory\n- [Old](old.md) \u2014 kept from before\n")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}

    def memfs(*args):
        return subprocess.run([memfs_bin, *args], cwd=work, env=env, capture_output=True, text=True, timeout=60)

    on = memfs("claude-code", "enable")
    assert on.returncode == 0, on.stderr
    assert "1 file(s) already there are its first versions" in on.stdout, on.stdout
    assert os.path.ismount(place)
    again = memfs("claude-code", "enable")
    assert again.returncode == 0 and "nothing changed" in again.stdout, again.stdout
    data = home / ".local" / "share" / "memfs" / "claude-code" / key
    md, topic = f"{place}/MEMORY.md", f"{place}/testing.md"
    turns = write_and_edit(md, topic)
    try:
        with ScriptedApi(turns, main_tool="Write") as api:
            run = claude(["-p", "Remember how to test.", "--allowedTools", "Write,Edit,Read"], api)
            assert run.returncode == 0, (run.stdout, run.stderr[-3000:])
            api.check()
        # Claude Code was told its memory is there (the default place, now a mount).
        system = json.dumps(api.requests[0].get("system"))
        assert f"persistent file-based memory at `{place}/`" in system, system[:2000]
        assert "replaced" in (place / "MEMORY.md").read_text()
        log = memfs("--data", str(data), "log", "--json")
        rows = [json.loads(line) for line in log.stdout.splitlines()]
        claude_rows = [r for r in rows if r["actor"].get("process") == "claude"]
        assert claude_rows and all(r["actor"]["kind"] == "agent" for r in claude_rows), rows
        assert any(r["op"] == "found" and r["path"] == "/memories/MEMORY.md" for r in rows), rows
        # The page's review queue lists them as the agent's session, with one
        # button for all of it.
        review = review_page(memfs_bin, data, env)
        assert "agent:mount(claude)" in review and "Undo this session" in review, review
        # Claude Code saves through X.tmp.<pid>.<hex> renamed over X: one
        # change of X, in the log and on the page, no temporary file.
        assert "2 changes to 2 files by 1 session" in review, review
        assert ".tmp." not in review, review
        text = memfs("claude-code", "log").stdout
        assert text.count("agent:mount(claude)") == 2, text
        assert all(".tmp." not in line.split("saved through")[0] for line in text.splitlines()), text
        assert "saved through MEMORY.md.tmp." in text, text
        # Everything Claude Code did, taken back in one step, on the command
        # line: the page follows, nothing waits for review any more.
        undo = memfs("claude-code", "undo", "--by", "agent:mount(claude)")
        assert undo.returncode == 0, undo.stderr
        review = review_page(memfs_bin, data, env)
        assert "0 changes to 0 files by 0 sessions" in review, review
        assert (place / "MEMORY.md").read_text() == "# Memory\n- [Old](old.md) \u2014 kept from before\n"
        assert not (place / "testing.md").exists()
    finally:
        off = memfs("claude-code", "disable")
    assert off.returncode == 0, off.stderr
    assert not os.path.ismount(place)
    assert (place / "MEMORY.md").read_text() == "# Memory\n- [Old](old.md) \u2014 kept from before\n"
    again = memfs("claude-code", "disable")
    assert again.returncode == 0 and "nothing changed" in again.stdout, again.stdout


def test_two_machines_claude_code_meets_one_shared_memory(claude, memfs_bin, tmp_path):
    """Two machines (two HOMEs, two checkouts of one repository at different
    paths), each `memfs claude-code enable --shared URL` on one PostgreSQL:
    the store is named after the remote, so the second machine's Claude Code
    reads what the first one's wrote."""
    from shared_hosts import Postgres
    if not (os.geteuid() == 0 and os.path.exists("/dev/fuse") and os.path.exists("/usr/lib/postgresql/15/bin/pg_ctl")):
        if CI:
            pytest.fail("CI=true needs root, /dev/fuse and PostgreSQL 15")
        pytest.skip("needs root, /dev/fuse and PostgreSQL 15")
    pg = Postgres(tmp_path / "pg")
    pg.start()
    machines = []
    try:
        two_machines_on_one_store(memfs_bin, tmp_path, pg, repo="project",
                                  checkouts=("src/project", "work/elsewhere/project-copy"), machines=machines)
        (home_a, work_a, place_a, _), (home_b, work_b, place_b, _) = machines
        md_a, md_b = f"{place_a}/MEMORY.md", f"{place_b}/MEMORY.md"
        write = [
            [{"type": "tool_use", "id": "toolu_01", "name": "Write",
              "input": {"file_path": md_a, "content": "Shared note.\n"},
              "expect": {"content": f"File created successfully at: {md_a}{NO_READ_BACK}", "is_error": False}}],
            [{"type": "text", "text": "Written."}],
        ]
        with ScriptedApi(write, main_tool="Write") as api:
            run = claude_at(home_a, work_a, api, ["-p", "Remember.", "--allowedTools", "Write,Read"])
            assert run.returncode == 0, (run.stdout, run.stderr[-3000:])
            api.check()
        read = [
            [{"type": "tool_use", "id": "toolu_01", "name": "Read", "input": {"file_path": md_b},
              "expect": {"content": "1\tShared note.\n2\t", "is_error": False}}],
            [{"type": "text", "text": "Read."}],
        ]
        deadline = time.monotonic() + 10
        while not os.path.exists(md_b) and time.monotonic() < deadline:
            time.sleep(0.05)
        with ScriptedApi(read, main_tool="Read") as api:
            run = claude_at(home_b, work_b, api, ["-p", "What do you remember?", "--allowedTools", "Write,Read"])
            assert run.returncode == 0, (run.stdout, run.stderr[-3000:])
            api.check()
    finally:
        for home, work, place, env in machines:
            off = subprocess.run([memfs_bin, "claude-code", "disable"], cwd=work, env=env,
                                 capture_output=True, text=True, timeout=60)
            assert off.returncode == 0, off.stderr
        pg.remove()
    assert (machines[1][2] / "MEMORY.md").read_text() == "Shared note.\n"


def test_two_machines_claude_code_meets_one_memory_through_a_memfs_server(claude, memfs_bin, tmp_path):
    """Two machines (two HOMEs), each `memfs claude-code enable --store
    URL` on one memory store of a memfs server (`serve --http`), the
    store's key in ANTHROPIC_API_KEY at enable only: what the first
    machine's Claude Code writes, the second one's reads; the store holds
    it; the key is kept for later starts, readable by its user only."""
    import anthropic
    from http_server import Server
    if not (os.geteuid() == 0 and os.path.exists("/dev/fuse")):
        if CI:
            pytest.fail("CI=true needs root and /dev/fuse")
        pytest.skip("needs root and /dev/fuse")
    server = Server(memfs_bin, tmp_path / "root")
    admin = anthropic.Anthropic(api_key=server.token("--admin", "--name", "admin"), base_url=server.url,
                                max_retries=0)
    store = admin.beta.memory_stores.create(name="claude-code").id
    key = server.token("--name", "laptops", "--store", store)
    url = f"{server.url}/v1/memory_stores/{store}"
    machines = []
    try:
        for name in "ab":
            home, work = tmp_path / name / "home", tmp_path / name / "project"
            subprocess.run(["git", "init", "-q", str(work)], check=True)
            place = home / ".claude" / "projects" / "".join(
                c if c.isascii() and c.isalnum() else "-" for c in str(work)) / "memory"
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}
            on = subprocess.run([memfs_bin, "claude-code", "enable", "--store", url], cwd=work,
                                env={**env, "ANTHROPIC_API_KEY": key}, capture_output=True, text=True, timeout=60)
            assert on.returncode == 0, on.stderr
            assert f"shared store {store}" in on.stdout, on.stdout
            assert key not in on.stdout + on.stderr
            kept = next((home / ".config" / "memfs" / "keys").iterdir())
            assert kept.read_text() == key and kept.stat().st_mode & 0o077 == 0
            machines.append((home, work, place, env))
        (home_a, work_a, place_a, _), (home_b, work_b, place_b, _) = machines
        md_a, md_b = f"{place_a}/MEMORY.md", f"{place_b}/MEMORY.md"
        write = [
            [{"type": "tool_use", "id": "toolu_01", "name": "Write",
              "input": {"file_path": md_a, "content": "Shared note.\n"},
              "expect": {"content": f"File created successfully at: {md_a}{NO_READ_BACK}", "is_error": False}}],
            [{"type": "text", "text": "Written."}],
        ]
        with ScriptedApi(write, main_tool="Write") as api:
            run = claude_at(home_a, work_a, api, ["-p", "Remember.", "--allowedTools", "Write,Read"])
            assert run.returncode == 0, (run.stdout, run.stderr[-3000:])
            api.check()
        deadline = time.monotonic() + 20
        while not os.path.exists(md_b) and time.monotonic() < deadline:
            time.sleep(0.05)
        read = [
            [{"type": "tool_use", "id": "toolu_01", "name": "Read", "input": {"file_path": md_b},
              "expect": {"content": "1\tShared note.\n2\t", "is_error": False}}],
            [{"type": "text", "text": "Read."}],
        ]
        with ScriptedApi(read, main_tool="Read") as api:
            run = claude_at(home_b, work_b, api, ["-p", "What do you remember?", "--allowedTools", "Write,Read"])
            assert run.returncode == 0, (run.stdout, run.stderr[-3000:])
            api.check()
        listed = {m.path: m.content for m in admin.beta.memory_stores.memories.list(store, view="full")}
        assert listed == {"/MEMORY.md": "Shared note.\n"}, listed
    finally:
        for home, work, place, env in machines:
            off = subprocess.run([memfs_bin, "claude-code", "disable"], cwd=work, env=env,
                                 capture_output=True, text=True, timeout=60)
            assert off.returncode == 0, off.stderr
        assert server.stop() == 0, "".join(server.log)
    assert (machines[1][2] / "MEMORY.md").read_text() == "Shared note.\n"


def claude_at(home, work, api, args):
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "ANTHROPIC_API_KEY": "sk-ant-scripted",
        "ANTHROPIC_BASE_URL": api.url,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "ENABLE_TOOL_SEARCH": "false",
    }
    return subprocess.run([CLAUDE, *args], env=env, cwd=work, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=180)


def test_claude_code_on_two_machines_shares_one_memory_through_mcp(claude, memfs_bin, tmp_path):
    """The README's claude mcp add line with a shared store's URL, on two
    machines (two HOMEs, two caches): what the first machine's Claude Code
    creates through MCP, the second one's views, exactly."""
    from shared_hosts import Postgres
    if not (os.geteuid() == 0 and os.path.exists("/usr/lib/postgresql/15/bin/pg_ctl")):
        if CI:
            pytest.fail("CI=true needs root and PostgreSQL 15")
        pytest.skip("needs root and PostgreSQL 15")
    pg = Postgres(tmp_path / "pg")
    pg.start()
    try:
        url = f"{pg.base}?store=team"
        homes = []
        for name in ("a", "b"):
            home, work = tmp_path / name / "home", tmp_path / name / "work"
            home.mkdir(parents=True)
            work.mkdir(parents=True)
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}
            added = subprocess.run([CLAUDE, "mcp", "add", "memfs", "--", memfs_bin, "--data", url,
                                    "--cache", str(tmp_path / name / "cache"), "mcp"],
                                   cwd=work, env=env, capture_output=True, text=True, timeout=60)
            assert added.returncode == 0, added.stderr
            homes.append((home, work))
        f = "/memories/team/plan.md"
        create = [
            [{"type": "tool_use", "id": "toolu_01", "name": TOOL,
              "input": {"command": "create", "path": f, "file_text": "Ship on Friday.\n"},
              "expect": {"content": f"File created successfully at: {f}", "is_error": False}}],
            [{"type": "text", "text": "Noted."}],
        ]
        with ScriptedApi(create, main_tool=TOOL) as api:
            run = claude_at(*homes[0], api, ["-p", "Note the plan.", "--allowedTools", TOOL])
            assert run.returncode == 0, (run.stdout, run.stderr[-3000:])
            api.check()
        view = [
            [{"type": "tool_use", "id": "toolu_01", "name": TOOL, "input": {"command": "view", "path": f},
              "expect": {"content": f"Here's the content of {f} with line numbers:\n     1\tShip on Friday.",
                         "is_error": False}}],
            [{"type": "text", "text": "Friday."}],
        ]
        with ScriptedApi(view, main_tool=TOOL) as api:
            run = claude_at(*homes[1], api, ["-p", "What is the plan?", "--allowedTools", TOOL])
            assert run.returncode == 0, (run.stdout, run.stderr[-3000:])
            api.check()
    finally:
        pg.remove()


def review_page(memfs_bin, data, env, cwd=None):
    """The review page of `memfs web` beside the mount (with `data` None:
    `memfs claude-code web` in `cwd`), logged in with the printed link: its
    HTML."""
    import http.cookiejar
    import urllib.request
    args = ["--data", str(data), "web"] if data is not None else ["claude-code", "web"]
    web = subprocess.Popen([memfs_bin, *args], env=env, cwd=cwd, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
    try:
        url = web.stdout.readline().strip()
        assert "/login?t=" in url, url
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        opener.open(url, timeout=30).read()
        return opener.open(url.split("/login")[0] + "/review", timeout=30).read().decode()
    finally:
        web.terminate()
        web.wait(timeout=30)
        # Nothing of it keeps serving (`memfs claude-code web` ran the page
        # as a child that outlived a SIGTERM to it).
        if cwd is not None:
            left = []
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
                    if (os.readlink(f"/proc/{pid}/cwd") == str(cwd)
                            and open(f"/proc/{pid}/comm").read().strip() == "memfs" and b"web" in argv):
                        left.append(pid)
                except OSError:
                    pass
            assert not left, f"memfs web processes left serving in {cwd}: {left}"


@pytest.mark.parametrize("name", ["My Proj.x", "proj-\u00e9", "proj-\U0001F680", "a b/c.d e", "x" * 120 + "/" + "y" * 120],
                         ids=["spaces-and-dots", "e-acute", "rocket", "nested", "long"])
def test_memfs_keys_a_project_as_claude_code_names_it_in_its_prompt(memfs_bin, tmp_path, name):
    """For paths with spaces, dots, non-ASCII (one and two UTF-16 units) and
    over 200 characters, `memfs claude-code status` names the very memory
    directory the real Claude Code's system prompt names."""
    if not CLAUDE or not os.path.exists(CLAUDE):
        if CI:
            pytest.fail("CI=true needs CLAUDE_BIN (scripts/claude_code.sh installs Claude Code)")
        pytest.skip("needs CLAUDE_BIN")
    import re
    home = tmp_path / "home"
    home.mkdir()
    project = tmp_path / name
    project.mkdir(parents=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
           "ANTHROPIC_API_KEY": "sk-ant-scripted", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    with ScriptedApi([[{"type": "text", "text": "Hello."}]]) as api:
        run = subprocess.run([CLAUDE, "-p", "hello"], env={**env, "ANTHROPIC_BASE_URL": api.url}, cwd=project,
                             stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180)
        assert run.returncode == 0, run.stderr[-2000:]
        prompts = [json.dumps(r.get("system", "")) for r in api.requests]
    named = set()
    for p in prompts:
        named |= set(re.findall(r"\.claude/projects/([^/\"\\\\]+)/memory", p))
    assert len(named) == 1, (named, prompts[0][:3000])
    status = subprocess.run([memfs_bin, "claude-code", "status"], env=env, cwd=project, capture_output=True,
                            text=True, timeout=60)
    assert status.returncode == 0, status.stderr
    ours = re.search(r"Claude Code's auto memory: .*/\.claude/projects/([^/]+)/memory", status.stdout).group(1)
    assert ours == named.pop(), status.stdout


def needs_mount_and_claude():
    if not CLAUDE or not os.path.exists(CLAUDE) or not (os.path.exists("/dev/fuse") and os.geteuid() == 0):
        if CI:
            pytest.fail("CI=true needs CLAUDE_BIN, /dev/fuse and root")
        pytest.skip("needs CLAUDE_BIN, /dev/fuse and root")


def log_rows(memfs_bin, cwd, env):
    log = subprocess.run([memfs_bin, "claude-code", "log", "--json", "--all"], cwd=cwd, env=env,
                         capture_output=True, text=True, timeout=60)
    assert log.returncode == 0, log.stderr
    return [json.loads(line) for line in log.stdout.splitlines()][::-1]  # oldest first


def test_a_day_in_a_users_life_with_claude_code_on_memfs(memfs_bin, tmp_path):
    """Enable in the main checkout; Claude Code writes in a worktree; the
    mount is killed; Claude Code starts again and has its memory (memfs'
    SessionStart hook mounts it and hands the session its MEMORY.md); disable
    from the worktree; Claude Code writes to the plain directory; enable
    again: every write is in `memfs claude-code log` in order, the files are
    the latest, and no command refused anything."""
    needs_mount_and_claude()
    import re
    import signal
    home, main, wt = tmp_path / "home", tmp_path / "repo", tmp_path / "wt"
    home.mkdir()
    git = ["git", "-c", "user.name=u", "-c", "user.email=u@example.com"]
    subprocess.run([*git, "init", "-q", str(main)], check=True)
    subprocess.run([*git, "-C", str(main), "commit", "-q", "--allow-empty", "-m", "start"], check=True)
    subprocess.run([*git, "-C", str(main), "worktree", "add", "-q", str(wt)], check=True)
    key = "".join(c if c.isascii() and c.isalnum() else "-" for c in str(main))
    place = home / ".claude" / "projects" / key / "memory"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}

    def memfs(cwd, *args):
        done = subprocess.run([memfs_bin, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done.stdout

    def claude_writes(turns, cwd, tool="Write"):
        with ScriptedApi([*turns, [{"type": "text", "text": "Done."}]], main_tool=tool) as api:
            run = claude_at(home, cwd, api, ["-p", "Remember this.", "--allowedTools", "Write,Edit,Read"])
            assert run.returncode == 0, (run.stdout, run.stderr[-3000:])
            api.check()
        return api

    def write(i, path, text, new=True):
        said = f"File created successfully at: {path}" if new else f"The file {path} has been updated successfully."
        return [{"type": "tool_use", "id": f"toolu_{i}", "name": "Write", "input": {"file_path": path, "content": text},
                 "expect": {"content": said + NO_READ_BACK, "is_error": False}}]

    md, build, deploy = f"{place}/MEMORY.md", f"{place}/build.md", f"{place}/deploy.md"
    try:
        on = memfs(main, "claude-code", "enable")
        assert "SessionStart hook" in on, on
        pid = int(re.search(r"memfs pid (\d+)", on).group(1))
        settings = json.loads((home / ".claude" / "settings.json").read_text())
        assert "claude-code ensure" in json.dumps(settings["hooks"]["SessionStart"]), settings
        # 1. In the worktree: the one memory of the repository.
        claude_writes([write(1, md, "# Memory\n- [Build](build.md)\n"), write(2, build, "Build with make.\n")], wt)
        # 2. The mount is killed: status says so from the worktree, exit 1.
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.3)
        dead = subprocess.run([memfs_bin, "claude-code", "status"], cwd=wt, env=env, capture_output=True, text=True)
        assert dead.returncode == 1 and "the mount is dead" in dead.stdout, dead.stdout
        # 3. Claude Code starts again: the hook mounts the memory, and the first
        # request carries MEMORY.md all the same.
        api = claude_writes([
            [{"type": "tool_use", "id": "toolu_3", "name": "Read", "input": {"file_path": build}}],
            [{"type": "tool_use", "id": "toolu_4", "name": "Edit",
              "input": {"file_path": build, "old_string": "make.", "new_string": "make -j2."},
              "expect": {"content": f"The file {build} has been updated successfully.{NO_READ_BACK}", "is_error": False}}],
        ], wt)
        first = json.dumps(api.requests[0])
        assert "memfs mounted this project's auto memory again" in first and "[Build](build.md)" in first, first[:3000]
        assert "on memfs (data dir" in memfs(wt, "claude-code", "status")
        # 4. Disabled from the worktree; Claude Code writes the plain directory.
        off = memfs(wt, "claude-code", "disable")
        assert "plain directory again" in off and not os.path.ismount(place), off
        assert "claude-code ensure" not in (home / ".claude" / "settings.json").read_text()
        claude_writes([write(5, deploy, "Deploy on Fridays.\n")], wt)
        # 5. Enabled again: what was written meanwhile is taken in, nothing refused.
        again = memfs(main, "claude-code", "enable")
        assert "1 file(s) written" in again, again
        assert (place / "build.md").read_text() == "Build with make -j2.\n"
        assert (place / "deploy.md").read_text() == "Deploy on Fridays.\n"
        assert (place / "MEMORY.md").read_text() == "# Memory\n- [Build](build.md)\n"
        # (A file written through the mount reaches the journal, and so the
        # log, within moments of its close.)
        wait_for(lambda: any(r["path"] == "/memories/deploy.md" for r in log_rows(memfs_bin, wt, env)),
                 "deploy.md in the log")
        rows = log_rows(memfs_bin, wt, env)
        changes = [(r["op"], r["path"]) for r in rows if r["op"] != "found"]
        assert changes == [("create", "/memories/MEMORY.md"), ("create", "/memories/build.md"),
                           ("write", "/memories/build.md"), ("create", "/memories/deploy.md")], rows
    finally:
        subprocess.run([memfs_bin, "claude-code", "disable"], cwd=main, env=env, capture_output=True, timeout=60)


def two_machines_on_one_store(memfs_bin, tmp_path, pg, repo="notes", checkouts=("project", "project"),
                              machines=None, second=None):
    """Two machines (two HOMEs, two checkouts of one repository at the
    given paths), each `memfs claude-code enable --shared`, appended to
    `machines` as they come (for the caller's cleanup): [(home, work,
    place, env)]. Each enable names the store after the remote. `second`:
    the second machine's memfs and the environment it starts in, if not
    memfs_bin's."""
    machines = [] if machines is None else machines
    for name, checkout in zip("ab", checkouts):
        memfs, extra = second if second and name == "b" else (memfs_bin, {})
        home, work = tmp_path / name / "home", tmp_path / name / checkout
        subprocess.run(["git", "init", "-q", str(work)], check=True)
        subprocess.run(["git", "-C", str(work), "remote", "add", "origin", f"git@example.com:team/{repo}.git"],
                       check=True)
        key = "".join(c if c.isascii() and c.isalnum() else "-" for c in str(work))
        place = home / ".claude" / "projects" / key / "memory"
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}
        on = subprocess.run([memfs, "claude-code", "enable", "--shared", pg.base], cwd=work, env={**env, **extra},
                            capture_output=True, text=True, timeout=60)
        assert on.returncode == 0, on.stderr
        assert f"shared store cc-example.com-team-{repo}" in on.stdout, on.stdout
        machines.append((home, work, place, env))
    return machines


def needs_pg_mount_and_claude():
    if not (CLAUDE and os.path.exists(CLAUDE) and os.geteuid() == 0 and os.path.exists("/dev/fuse")
            and os.path.exists("/usr/lib/postgresql/15/bin/pg_ctl")):
        if CI:
            pytest.fail("CI=true needs CLAUDE_BIN, root, /dev/fuse and PostgreSQL 15")
        pytest.skip("needs CLAUDE_BIN, root, /dev/fuse and PostgreSQL 15")


def wait_for(check, what, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def read_elsewhere(path):
    """A file's text read by another process (`cat`): this one's reads
    are what its later save is judged by."""
    return subprocess.run(["cat", str(path)], capture_output=True, text=True).stdout


def test_a_save_over_another_machines_edit_its_writer_never_read_is_an_overwrite(memfs_bin, tmp_path):
    """Machine B's program reads MEMORY.md; machine A's edit of a line
    arrives; B's program saves its own edit of the same line as Claude Code
    does (a temporary file renamed over it): the history records an
    overwrite of A's version with both sides, `memfs claude-code log` names
    each machine, the review page shows both. (Edits of different lines are
    merged instead: test_two_claude_codes_editing_memory_md_at_once_keep_every_line.)"""
    needs_pg_mount_and_claude()
    from shared_hosts import Postgres
    pg = Postgres(tmp_path / "pg")
    pg.start()
    machines = []
    try:
        two_machines_on_one_store(memfs_bin, tmp_path, pg, machines=machines)
        (_, _, place_a, _), (home_b, work_b, place_b, env_b) = machines
        (place_a / "MEMORY.md").write_text("# Memory\n- first\n")
        wait_for(lambda: read_elsewhere(place_b / "MEMORY.md") == "# Memory\n- first\n", "B sees the first version")
        with open(place_b / "MEMORY.md") as f:
            assert f.read() == "# Memory\n- first\n"
        (place_a / "MEMORY.md").write_text("# Memory\n- first, A's edit\n")
        wait_for(lambda: "A's edit" in read_elsewhere(place_b / "MEMORY.md"), "B sees A's edit")
        tmp = place_b / f"MEMORY.md.tmp.{os.getpid()}.1f2e3d"
        tmp.write_text("# Memory\n- first, B's edit\n")
        os.rename(tmp, place_b / "MEMORY.md")
        wait_for(lambda: "B's edit" in read_elsewhere(place_a / "MEMORY.md"), "A sees B's edit")
        rows = log_rows(memfs_bin, work_b, env_b)
        over = [r for r in rows if r["op"] == "overwrite"]
        assert len(over) == 1 and over[0]["path"] == "/memories/MEMORY.md", rows
        lost = next(r for r in rows if r["version"] == over[0]["replaces"])
        assert lost["origin"] != over[0]["origin"], (lost, over[0])
        text = subprocess.run([memfs_bin, "claude-code", "log"], cwd=work_b, env=env_b, capture_output=True,
                              text=True, timeout=60).stdout
        line = next(line for line in text.splitlines() if " overwrite " in line)
        assert "which its writer had not read" in line and line.endswith("@here"), text
        assert f"@{lost['origin'][:8]}" in text, text
        assert ".tmp." not in line.split("saved through")[0], text
    finally:
        for home, work, place, env in machines:
            subprocess.run([memfs_bin, "claude-code", "disable"], cwd=work, env=env, capture_output=True, timeout=60)
        pg.remove()


def test_two_claude_codes_editing_memory_md_at_once_keep_every_line(memfs_bin, failpoints_bin, tmp_path):
    """Two machines on one PostgreSQL store, both Claude Codes reading then
    editing MEMORY.md at the same time, 20 rounds (MEMFS_CC_ROUNDS), each
    adding its own line under the heading: every line is in the final file
    (or its Edit was answered with an error, which the model sees), and no
    version is recorded as overwritten. The second machine follows the
    store 2 s late (a slow link; its Claude Code also starts second), so
    its save is made before it has seen the first's, and loses the race:
    it merges the two (versions noted `merged:`, at least one)."""
    needs_pg_mount_and_claude()
    from shared_hosts import Postgres
    rounds = int(os.environ.get("MEMFS_CC_ROUNDS", "20"))
    pg = Postgres(tmp_path / "pg")
    pg.start()
    machines = []
    try:
        slow = (failpoints_bin, {"FAILPOINTS": "shared::follow-off=sleep(2000)"})
        two_machines_on_one_store(memfs_bin, tmp_path, pg, machines=machines, second=slow)
        places = [m[2] for m in machines]
        (places[0] / "MEMORY.md").write_text("# Memory\n")
        wait_for(lambda: read_elsewhere(places[1] / "MEMORY.md") == "# Memory\n", "B sees MEMORY.md")
        told_error, said = set(), set()
        for i in range(rounds):
            runs = []
            for m, (home, work, place, _) in zip("ab", machines):
                md = f"{place}/MEMORY.md"
                api = ScriptedApi([
                    [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": md}}],
                    [{"type": "tool_use", "id": "toolu_2", "name": "Edit",
                      "input": {"file_path": md, "old_string": "# Memory\n", "new_string": f"# Memory\n- {m} {i}\n"}}],
                    [{"type": "text", "text": "Edited."}],
                ], main_tool="Edit").__enter__()
                env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
                       "ANTHROPIC_API_KEY": "sk-ant-scripted", "ANTHROPIC_BASE_URL": api.url,
                       "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "ENABLE_TOOL_SEARCH": "false"}
                proc = subprocess.Popen([CLAUDE, "-p", "Note the round.", "--allowedTools", "Read,Edit"], env=env,
                                        cwd=work, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
                runs.append((m, api, proc))
            for m, api, proc in runs:
                out, err = proc.communicate(timeout=180)
                api.__exit__(None, None, None)
                assert proc.returncode == 0, (out, err[-2000:])
                if api.results["toolu_2"]["is_error"]:
                    told_error.add(f"- {m} {i}")
                    said.add(str(api.results["toolu_2"]["content"])[:120])
            # Both machines agree before the next round.
            wait_for(lambda: read_elsewhere(places[0] / "MEMORY.md") == read_elsewhere(places[1] / "MEMORY.md"),
                     "both machines hold one MEMORY.md")
        final = read_elsewhere(places[0] / "MEMORY.md")
        home_b, work_b, _, env_b = machines[1]
        rows = log_rows(memfs_bin, work_b, env_b)
        url = pg.base + "?store=cc-example.com-team-notes"
        cache_b = home_b / ".local" / "share" / "memfs" / "claude-code" / machines[1][2].parent.name

        def content(version):
            return subprocess.run([memfs_bin, "--data", url, "--cache", str(cache_b), "show", version],
                                  capture_output=True, text=True, timeout=60).stdout

        overwritten = {r["version"]: content(r["replaces"]) for r in rows if r["op"] == "overwrite"}
        missing = [f"- {m} {i}" for i in range(rounds) for m in "ab"
                   if f"- {m} {i}" not in final and f"- {m} {i}" not in told_error]
        assert not missing and not overwritten, (missing, overwritten, final,
                                                  [(r["op"], r["version"], r.get("replaces")) for r in rows])
        # (A merge is made by the machine whose save lost the race, or that
        # saved over the other's change it had not read yet.)
        merged = [r for r in rows if r.get("note", "").startswith("merged:")]
        assert merged, "no round raced: the test did not test the merge"
        print(f"{rounds} rounds: {final.count(chr(10)) - 1} edits in the file, {len(told_error)} refused to "
              f"the model ({sorted(said)}), {len(merged)} races merged, {len(overwritten)} overwrites recorded")
    finally:
        for home, work, place, env in machines:
            subprocess.run([memfs_bin, "claude-code", "disable"], cwd=work, env=env, capture_output=True, timeout=60)
        pg.remove()


class NoFuse:
    """A container-like place without /dev/fuse: a mount namespace whose
    /dev is a fresh tmpfs with only the usual nodes (null, zero, random,
    urandom, tty, fd). Commands run in it through nsenter."""

    NODES = {"null": (1, 3), "zero": (1, 5), "random": (1, 8), "urandom": (1, 9), "tty": (5, 0)}

    def __init__(self):
        setup = ["mount -t tmpfs -o mode=755 tmpfs /dev"]
        setup += [f"mknod -m 666 /dev/{n} c {a} {b}" for n, (a, b) in self.NODES.items()]
        setup += ["ln -s /proc/self/fd /dev/fd", "mkdir /dev/shm /dev/pts", "touch /dev/shm/nofuse-ready",
                  "exec sleep 3600"]
        self.proc = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c", " && ".join(setup)])
        deadline = time.time() + 10
        # (Ready when the new /dev holds the marker: until unshare has run,
        # nsenter enters the host's namespace, whose /dev has every node.)
        while not self.inside(["test", "-e", "/dev/shm/nofuse-ready"]).returncode == 0:
            assert time.time() < deadline, "the namespace did not come up"
            time.sleep(0.05)

    def inside(self, args, **kw):
        return subprocess.run(["nsenter", "-t", str(self.proc.pid), "-m", "--", *args],
                              capture_output=True, text=True, **kw)

    def close(self):
        self.proc.kill()
        self.proc.wait()


def test_claude_code_on_memfs_without_fuse_through_the_plain_files(memfs_bin, tmp_path):
    """Issue 48, item 2: `memfs claude-code enable --no-mount` where there is
    no /dev/fuse. Claude Code keeps the project's memory in the memory's
    plain files (its autoMemoryDirectory, in the project's local settings),
    a memfs in the background watches them: the real Claude Code's Write
    and Edit are versions (of the files door), `status` says so, the hook
    starts the memfs again after it stopped, `disable` puts the plain
    directory back."""
    if not CLAUDE or not os.path.exists(CLAUDE) or os.geteuid() != 0:
        if CI:
            pytest.fail("CI=true needs CLAUDE_BIN and root (a mount namespace)")
        pytest.skip("needs CLAUDE_BIN and root")
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    key = "".join(c if c.isascii() and c.isalnum() else "-" for c in str(work))
    place = home / ".claude" / "projects" / key / "memory"
    place.mkdir(parents=True)
    (place / "MEMORY.md").write_text("# Memory\n- [Old](old.md) \u2014 kept from before\n")
    data = home / ".local" / "share" / "memfs" / "claude-code" / key
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}
    box = NoFuse()
    try:
        assert box.inside(["test", "-e", "/dev/fuse"]).returncode != 0

        def memfs(*args):
            return box.inside(["env", *[f"{k}={v}" for k, v in env.items()], "sh", "-c",
                               f'cd "$0" && exec "$@"', str(work), memfs_bin, *args], timeout=60)

        on = memfs("claude-code", "enable", "--no-mount")
        assert on.returncode == 0, on.stderr
        assert "without a mount" in on.stdout, on.stdout
        mem = data / "memories"
        local = json.loads((work / ".claude" / "settings.local.json").read_text())
        assert local == {"autoMemoryDirectory": str(mem)}, local
        assert (mem / "MEMORY.md").read_text().startswith("# Memory")
        assert memfs("claude-code", "status").returncode == 0
        md, topic = f"{mem}/MEMORY.md", f"{mem}/testing.md"
        turns = write_and_edit(md, topic)
        claude_env = {**env, "ANTHROPIC_API_KEY": "sk-ant-scripted", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                      "ENABLE_TOOL_SEARCH": "false"}
        with ScriptedApi(turns, main_tool="Write") as api:
            claude_env["ANTHROPIC_BASE_URL"] = api.url
            run = box.inside(["env", *[f"{k}={v}" for k, v in claude_env.items()], "sh", "-c", 'cd "$0" && exec "$@"',
                              str(work), CLAUDE, "-p", "Remember how to test.", "--allowedTools", "Write,Edit,Read"],
                             stdin=subprocess.DEVNULL, timeout=180)
            assert run.returncode == 0, (run.stdout, run.stderr[-3000:])
            api.check()
        system = json.dumps(api.requests[0].get("system"))
        assert f"persistent file-based memory at `{mem}/`" in system, system[:2000]
        # Claude Code's writes are versions of the files door, as memfs log says.
        log = memfs("claude-code", "log", "--json", "--all")
        rows = [json.loads(line) for line in log.stdout.splitlines()]
        files = {(r["op"], r["path"]) for r in rows if r["actor"].get("door") == "files"}
        assert ("create", "/memories/testing.md") in files, rows
        assert any(p == "/memories/MEMORY.md" for _, p in files), rows
        # As root the kernel names the writer (fanotify): Claude Code's own
        # writes are the agent's, for review, as through the mount.
        agents = {(r["op"], r["path"]) for r in rows if r["actor"].get("door") == "files"
                  and r["actor"].get("kind") == "agent" and r["actor"].get("session") == "claude"}
        assert ("create", "/memories/testing.md") in agents, rows
        assert any(p == "/memories/MEMORY.md" for _, p in agents), rows
        table = memfs("claude-code", "log", "--all").stdout
        assert "agent:files(claude)" in table, table
        shown = memfs("--data", str(data), "exec", '{"command":"view","path":"/memories/MEMORY.md"}')
        assert "replaced" in shown.stdout, shown.stdout
        # The memfs behind it stopped (a reboot): the hook starts it again.
        pid = int((data / "claude-code-serve.pid").read_text())
        os.kill(pid, 15)
        deadline = time.time() + 30
        while memfs("claude-code", "status").returncode == 0:
            assert time.time() < deadline, "status never said the memfs had stopped"
            time.sleep(0.1)
        (data / "memories" / "offline.md").write_text("written while memfs was off\n")
        ensure = memfs("claude-code", "ensure")
        assert ensure.returncode == 0, ensure.stderr
        assert memfs("claude-code", "status").returncode == 0
        rows = [json.loads(line) for line in memfs("claude-code", "log", "--json", "--all").stdout.splitlines()]
        assert any(r["path"] == "/memories/offline.md" for r in rows), rows
        off = memfs("claude-code", "disable")
        assert off.returncode == 0, off.stderr
        assert place.is_dir()
        assert json.loads((work / ".claude" / "settings.local.json").read_text()) == {}
        assert "replaced" in (place / "MEMORY.md").read_text()
        assert (place / "testing.md").read_text() == "Run pytest -q.\n"
    finally:
        memfs_stop = data / "claude-code-serve.pid"
        if memfs_stop.exists():
            try:
                os.kill(int(memfs_stop.read_text()), 9)
            except (ProcessLookupError, ValueError):
                pass
        box.close()
