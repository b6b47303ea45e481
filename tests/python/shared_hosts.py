"""Several memfs hosts sharing one store through a real PostgreSQL: a
throwaway server (scripts/pg.sh) and memfs processes, each with its own
copy (--cache) and its own mount."""
import json
import os
import pathlib
import signal
import socket
import shutil
import subprocess
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
PG = str(REPO / "scripts" / "pg.sh")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Postgres:
    """A throwaway server in `dir` on a free port."""

    def __init__(self, root: pathlib.Path):
        # (Not under pytest's folders, which only root may enter: the
        # server runs as the user postgres.)
        top = pathlib.Path(tempfile.mkdtemp(prefix="memfs-pg-"))
        top.chmod(0o755)
        self.top = top
        self.dir = top / "data"
        self.port = free_port()
        self.base = None

    def start(self) -> str:
        out = subprocess.run([PG, "start", str(self.dir), str(self.port)],
                             check=True, capture_output=True, text=True, timeout=120)
        self.base = out.stdout.strip()
        return self.base

    def crash(self):
        """Stops it the way a crash would (pg_ctl stop -m immediate)."""
        subprocess.run([PG, "kill", str(self.dir)], check=True, capture_output=True, timeout=60)

    def stop(self):
        subprocess.run([PG, "stop", str(self.dir)], capture_output=True, timeout=60)

    def remove(self):
        self.stop()
        shutil.rmtree(self.top, ignore_errors=True)

    def url(self, store: str) -> str:
        return f"{self.base}?store={store}"

    def sql(self, query: str) -> list[list[str]]:
        out = subprocess.run(["psql", "-At", "-F", "\t", self.base, "-c", query],
                             check=True, capture_output=True, text=True, timeout=60)
        return [line.split("\t") for line in out.stdout.splitlines() if line]


class Host:
    """One memfs host: its copy of the store and, once mounted, its mount."""

    def __init__(self, memfs: str, url: str, root: pathlib.Path, name: str):
        self.memfs = memfs
        self.url = url
        self.cache = root / name
        self.mnt = root / f"{name}-mnt"
        self.proc = None
        self.log = root / f"{name}.log"
        # Global flags every command of this host's gets (its settings).
        self.flags: list[str] = []

    def args(self, *rest) -> list[str]:
        return [self.memfs, "--data", self.url, "--cache", str(self.cache), *self.flags, *rest]

    def mount(self):
        self.mnt.mkdir(exist_ok=True)
        until = time.monotonic() + 60
        while True:
            self.proc = subprocess.Popen(self.args("mount", str(self.mnt)),
                                         stdout=open(self.log, "ab"), stderr=subprocess.STDOUT)
            try:
                wait_for(lambda: os.path.ismount(self.mnt) or self.proc.poll() is not None,
                         30, f"{self.mnt} mounted")
            except AssertionError:
                self.proc.kill()
                raise
            if os.path.ismount(self.mnt):
                return
            # (A one-call `memfs exec` owned the copy for a moment, and does
            # not serve mounts: once it is done, this one owns it.)
            assert time.monotonic() < until, self.log.read_text()[-2000:]
            time.sleep(0.2)

    def stop(self, sig=signal.SIGTERM):
        if self.proc is None:
            return
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=30)
        finally:
            if sig == signal.SIGKILL or os.path.ismount(self.mnt):
                subprocess.run(["umount", "-l", str(self.mnt)], capture_output=True)
            self.proc = None

    def tool(self, **command) -> dict:
        out = subprocess.run(self.args("exec", json.dumps(command)),
                             capture_output=True, text=True, timeout=60)
        assert out.stdout, out.stderr
        return json.loads(out.stdout)

    def log_rows(self) -> list[dict]:
        out = subprocess.run(self.args("log", "--json"), capture_output=True, text=True,
                             timeout=60, check=True)
        return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def wait_for(check, seconds: float, what: str):
    until = time.monotonic() + seconds
    last = None
    while time.monotonic() < until:
        try:
            last = check()
            if last:
                return last
        except OSError as e:
            last = e
        time.sleep(0.02)
    raise AssertionError(f"not within {seconds}s: {what} (last: {last!r})")


def read(path: pathlib.Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None
