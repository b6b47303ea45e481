#!/usr/bin/env python3
"""What memfs' SessionStart hook costs Claude Code's start.

Two Claude Code config dirs (CLAUDE_CONFIG_DIR), the same project enabled on
memfs in both (`memfs claude-code enable`, each its own mount), memfs' hook
taken out of the second one's settings: `claude -p hi` against a scripted
Messages API on loopback is timed with farm-bench, A (with the hook) and B
(without) in turn, pair by pair. Then `memfs claude-code ensure` alone (the
mount up: what the hook does on every start) against `true`.

usage: scripts/bench_claude_code_hook.py [RUNS]   (needs root, /dev/fuse, and
CLAUDE_BIN or scripts/claude_code.sh's install; MEMFS_BIN or target/release/memfs)
"""
import json
import os
import pathlib
import shlex
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests/python"))
from scripted_api import ScriptedApi  # noqa: E402

RUNS = sys.argv[1] if len(sys.argv) > 1 else "10"
MEMFS = os.environ.get("MEMFS_BIN", str(ROOT / "target/release/memfs"))
CLAUDE = os.environ.get("CLAUDE_BIN") or subprocess.run(
    ["bash", str(ROOT / "scripts/claude_code.sh")], capture_output=True, text=True, check=True).stdout.strip()


def own(config):
    """A config dir's environment: Claude Code's config there, memfs' data beside it."""
    return {"CLAUDE_CONFIG_DIR": str(config), "XDG_DATA_HOME": f"{config}-data"}


def main():
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="memfs-hook-bench-"))
    home, work = tmp / "home", tmp / "work"
    home.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}
    configs = [tmp / "with-hook", tmp / "without-hook"]
    try:
        for config in configs:
            on = subprocess.run([MEMFS, "claude-code", "enable"], cwd=work, env={**env, **own(config)},
                                capture_output=True, text=True, check=True)
            print(on.stdout.strip().splitlines()[0][:160])
        settings = configs[1] / "settings.json"
        settings.write_text(json.dumps({k: v for k, v in json.loads(settings.read_text()).items() if k != "hooks"}))
        with ScriptedApi([[{"type": "text", "text": "Hello."}]]) as api:
            def claude(config):
                return ["env", f"HOME={home}", *(f"{k}={v}" for k, v in own(config).items()), "ANTHROPIC_API_KEY=sk-ant-scripted",
                        f"ANTHROPIC_BASE_URL={api.url}", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
                        f"PATH={env['PATH']}", "sh", "-c", f"cd {work} && exec {CLAUDE} -p hi"]
            a, b = claude(configs[0]), claude(configs[1])
            print(f"\nClaude Code's start, with memfs' hook (A) and without (B), {RUNS} runs each:", flush=True)
            subprocess.run(["farm-bench", "-n", RUNS, "--timeout", "600", "--vs", shlex.join(b), "--", *a], check=True)
        print("\nmemfs claude-code ensure with the mount up (A) against true (B):", flush=True)
        ensure = ["env", f"HOME={home}", *(f"{k}={v}" for k, v in own(configs[0]).items()), "sh", "-c",
                  f"cd {work} && exec {MEMFS} claude-code ensure"]
        subprocess.run(["farm-bench", "-n", "30", "--vs", "sh -c true", "--", *ensure], check=True)
    finally:
        for config in configs:
            subprocess.run([MEMFS, "claude-code", "disable"], cwd=work, env={**env, **own(config)},
                           capture_output=True)


if __name__ == "__main__":
    main()
