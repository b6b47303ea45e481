"""The Python package (memfs-memory), as a user gets it: the wheel that
scripts/package_python.sh built, installed into a clean virtual environment
with no Rust toolchain on PATH, then the SDK's own tool runner (sync and
async) drives a conversation through `MemfsMemoryTool` against the scripted
Messages API: views, creates, edits, renames, deletes, each error string, an
image. Every tool_result must come back exactly as scripted.

MEMFS_WHEEL names the wheel (CI=true: required)."""
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
from conversation import agent_sessions, remember_ana, script  # noqa: E402
import readme_blocks  # noqa: E402

CI = os.environ.get("CI") == "true"
WHEEL = os.environ.get("MEMFS_WHEEL")

DRIVER = r'''
import asyncio, json, sys
import anthropic
from memfs_memory import MemfsMemoryTool, AsyncMemfsMemoryTool

base_url, data, mode = sys.argv[1:4]
messages = [{"role": "user", "content": "Remember where Ana lives, then tidy up."}]
if mode == "sync":
    client = anthropic.Anthropic(api_key="sk-scripted", base_url=base_url, max_retries=0)
    with MemfsMemoryTool(data=data, session="package-test") as memory:
        runner = client.beta.messages.tool_runner(model="claude-opus-5", max_tokens=1024,
                                                  messages=messages, tools=[memory])
        last = None
        for message in runner:
            last = message
else:
    async def main():
        client = anthropic.AsyncAnthropic(api_key="sk-scripted", base_url=base_url, max_retries=0)
        async with AsyncMemfsMemoryTool(data=data, session="package-test") as memory:
            runner = client.beta.messages.tool_runner(model="claude-opus-5", max_tokens=1024,
                                                      messages=messages, tools=[memory])
            last = None
            async for message in runner:
                last = message
            return last
    last = asyncio.run(main())
print(json.dumps({"last": last.content[0].text}))
'''


@pytest.fixture(scope="module")
def clean_env(tmp_path_factory):
    if not WHEEL:
        if CI:
            pytest.fail("CI=true needs MEMFS_WHEEL (scripts/package_python.sh builds it)")
        pytest.skip("needs MEMFS_WHEEL")
    venv = tmp_path_factory.mktemp("clean") / "venv"
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {"PATH": f"{venv}/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")}
    pip = subprocess.run([f"{venv}/bin/pip", "install", "--quiet", "--disable-pip-version-check", WHEEL],
                         env=env, capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr
    installed = time.monotonic() - started
    # No Rust toolchain on the way: the binary is the wheel's.
    which = subprocess.run([f"{venv}/bin/python", "-c", "import memfs_memory; print(memfs_memory.find_memfs())"],
                           env=env, capture_output=True, text=True)
    assert which.returncode == 0, which.stderr
    assert which.stdout.strip() == f"{venv}/bin/memfs", which.stdout
    print(f"\npackage: install into a clean venv took {installed:.1f} s")
    return venv, env


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_sdks_tool_runner_through_the_installed_package(clean_env, tmp_path, mode):
    venv, env = clean_env
    data = tmp_path / "memory"
    (data / "memories").mkdir(parents=True)
    picture = png()
    (data / "memories" / "pic.png").write_bytes(picture)
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    # The listing shows sizes in bytes; the root's is the sum below it.
    with ScriptedApi(script(str(len(picture)))) as api:
        started = time.monotonic()
        run = subprocess.run([f"{venv}/bin/python", str(driver), api.url, str(data), mode],
                             env=env, capture_output=True, text=True, timeout=120)
        took = time.monotonic() - started
        assert run.returncode == 0, run.stderr[-3000:]
        api.check()
    assert json.loads(run.stdout)["last"].startswith("I noted that Ana")
    print(f"package ({mode}): the conversation took {took:.2f} s")
    # The memory is durable and its history names the session.
    log = subprocess.run([f"{venv}/bin/memfs", "--data", str(data), "log", "--json"], env=env,
                         capture_output=True, text=True)
    assert log.returncode == 0, log.stderr
    assert agent_sessions(log.stdout) == {"package-test"}, log.stdout


def test_a_missing_binary_a_bad_data_dir_and_a_second_tool_on_one_memory(clean_env, tmp_path):
    venv, env = clean_env
    data = tmp_path / "memory"
    not_a_dir = tmp_path / "a-file"
    not_a_dir.write_text("x")
    check = r'''
import os, sys
from memfs_memory import MemfsMemoryTool, MemfsError
data, not_a_dir = sys.argv[1:3]
# Two tools on one memory: the second attaches to the first's memfs.
with MemfsMemoryTool(data=data) as first, MemfsMemoryTool(data=data) as second:
    first.run({"command": "create", "path": "/memories/a.md", "file_text": "one\n"})
    print("SECOND:", second.run({"command": "view", "path": "/memories/a.md"}).splitlines()[-1])
try:
    MemfsMemoryTool(data=not_a_dir)
except MemfsError as e:
    print("BAD DATA:", e)
os.environ["MEMFS_BIN"] = "/nonexistent/memfs"
try:
    MemfsMemoryTool(data=data)
except MemfsError as e:
    print("MISSING:", e)
'''
    script_file = tmp_path / "check.py"
    script_file.write_text(check)
    run = subprocess.run([f"{venv}/bin/python", str(script_file), str(data), str(not_a_dir)], env=env,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert "SECOND:      1\tone" in out, out
    assert "MISSING: MEMFS_BIN names '/nonexistent/memfs', which is not an executable file" in out, out
    bad = [line for line in out.splitlines() if line.startswith("BAD DATA:")]
    assert bad and "memfs ended:" in bad[0] and "not a directory" in bad[0].lower(), out
    assert "Traceback" not in run.stderr, run.stderr


@pytest.mark.parametrize("block", readme_blocks.of_kind("package"), ids=repr)
def test_a_readme_block_runs_as_written_with_the_installed_package(clean_env, tmp_path, block):
    """The `package` blocks of README.md and packages/python/README.md, as
    pasted into a file, with the key and the API's address in the
    environment as a user has them (the scripted API here)."""
    venv, env = clean_env
    (tmp_path / "snippet.py").write_text(block.text)
    with ScriptedApi(remember_ana()) as api:
        run = subprocess.run([f"{venv}/bin/python", "snippet.py"], cwd=tmp_path, capture_output=True, text=True,
                             env={**env, "ANTHROPIC_API_KEY": "sk-scripted", "ANTHROPIC_BASE_URL": api.url},
                             timeout=120)
        assert run.returncode == 0, f"{block}:\n{run.stderr[-3000:]}"
        api.check()
    assert "Noted: Ana prefers email." in run.stdout, run.stdout
    assert (tmp_path / "memory" / "memories" / "ana.md").read_text() == "Ana prefers email.\n"


CLOSING = r'''
import gc, os, sys, warnings
warnings.simplefilter("error")
from memfs_memory import MemfsMemoryTool, AsyncMemfsMemoryTool
root = sys.argv[1]
tool = MemfsMemoryTool(data=os.path.join(root, "a", "b", "memory"))
tool.create({"command": "create", "path": "/memories/x.md", "file_text": "x"})
tool.close()
tool.close()
AsyncMemfsMemoryTool(data=os.path.join(root, "c", "memory")).close()
gc.collect()
print(oct(os.stat(os.path.join(root, "a", "b")).st_mode & 0o777), oct(os.stat(os.path.join(root, "a")).st_mode & 0o777))
'''


def test_a_closed_tool_leaves_no_pipe_open_and_a_data_dirs_parents_are_made(clean_env, tmp_path):
    """Under warnings-as-errors (the SDK's own pytest settings), closing the
    tool (twice) leaves nothing for the garbage collector to warn about; a
    data dir whose parents are missing gets them, private, as the SDK's
    filesystem tool does."""
    venv, env = clean_env
    run = subprocess.run([f"{venv}/bin/python", "-X", "dev", "-c", CLOSING, str(tmp_path)], env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0 and "ResourceWarning" not in run.stderr, run.stderr
    assert run.stdout.split() == ["0o700", "0o700"], run.stdout
    assert (tmp_path / "a" / "b" / "memory" / "memories" / "x.md").read_text() == "x"
