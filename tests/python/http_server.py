"""A real `memfs --stores ROOT serve --http 127.0.0.1:0` for the tests, and tokens made with `memfs token create`.

`listen` is the address it serves on (default 127.0.0.1:0, a free port on
loopback); `wrap` a command it runs under (e.g. `ip netns exec NS`)."""
import re
import signal
import subprocess
import threading
import time


class Server:
    def __init__(self, memfs_bin, root, *extra, wrap=(), listen="127.0.0.1:0", cwd=None):
        self.memfs_bin = memfs_bin
        self.root = root
        self.proc = subprocess.Popen(
            [*wrap, memfs_bin, "--stores", str(root), "serve", "--http", listen, *extra],
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.log = []
        deadline = time.time() + 20
        self.url = None
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.log.append(line)
            m = re.search(r"on (http://\S+:\d+)", line)
            if m:
                self.url = m.group(1)
                break
        assert self.url, f"the server did not start: {''.join(self.log)}"
        # Keep reading its log so that it never blocks on a full pipe.
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def token(self, *args):
        out = subprocess.run(
            [self.memfs_bin, "--stores", str(self.root), "token", "create", *args],
            capture_output=True, text=True, check=True,
        )
        secret = out.stdout.strip()
        assert re.fullmatch(r"memfs_[0-9a-f]{64}", secret), out
        return secret

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode
