"""The README's demo runs to the end and leaves the memory the session implies."""
import os
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not (os.path.exists("/dev/fuse") and os.geteuid() == 0), reason="the demo mounts: needs root and /dev/fuse")
def test_demo_replays_the_session(tmp_path):
    out = subprocess.run([str(REPO / "scripts" / "demo.sh"), "--pace", "0", "--no-wait"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("agent -> ") == 12
    assert "ERROR The path /memories/customers/initech.md does not exist" in out.stdout
    memories = tmp_path / "memfs-demo" / "memory" / "memories"
    assert sorted(p.relative_to(memories).as_posix() for p in memories.rglob("*") if p.is_file()) == [
        "accounts/acme.md",
        "accounts/globex.md",
        "progress.md",
    ]
    assert "- prefers email follow-ups, never calls" in (memories / "accounts" / "acme.md").read_text()
    assert not os.path.ismount(tmp_path / "memfs-demo" / "mnt")
