"""The READMEs as a newcomer pastes them (issue 53): every code block is run
by a test, or its words say it is a fragment (readme_blocks.py lists the
kinds). This file runs the set-up, the tool-call lines, the shell blocks
and the Python blocks; test_package.py and test_npm_package.py run the
`package` and `npm` blocks with the packages installed; `cargo test`
compiles the Rust one."""
import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import readme_blocks  # noqa: E402
from readme_blocks import ROOT  # noqa: E402


def test_every_block_is_run_by_a_test_or_said_to_be_a_fragment():
    found = readme_blocks.all_blocks()
    assert len(found) > 30, found
    for b in found:
        assert b.kind in readme_blocks.KINDS, f"{b}: mark it `<!-- snippet: KIND -->` (readme_blocks.py)"
        if b.kind == "fragment":
            assert "fragment" in b.before.lower(), f"{b}: a fragment must say so in its words"
    kinds = {b.kind for b in found}
    assert {"setup", "stdio", "shell", "python", "package", "npm", "doctest"} <= kinds, kinds
    # The Rust block is compiled as a doc test of the crate.
    assert 'include_str!("../README.md")' in (ROOT / "src/lib.rs").read_text()


def env_with(memfs_bin, **extra):
    env = dict(os.environ)
    env.pop("MEMFS_DATA", None)
    env["PATH"] = f"{pathlib.Path(memfs_bin).parent}:{env['PATH']}"
    env.update(extra)
    return env


def tool_lines(block):
    return [line for line in block.text.splitlines() if line.strip()]


def test_the_setup_block_and_the_tool_calls_as_written(memfs_bin, tmp_path):
    setup = readme_blocks.of_kind("setup", "README.md")
    assert len(setup) == 1
    first, second = [line.split("#")[0].strip() for line in setup[0].text.splitlines()]
    # The test command is what CI runs.
    assert second == "scripts/test.sh"
    assert (ROOT / ".ci/run").read_text().strip().splitlines()[-1] == second
    # The first, with the lines the README has the reader type (the
    # memory's place from MEMFS_DATA, so that the checkout stays clean).
    stdio = readme_blocks.of_kind("stdio", "README.md")
    lines = [line for b in stdio for line in tool_lines(b)]
    assert len(lines) >= 4, lines
    data = tmp_path / "memory"
    env = env_with(memfs_bin, MEMFS_DATA=str(data))
    run = subprocess.run(["bash", "-c", first], cwd=ROOT, input="\n".join(lines) + "\n",
                         capture_output=True, text=True, env=env, timeout=1200)
    assert run.returncode == 0, run.stderr[-2000:]
    answers = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(answers) == len(lines), run.stdout
    for line, answer in zip(lines, answers):
        assert answer.get("is_error") is False, (line, answer)
    assert "Acme prefers phone." in (data / "memories" / "notes.md").read_text()


# ---- shell blocks ---------------------------------------------------------

SEARCHED = """# Replies
We call parse_http_reply here.
Keep a HashMap of thread safe serializers.
deploy on friday, never to production
the quokka is our mascot
"""


def exec_call(memfs_bin, data, call, *flags):
    r = subprocess.run([memfs_bin, "--data", str(data), *flags, "exec", "-"], input=json.dumps(call),
                       capture_output=True, text=True)
    assert r.returncode == 0, (call, r.stdout, r.stderr)


def sandbox(memfs_bin, root):
    """A directory as a reader's would be after the set-up: ./memory with
    notes.md, a file with forty-odd versions, one to search and one a
    session named claude-code made, and the
    sources the import block names (in HOME and here)."""
    work, home = root / "work", root / "home"
    work.mkdir(parents=True)
    home.mkdir()
    data = work / "memory"
    exec_call(memfs_bin, data, {"command": "create", "path": "/memories/notes.md",
                                "file_text": "Acme prefers email.\n"})
    exec_call(memfs_bin, data, {"command": "create", "path": "/memories/notes/a.md", "file_text": "v0\n"})
    for i in range(45):
        exec_call(memfs_bin, data, {"command": "str_replace", "path": "/memories/notes/a.md",
                                    "old_str": f"v{i}\n", "new_str": f"v{i + 1}\n"})
    exec_call(memfs_bin, data, {"command": "create", "path": "/memories/notes/http.md", "file_text": SEARCHED})
    # A session to undo.
    exec_call(memfs_bin, data, {"command": "create", "path": "/memories/cc.md", "file_text": "by a session\n"},
              "--as", "claude-code")
    (home / "notes").mkdir()
    (home / "notes" / "idea.md").write_text("an idea\n")
    backup = work / "backup-src"
    backup.mkdir()
    (backup / "old.md").write_text("old notes\n")
    with tarfile.open(work / "backup.tar.gz", "w:gz") as t:
        t.add(backup / "old.md", arcname="old.md")
    (work / "export-dir" / "memories").mkdir(parents=True)
    (work / "export-dir" / "memories" / "exported.md").write_text("exported\n")
    repo = home / "notes-repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=Ana", "-c", "user.email=ana@example.com"]
    subprocess.run(git + ["init", "-q"], check=True)
    (repo / "from-git.md").write_text("from git\n")
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "one"], check=True)
    return work, home


@pytest.mark.parametrize("block", readme_blocks.of_kind("shell"), ids=repr)
def test_a_shell_block_runs_as_written(memfs_bin, tmp_path, block):
    work, home = sandbox(memfs_bin, tmp_path)
    env = env_with(memfs_bin, HOME=str(home))
    run = subprocess.run(["bash", "-euo", "pipefail", "-c", block.text], cwd=work, capture_output=True,
                         text=True, env=env, timeout=300)
    assert run.returncode == 0, f"{block}:\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}"
    assert "Traceback" not in run.stderr and "panicked" not in run.stderr, run.stderr


# ---- Python blocks ----------------------------------------------------------

def blocks_in_order():
    return readme_blocks.blocks("README.md")


def python_blocks():
    """Each `python` block, with the `shell-server` block before it (if any)."""
    found, last = [], None
    for b in blocks_in_order():
        if b.kind == "python":
            found.append((last if last and last.kind == "shell-server" else None, b))
        last = b
    return found


def serve_block(block, cwd, env):
    """Runs a `shell-server` block: a `serve --http` line in the background
    (returned, to stop), every other line in turn; the token a line prints."""
    server, token = None, None
    for line in block.text.splitlines():
        command = line.split("#")[0].strip()
        if not command:
            continue
        if " serve --http " in f" {command} ":
            server = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=cwd, env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            addr = command.rsplit(" ", 1)[1]
            host, port = addr.rsplit(":", 1)
            deadline = time.monotonic() + 30
            while True:
                try:
                    socket.create_connection((host, int(port)), timeout=1).close()
                    break
                except OSError:
                    assert server.poll() is None, server.stderr.read()
                    assert time.monotonic() < deadline, "the server did not start"
                    time.sleep(0.1)
            continue
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=cwd, env=env,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, (command, r.stderr)
        m = re.search(r"memfs_[0-9a-f]{64}", r.stdout)
        token = m.group(0) if m else token
    return server, token


@pytest.mark.parametrize("pair", python_blocks(), ids=lambda p: repr(p[1]))
def test_a_python_block_runs_as_written(memfs_bin, tmp_path, pair):
    before, block = pair
    work = tmp_path / "work"
    work.mkdir()
    env = env_with(memfs_bin)
    server = None
    try:
        if before is not None:
            server, token = serve_block(before, work, env)
            assert token, "the block before printed no token"
            env["MEMFS_TOKEN"] = token
        script = work / "snippet.py"
        script.write_text(block.text)
        run = subprocess.run([sys.executable, str(script)], cwd=work, capture_output=True, text=True,
                             env=env, timeout=120)
        assert run.returncode == 0, f"{block}:\n{run.stdout}\n{run.stderr[-3000:]}"
        assert run.stdout.strip(), f"{block} printed nothing"
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)


def test_the_readmes_python_and_shell_blocks_are_found(memfs_bin):
    # (The parametrized tests above run nothing if the marks were lost.)
    assert len(python_blocks()) >= 2
    assert len(readme_blocks.of_kind("shell")) >= 4
    assert shutil.which("git")


def test_serve_stdio_on_a_terminal_says_what_it_waits_for(memfs_bin, tmp_path):
    """A person who types the set-up's first command at a terminal is told,
    on stderr, what memfs reads and how to stop it; a program's pipe is not."""
    import pty
    master, slave = pty.openpty()
    p = subprocess.Popen([memfs_bin, "--data", str(tmp_path / "m"), "serve", "--stdio"], stdin=slave,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    os.close(slave)
    try:
        line = p.stderr.readline()
        assert "reading tool calls as JSON lines on stdin" in line and "Ctrl-D" in line, line
        os.write(master, b"\x04")
        assert p.wait(timeout=30) == 0
    finally:
        if p.poll() is None:
            p.kill()
        os.close(master)
    piped = subprocess.run([memfs_bin, "--data", str(tmp_path / "n"), "serve", "--stdio"], input="",
                           capture_output=True, text=True, timeout=30)
    assert piped.returncode == 0 and "reading tool calls" not in piped.stderr, piped.stderr
