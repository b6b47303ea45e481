"""The npm packages (memfs-memory and memfs-memory-linux-x64), as a user
gets them: the tarballs scripts/package_npm.sh built, installed with npm
into a clean project beside the pinned @anthropic-ai/sdk, then the SDK's own
toolRunner drives the conversation of tests/python/conversation.py through
`memfsMemoryTool` against the scripted Messages API: every tool_result must
come back exactly. Also: `npx memfs`, and the errors a user meets.

MEMFS_NPM names the directory holding the tarballs (CI=true: required)."""
import json
import os
import pathlib
import shutil
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
TARBALLS = os.environ.get("MEMFS_NPM")
SDK = "@anthropic-ai/sdk@1.14.0"

DRIVER = r'''
import Anthropic from '@anthropic-ai/sdk';
import { memfsMemoryTool } from 'memfs-memory';

const [baseURL, data] = process.argv.slice(2);
const memory = memfsMemoryTool({ data, session: 'npm-test' });
try {
  const client = new Anthropic({ baseURL, apiKey: 'sk-scripted', maxRetries: 0 });
  const final = await client.beta.messages.toolRunner({
    model: 'claude-opus-5', max_tokens: 1024, tools: [memory.tool],
    messages: [{ role: 'user', content: 'Remember where Ana lives, then tidy up.' }],
  });
  console.log(JSON.stringify({ last: final.content[0].text }));
} finally {
  await memory.close();
}
'''

ERRORS = r'''
import { memfsMemoryTool, MemfsError } from 'memfs-memory';

const [notADir] = process.argv.slice(2);
const bad = memfsMemoryTool({ data: notADir });
try {
  await bad.run({ command: 'view', path: '/memories' });
  console.log('BAD DATA: answered');
} catch (e) {
  console.log(`BAD DATA: ${e instanceof MemfsError} ${e.message}`);
}
process.env.MEMFS_BIN = '/nonexistent/memfs';
try {
  memfsMemoryTool({ data: notADir });
} catch (e) {
  console.log(`MISSING: ${e instanceof MemfsError} ${e.message}`);
}
'''


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    if not TARBALLS:
        if CI:
            pytest.fail("CI=true needs MEMFS_NPM (scripts/package_npm.sh builds the tarballs)")
        pytest.skip("needs MEMFS_NPM")
    if not shutil.which("npm"):
        if CI:
            pytest.fail("CI=true needs node and npm")
        pytest.skip("needs npm")
    tarballs = sorted(str(p) for p in pathlib.Path(TARBALLS).glob("memfs-memory-*.tgz"))
    assert len(tarballs) == 2, tarballs
    root = tmp_path_factory.mktemp("npm-project")
    (root / "package.json").write_text(json.dumps({"name": "user-app", "private": True, "type": "module"}))
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")}
    started = time.monotonic()
    install = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent", SDK, *tarballs],
                             cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stderr
    print(f"\nnpm package: install into a clean project took {time.monotonic() - started:.1f} s")
    binary = root / "node_modules" / "memfs-memory-linux-x64" / "bin" / "memfs"
    assert os.access(binary, os.X_OK), "the platform package's binary is not installed"
    return root, env


def test_the_typescript_sdks_tool_runner_through_the_installed_package(project, tmp_path):
    root, env = project
    data = tmp_path / "memory"
    (data / "memories").mkdir(parents=True)
    picture = png()
    (data / "memories" / "pic.png").write_bytes(picture)
    (root / "driver.mjs").write_text(DRIVER)
    with ScriptedApi(script(str(len(picture)))) as api:
        started = time.monotonic()
        run = subprocess.run(["node", "driver.mjs", api.url, str(data)], cwd=root, env=env,
                             capture_output=True, text=True, timeout=120)
        took = time.monotonic() - started
        assert run.returncode == 0, run.stderr[-3000:]
        api.check()
    assert json.loads(run.stdout)["last"].startswith("I noted that Ana")
    print(f"npm package: the conversation took {took:.2f} s")
    # `npx memfs` is the same binary: the history names the session.
    log = subprocess.run(["npx", "--no-install", "memfs", "--data", str(data), "log", "--json"], cwd=root,
                         env=env, capture_output=True, text=True, timeout=60)
    assert log.returncode == 0, log.stderr
    assert agent_sessions(log.stdout) == {"npm-test"}, log.stdout


def test_a_bad_data_dir_and_a_missing_binary_are_clear_errors(project, tmp_path):
    root, env = project
    not_a_dir = tmp_path / "a-file"
    not_a_dir.write_text("x")
    (root / "errors.mjs").write_text(ERRORS)
    run = subprocess.run(["node", "errors.mjs", str(not_a_dir)], cwd=root, env=env,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert "BAD DATA: true memfs ended: memfs: the data dir" in out and "not a directory" in out, out
    assert "MISSING: true MEMFS_BIN names \"/nonexistent/memfs\", which is not an executable file" in out, out


@pytest.mark.parametrize("block", readme_blocks.of_kind("npm"), ids=repr)
def test_a_readme_block_runs_as_written_with_the_installed_packages(project, tmp_path, block):
    """The `npm` blocks of README.md and the package's README, as pasted
    into an ES module of the project, with the key and the API's address in
    the environment as a user has them (the scripted API here)."""
    root, env = project
    (root / "snippet.mjs").write_text(block.text)
    data = root / "memory"
    shutil.rmtree(data, ignore_errors=True)
    with ScriptedApi(remember_ana()) as api:
        run = subprocess.run(["node", "snippet.mjs"], cwd=root, capture_output=True, text=True,
                             env={**env, "ANTHROPIC_API_KEY": "sk-scripted", "ANTHROPIC_BASE_URL": api.url},
                             timeout=120)
        assert run.returncode == 0, f"{block}:\n{run.stderr[-3000:]}"
        api.check()
    assert "Noted: Ana prefers email." in run.stdout, run.stdout
    assert (data / "memories" / "ana.md").read_text() == "Ana prefers email.\n"
