"""`memfs import URL --store ID` and `memfs export --to URL --store ID`
against real memfs servers (`serve --http`), checked with the pinned SDK's
own client: a memory exported to one server's store, imported back into a
third memory, is the same; an endpoint that cannot be reached or refuses
the key is said before anything is written."""
import json
import os
import subprocess

import anthropic
import pytest

from http_server import Server


@pytest.fixture
def servers(memfs_bin, tmp_path):
    made = [Server(memfs_bin, tmp_path / f"root{i}") for i in range(2)]
    yield made
    for s in made:
        assert s.stop() == 0, "".join(s.log)


def run(memfs_bin, data, *args, key=None):
    env = dict(os.environ)
    env.pop("ANTHROPIC_API_KEY", None)
    if key is not None:
        env["MEMFS_TEST_KEY"] = key
    return subprocess.run([memfs_bin, "--data", str(data), *args], capture_output=True, text=True, env=env)


def files(memfs_bin, data, tmp_path, name):
    out = tmp_path / name
    r = run(memfs_bin, data, "export", "--dir", str(out))
    assert r.returncode == 0, r.stderr
    found = {}
    for root, _, names in os.walk(out / "memories"):
        for n in names:
            p = os.path.join(root, n)
            found[os.path.relpath(p, out / "memories")] = open(p, "rb").read()
    return found


def test_a_memory_goes_out_to_a_store_and_back_into_another_memory_the_same(servers, memfs_bin, tmp_path):
    a, b = servers
    admin_b = anthropic.Anthropic(api_key=b.token("--admin", "--name", "admin"), base_url=b.url, max_retries=0)
    target = admin_b.beta.memory_stores.create(name="exported").id
    writer = b.token("--name", "exporter", "--store", target)
    # A memory with nested paths, unicode, an empty file and a picture.
    src = tmp_path / "src"
    (src / "notes" / "deep").mkdir(parents=True)
    (src / "notes" / "a.md").write_text("alpha\n")
    (src / "notes" / "deep" / "ü.md").write_text("ünïcode ✓\n")
    (src / "empty.md").write_text("")
    (src / "pic.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0")
    one = tmp_path / "one"
    r = run(memfs_bin, one, "import", "--json", str(src))
    assert r.returncode == 0 and json.loads(r.stdout)["created"] == 4, r.stdout + r.stderr
    # Out to store `target` of server b.
    r = run(memfs_bin, one, "export", "--to", b.url, "--store", target, "--key-env", "MEMFS_TEST_KEY", key=writer)
    assert r.returncode == 0, r.stderr
    assert "left out pic.png: not text" in r.stderr
    # The SDK's client sees the memories there.
    listed = {m.path: m.content for m in admin_b.beta.memory_stores.memories.list(target, view="full")}
    assert listed == {"/notes/a.md": "alpha\n", "/notes/deep/ü.md": "ünïcode ✓\n", "/empty.md": ""}
    # Not into a store that holds memories.
    r = run(memfs_bin, one, "export", "--to", b.url, "--store", target, "--key-env", "MEMFS_TEST_KEY", key=writer)
    assert r.returncode == 2 and "holds memories already" in r.stderr, r.stderr
    # Back into a third memory: the same files (the picture stayed home).
    three = tmp_path / "three"
    reader = b.token("--name", "reader", "--store", target, "--read-only")
    r = run(memfs_bin, three, "import", "--json", b.url, "--store", target, "--key-env", "MEMFS_TEST_KEY", key=reader)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["created"] == 3
    before = files(memfs_bin, one, tmp_path, "x1")
    del before["pic.png"]
    assert files(memfs_bin, three, tmp_path, "x3") == before
    # Again: nothing added.
    r = run(memfs_bin, three, "import", "--json", b.url, "--store", target, "--key-env", "MEMFS_TEST_KEY", key=reader)
    assert json.loads(r.stdout)["unchanged"] == 3, r.stdout


def test_an_endpoint_that_cannot_be_reached_or_refuses_the_key_writes_nothing(servers, memfs_bin, tmp_path):
    a, _ = servers
    admin = anthropic.Anthropic(api_key=a.token("--admin", "--name", "admin"), base_url=a.url, max_retries=0)
    store = admin.beta.memory_stores.create(name="s").id
    admin.beta.memory_stores.memories.create(store, path="/x.md", content="x\n")
    cases = [
        ("http://127.0.0.1:9", "memfs_" + "0" * 64, "cannot reach"),
        (a.url, "memfs_" + "0" * 64, "refused the key"),
        (a.url, None, "no API key"),
        (a.url.replace("http", "ftp"), "k", "not an http"),
    ]
    for i, (url, key, says) in enumerate(cases):
        data = tmp_path / f"d{i}"
        r = run(memfs_bin, data, "import", url, "--store", store, "--key-env", "MEMFS_TEST_KEY", key=key)
        assert r.returncode == 2 and says in r.stderr, (url, r.stderr)
        assert not data.exists(), "something was written"
        assert "memfs_" + "0" * 64 not in r.stderr, "the key in a message"
    # A store the key does not reach: the same 404 as a missing one.
    other = a.token("--name", "other", "--store", admin.beta.memory_stores.create(name="o").id)
    r = run(memfs_bin, tmp_path / "d9", "import", a.url, "--store", store, "--key-env", "MEMFS_TEST_KEY", key=other)
    assert r.returncode == 2 and "404" in r.stderr, r.stderr
