"""memfs as the memory of the Anthropic Python SDK's tool runner.

`MemfsMemoryTool` is a drop-in for `BetaLocalFilesystemMemoryTool`:

    from memfs_memory import MemfsMemoryTool

    memory = MemfsMemoryTool(socket="./memory/.memfs/sock")     # a running `memfs mount`
    # or: MemfsMemoryTool(spawn=["memfs", "--data", "./memory"])  # a child `memfs serve --stdio`
    runner = client.beta.messages.tool_runner(
        model="claude-opus-5", max_tokens=1024, messages=[...], tools=[memory]
    )

Every command is one JSON line to memfs and one line back; an error result
becomes the SDK's `ToolError`, so the runner sends it with `is_error: true`.
Results are durable on disk before they come back.
"""

from __future__ import annotations

import json
import os
import socket as _socket
import subprocess
import threading
from typing import Any, Optional, Sequence

from anthropic.tools import BetaAbstractMemoryTool, ToolError

__all__ = ["MemfsMemoryTool", "MemfsError"]


class MemfsError(RuntimeError):
    """memfs could not be reached, or answered something that is not a result."""


class _Channel:
    """One line out, one line back, one caller at a time."""

    def __init__(self, writer, reader, closer):
        self._writer, self._reader, self._closer = writer, reader, closer
        self._lock = threading.Lock()

    def call(self, payload: dict[str, Any]) -> dict[str, Any]:
        line = json.dumps(payload, ensure_ascii=False) + "\n"
        with self._lock:
            self._writer(line.encode("utf-8"))
            answer = self._reader()
        if not answer:
            raise MemfsError("memfs closed the connection")
        try:
            return json.loads(answer)
        except ValueError as err:
            raise MemfsError(f"memfs answered something that is not JSON: {answer[:200]!r}") from err

    def close(self) -> None:
        self._closer()


def _socket_channel(path: str) -> _Channel:
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError as err:
        sock.close()
        raise MemfsError(f"cannot reach memfs at {path}: {err.strerror}; is `memfs mount` running?") from err
    reader = sock.makefile("rb")
    return _Channel(sock.sendall, reader.readline, lambda: (reader.close(), sock.close()))


def _child_channel(argv: Sequence[str], session: Optional[str]) -> _Channel:
    named = ["--as", session] if session is not None else []
    proc = subprocess.Popen([*argv, *named, "serve", "--stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def write(data: bytes) -> None:
        proc.stdin.write(data)
        proc.stdin.flush()

    def close() -> None:
        proc.stdin.close()
        proc.wait(timeout=30)

    return _Channel(write, proc.stdout.readline, close)


class MemfsMemoryTool(BetaAbstractMemoryTool):
    """The memory tool, backed by memfs (over its Unix socket, or a child process)."""

    def __init__(
        self,
        *,
        socket: Optional[str] = None,
        spawn: Optional[Sequence[str]] = None,
        session: Optional[str] = None,
        **kwargs: Any,
    ) -> None:
        """`session` names this agent session; memfs records the name with each change."""
        super().__init__(**kwargs)
        if (socket is None) == (spawn is None):
            raise ValueError("give exactly one of socket= (a running memfs) or spawn= (the memfs command to start)")
        self._socket, self._spawn, self._session = socket, spawn, session
        if socket is not None:
            self._channel = _socket_channel(socket)
            if session is not None:
                hello = self._channel.call({"type": "memfs_hello", "session": session})
                if hello.get("is_error") is not False:
                    raise MemfsError(f"memfs refused the session name: {hello!r}")
        else:
            self._channel = _child_channel(spawn, session)

    def _run(self, command: Any) -> Any:
        payload = command.model_dump(exclude_none=True) if hasattr(command, "model_dump") else dict(command)
        answer = self._channel.call(payload)
        if "content" not in answer or "is_error" not in answer:
            raise MemfsError(f"memfs answered without a result: {answer!r}")
        if answer["is_error"]:
            raise ToolError(answer["content"])
        return answer["content"]

    # The six commands all take the same road.
    def view(self, command):  # type: ignore[override]
        return self._run(command)

    def create(self, command):  # type: ignore[override]
        return self._run(command)

    def str_replace(self, command):  # type: ignore[override]
        return self._run(command)

    def insert(self, command):  # type: ignore[override]
        return self._run(command)

    def delete(self, command):  # type: ignore[override]
        return self._run(command)

    def rename(self, command):  # type: ignore[override]
        return self._run(command)

    def run(self, tool_input: dict[str, Any]) -> Any:
        """For programs: any tool input as a dict, including memfs'
        `expected_sha256` precondition (not in the model's tool schema). An
        error result raises `ToolError`."""
        return self._run(tool_input)

    def clear_all_memory(self) -> str:  # type: ignore[override]
        """Deletes everything under /memories (each delete is kept in memfs' history).

        Clearing is the application's act, not the agent's: it carries the
        owner's key (read from the data dir's `.memfs/key`, beside the
        socket), or, for a memfs this adapter spawned, runs `memfs clear`."""
        if self._socket is not None:
            key_file = os.path.join(os.path.dirname(self._socket), "key")
            try:
                with open(key_file, encoding="utf-8") as f:
                    key = f.read().strip()
            except OSError as err:
                raise MemfsError(f"cannot read memfs' key beside its socket: {err.strerror}") from err
            answer = self._channel.call({"type": "memfs_clear", "key": key})
            if answer.get("is_error") is not False:
                raise ToolError(answer.get("content", "memfs could not clear the memory"))
            return answer["content"]
        named = ["--as", self._session] if self._session is not None else []
        done = subprocess.run([*self._spawn, *named, "clear", "--yes"], capture_output=True, text=True)
        if done.returncode != 0:
            raise ToolError(done.stderr.strip() or "memfs could not clear the memory")
        return done.stdout.strip()

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "MemfsMemoryTool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
