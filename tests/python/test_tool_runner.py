"""The SDK's tool runner with MemfsMemoryTool against a scripted mock of the
Messages API on loopback: parallel tool calls in one turn, an error case, and
the memory checked in a live mount."""
import json
import os
import pathlib
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anthropic
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "packages" / "python" / "python"))
from memfs_memory import MemfsMemoryTool  # noqa: E402

SCRIPT = [
    # Turn 1: two tool calls at once.
    [
        {"type": "text", "text": "Let me check my memory."},
        {"type": "tool_use", "id": "toolu_01", "name": "memory", "input": {"command": "view", "path": "/memories"}},
        {"type": "tool_use", "id": "toolu_02", "name": "memory",
         "input": {"command": "create", "path": "/memories/customers/acme.md", "file_text": "# Acme\n- prefers email\n"}},
    ],
    # Turn 2: three more, one of which fails.
    [
        {"type": "tool_use", "id": "toolu_03", "name": "memory",
         "input": {"command": "str_replace", "path": "/memories/customers/acme.md", "old_str": "email", "new_str": "email follow-ups"}},
        {"type": "tool_use", "id": "toolu_04", "name": "memory", "input": {"command": "view", "path": "/memories/customers/globex.md"}},
        {"type": "tool_use", "id": "toolu_05", "name": "memory",
         "input": {"command": "insert", "path": "/memories/customers/acme.md", "insert_line": 2, "insert_text": "- account manager: Dana\n"}},
    ],
    # Turn 3: done.
    [{"type": "text", "text": "I noted that Acme prefers email follow-ups."}],
]


class MockApi(ThreadingHTTPServer):
    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.requests = []

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        api = self.server
        turn = len(api.requests)
        api.requests.append(body)
        content = SCRIPT[turn]
        stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
        message = {
            "id": f"msg_{turn}", "type": "message", "role": "assistant", "model": "claude-mock",
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 10},
        }
        data = json.dumps(message).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def results_of(request):
    """The tool_result blocks of the last (user) message of a request, by id."""
    last = request["messages"][-1]
    assert last["role"] == "user"
    return {b["tool_use_id"]: b for b in last["content"] if b["type"] == "tool_result"}


def can_mount():
    return os.path.exists("/dev/fuse") and os.geteuid() == 0


@pytest.fixture
def mounted(memfs_bin, tmp_path):
    """A running `memfs mount`, or None where FUSE is not usable."""
    if not can_mount():
        # Under CI=true nothing passes by skipping.
        assert os.environ.get("CI") != "true", "the mount part of test_tool_runner must run under CI=true: needs root and /dev/fuse"
        print("SKIPPED the mount part of test_tool_runner: needs root and /dev/fuse")
        yield None
        return
    data, mnt = tmp_path / "data", tmp_path / "mnt"
    mnt.mkdir()
    proc = subprocess.Popen([memfs_bin, "--data", str(data), "mount", str(mnt)], stderr=subprocess.PIPE)
    sock = data / ".memfs" / "sock"
    for _ in range(200):
        if sock.exists() and os.path.ismount(mnt):
            break
        time.sleep(0.05)
    yield data, mnt
    proc.terminate()
    assert proc.wait(timeout=30) == 0


def run_conversation(tool):
    api = MockApi()
    threading.Thread(target=api.serve_forever, daemon=True).start()
    try:
        client = anthropic.Anthropic(base_url=api.url, api_key="test-key", max_retries=0)
        runner = client.beta.messages.tool_runner(
            model="claude-mock",
            max_tokens=1024,
            messages=[{"role": "user", "content": "Remember that Acme prefers email follow-ups."}],
            tools=[tool],
        )
        final = runner.until_done()
    finally:
        api.shutdown()
    return api.requests, final


def check_requests(requests, final):
    assert len(requests) == 3
    assert requests[0]["tools"] == [{"type": "memory_20250818", "name": "memory"}]
    first = results_of(requests[1])
    assert set(first) == {"toolu_01", "toolu_02"}
    assert first["toolu_01"]["content"].startswith("Here're the files and directories up to 2 levels deep in /memories")
    assert not first["toolu_01"].get("is_error")
    assert first["toolu_02"]["content"] == "File created successfully at: /memories/customers/acme.md"
    second = results_of(requests[2])
    assert set(second) == {"toolu_03", "toolu_04", "toolu_05"}
    assert second["toolu_03"]["content"].startswith("The memory file has been edited.")
    assert second["toolu_04"]["is_error"] is True
    assert "The path /memories/customers/globex.md does not exist" in json.dumps(second["toolu_04"]["content"])
    assert second["toolu_05"]["content"] == "The file /memories/customers/acme.md has been edited."
    assert final.content[0].text == "I noted that Acme prefers email follow-ups."


ACME = "# Acme\n- prefers email follow-ups\n- account manager: Dana\n"


def test_tool_runner_through_the_socket_of_a_mount(mounted, memfs_bin):
    if mounted is None:
        pytest.skip("needs root and /dev/fuse")
    data, mnt = mounted
    with MemfsMemoryTool(socket=str(data / ".memfs" / "sock"), session="python-socket-session") as tool:
        requests, final = run_conversation(tool)
    check_requests(requests, final)
    # The person sees it in the mount; the disk has it too (the plain files
    # follow the journal: made current first, as a person would).
    assert (mnt / "customers" / "acme.md").read_text() == ACME
    subprocess.run([memfs_bin, "--data", str(data), "checkpoint"], check=True)
    assert (data / "memories" / "customers" / "acme.md").read_text() == ACME


def test_tool_runner_with_a_spawned_memfs(memfs_bin, tmp_path):
    data = tmp_path / "data"
    with MemfsMemoryTool(spawn=[memfs_bin, "--data", str(data)]) as tool:
        requests, final = run_conversation(tool)
    check_requests(requests, final)
    assert (data / "memories" / "customers" / "acme.md").read_text() == ACME


def test_tool_runner_with_a_spawned_memfs_beside_a_mount(mounted, memfs_bin):
    """spawn= while `memfs mount` owns the data dir: the spawned memfs
    attaches to it, and the person sees the agent's writes in the mount."""
    if mounted is None:
        pytest.skip("needs root and /dev/fuse")
    data, mnt = mounted
    with MemfsMemoryTool(spawn=[memfs_bin, "--data", str(data)], session="python-spawn-session") as tool:
        requests, final = run_conversation(tool)
    check_requests(requests, final)
    assert (mnt / "customers" / "acme.md").read_text() == ACME


def test_clear_all_memory_deletes_everything_and_keeps_it_in_the_history(memfs_bin, tmp_path):
    data = tmp_path / "data"
    with MemfsMemoryTool(spawn=[memfs_bin, "--data", str(data)]) as tool:
        for path in ["/memories/a.md", "/memories/dir/b.md"]:
            tool.call({"command": "create", "path": path, "file_text": "x\n"})
        assert tool.clear_all_memory() == "All memory cleared"
        listing = tool.call({"command": "view", "path": "/memories"})
        assert "/memories/" not in str(listing), listing
    assert list((data / "memories").iterdir()) == []
    log = subprocess.run([memfs_bin, "--data", str(data), "log", "--json"],
                         check=True, capture_output=True, text=True).stdout
    ops = [json.loads(line)["op"] for line in log.splitlines()]
    assert sorted(ops) == ["create", "create", "delete", "delete"]


def test_clear_all_memory_through_the_socket_carries_the_key_and_the_agents_line_does_not(mounted, memfs_bin):
    if mounted is None:
        pytest.skip("needs root and /dev/fuse")
    from anthropic.tools import ToolError
    data, mnt = mounted
    with MemfsMemoryTool(socket=str(data / ".memfs" / "sock"), session="python-clear") as tool:
        tool.call({"command": "create", "path": "/memories/keep/a.md", "file_text": "x\n"})
        # What an agent could send as its tool input: refused, nothing lost.
        with pytest.raises(ToolError):
            tool.run({"type": "memfs_clear"})
        assert (mnt / "keep" / "a.md").read_text() == "x\n"
        assert tool.clear_all_memory() == "All memory cleared"
    assert list(mnt.iterdir()) == []


def test_the_adapter_imports_only_public_modules_of_the_sdk():
    import ast
    package = pathlib.Path(__file__).resolve().parents[2] / "packages" / "python" / "python" / "memfs_memory"
    modules = []
    for source in package.glob("*.py"):
        tree = ast.parse(source.read_text())
        modules += [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level == 0]
        modules += [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    sdk = [m for m in modules if m and m.split(".")[0] == "anthropic"]
    assert sdk, modules
    private = [m for m in sdk if any(part.startswith("_") for part in m.split("."))]
    assert private == [], private


def test_a_program_passes_expected_sha256_through_the_adapter(memfs_bin, tmp_path):
    import hashlib
    from anthropic.tools import ToolError
    data = tmp_path / "data"
    with MemfsMemoryTool(spawn=[memfs_bin, "--data", str(data)]) as tool:
        tool.run({"command": "create", "path": "/memories/p.md", "file_text": "one\n"})
        stale = hashlib.sha256(b"zero\n").hexdigest()
        with pytest.raises(ToolError) as refused:
            tool.run({"command": "str_replace", "path": "/memories/p.md", "old_str": "one", "new_str": "two",
                      "expected_sha256": stale})
        assert "has changed" in str(refused.value)
        current = hashlib.sha256(b"one\n").hexdigest()
        tool.run({"command": "str_replace", "path": "/memories/p.md", "old_str": "one", "new_str": "two",
                  "expected_sha256": current})
    assert (data / "memories" / "p.md").read_text() == "two\n"
