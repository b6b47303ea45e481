"""The real Claude Code (pinned by scripts/claude_code.sh) with memfs,
offline: its Messages API is the scripted one on loopback, its HOME a fresh
directory. The scripted model calls memfs's memory tool through Claude
Code's MCP client, set up with the README's own line (`claude mcp add memfs
-- MEMFS --data DIR mcp`), and every result must come back exactly.

CLAUDE_BIN names Claude Code's binary (CI=true: required)."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from scripted_api import ScriptedApi  # noqa: E402
from pngs import png  # noqa: E402
from conversation import script  # noqa: E402

CI = os.environ.get("CI") == "true"
CLAUDE = os.environ.get("CLAUDE_BIN")
TOOL = "mcp__memfs__memory"  # mcp__<the name given to claude mcp add>__<memfs' tool>


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
