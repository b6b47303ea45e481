"""memfs as the memory of the Anthropic Python SDK's tool runner.

`MemfsMemoryTool` is a drop-in for `BetaLocalFilesystemMemoryTool`:

    from memfs_memory import MemfsMemoryTool

    memory = MemfsMemoryTool()                                   # the bundled memfs on ./memory
    # or: MemfsMemoryTool(data="~/agent-memory", session="support-bot")
    # or: MemfsMemoryTool(socket="./memory/.memfs/sock")         # a running `memfs mount`
    # or: MemfsMemoryTool(spawn=["memfs", "--data", "./memory"])  # any memfs command
    runner = client.beta.messages.tool_runner(
        model="claude-opus-5", max_tokens=1024, messages=[...], tools=[memory]
    )

`AsyncMemfsMemoryTool` is the same for `AsyncAnthropic`'s tool runner.

Every command is one JSON line to memfs and one line back; an error result
becomes the SDK's `ToolError`, so the runner sends it with `is_error: true`.
Results are durable on disk before they come back. The wheel carries the
`memfs` binary itself (also on PATH as `memfs`); `MEMFS_BIN` names another.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import socket as _socket
import subprocess
import threading
from typing import Any, Optional, Sequence

from anthropic.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool, ToolError

from ._binary import MemfsError, find_memfs, platform_name

__all__ = ["MemfsMemoryTool", "AsyncMemfsMemoryTool", "MemfsError", "find_memfs"]


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
    try:
        proc = subprocess.Popen([*argv, *named, "serve", "--stdio"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as err:
        raise MemfsError(f"cannot start memfs ({argv[0]}): {err.strerror}; reinstall memfs-memory, "
                         "or set MEMFS_BIN to a memfs binary") from None
    # memfs' log goes to stderr: drained, so that it never blocks on a full
    # pipe, keeping the last lines to say why memfs ended if it does.
    said: "collections.deque[bytes]" = collections.deque(maxlen=5)
    drain = threading.Thread(target=_drain, args=(proc.stderr, said), daemon=True)
    drain.start()

    def ended() -> MemfsError:
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        drain.join(timeout=1)
        last = " ".join(line.decode("utf-8", "replace").strip() for line in said)
        return MemfsError("memfs ended" + (f": {last}" if last else " without saying why"))

    def write(data: bytes) -> None:
        try:
            proc.stdin.write(data)
            proc.stdin.flush()
        except OSError:
            raise ended() from None

    def read() -> bytes:
        line = proc.stdout.readline()
        if not line:
            raise ended()
        return line

    def close() -> None:
        # Every pipe closed, and the child reaped: nothing is left for the
        # garbage collector to warn about (the SDK's own tests run with
        # warnings as errors).
        if proc.stdin is not None and not proc.stdin.closed:
            proc.stdin.close()
        proc.wait(timeout=30)
        drain.join(timeout=5)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None and not stream.closed:
                stream.close()

    channel = _Channel(write, read, close)
    # A first line, so that a memfs that could not open its memory (a bad
    # --data) shows at once, with what it said, not at the first call. Any
    # answer means memfs is up: a memfs that attached to another owner
    # answers this hello with an error (the owner takes hellos from its own
    # connections only), and the session is named by --as either way.
    channel.call({"type": "memfs_hello", **({"session": session} if session is not None else {})})
    return channel


def _private_parents(path: str) -> None:
    """Makes each missing directory of `path`, mode 0700 whatever the
    umask (as the SDK's filesystem tool makes its parents)."""
    missing = []
    while path and not os.path.isdir(path):
        missing.append(path)
        path = os.path.dirname(path)
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            continue
        os.chmod(directory, 0o700)


def _drain(stream, said) -> None:
    try:
        for line in stream:
            said.append(line)
    except (OSError, ValueError):
        pass


class MemfsMemoryTool(BetaAbstractMemoryTool):
    """The memory tool, backed by memfs (over its Unix socket, or a child process)."""

    def __init__(
        self,
        *,
        data: Optional[str] = None,
        socket: Optional[str] = None,
        spawn: Optional[Sequence[str]] = None,
        session: Optional[str] = None,
        **kwargs: Any,
    ) -> None:
        """At most one of `data` (a data dir for the bundled memfs; the
        default, `./memory`), `socket` (a running memfs's socket) and `spawn`
        (the memfs command to start). `session` names this agent session;
        memfs records the name with each change."""
        super().__init__(**kwargs)
        if sum(x is not None for x in (data, socket, spawn)) > 1:
            raise ValueError("give at most one of data= (a data dir), socket= (a running memfs) "
                             "or spawn= (the memfs command to start)")
        if socket is None and spawn is None:
            where = os.path.expanduser(data if data is not None else "./memory")
            # A program naming its data dir gets what the SDK's filesystem
            # tool does: the missing parents made, private (0700). (The
            # command line's typo guard is for a person.)
            _private_parents(os.path.dirname(os.path.abspath(where)))
            spawn = [find_memfs(), "--data", where]
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


class AsyncMemfsMemoryTool(BetaAsyncAbstractMemoryTool):
    """`MemfsMemoryTool` for the async client's tool runner: the same memfs
    connection, each call run in a worker thread so that the event loop
    never waits on the disk."""

    def __init__(self, **kwargs: Any) -> None:
        tool_kwargs = {k: kwargs.pop(k) for k in ("data", "socket", "spawn", "session") if k in kwargs}
        super().__init__(**kwargs)
        self._sync = MemfsMemoryTool(**tool_kwargs)

    async def _run(self, command: Any) -> Any:
        return await asyncio.to_thread(self._sync._run, command)

    async def view(self, command):  # type: ignore[override]
        return await self._run(command)

    async def create(self, command):  # type: ignore[override]
        return await self._run(command)

    async def str_replace(self, command):  # type: ignore[override]
        return await self._run(command)

    async def insert(self, command):  # type: ignore[override]
        return await self._run(command)

    async def delete(self, command):  # type: ignore[override]
        return await self._run(command)

    async def rename(self, command):  # type: ignore[override]
        return await self._run(command)

    async def run(self, tool_input: dict[str, Any]) -> Any:
        return await self._run(tool_input)

    async def clear_all_memory(self) -> str:  # type: ignore[override]
        return await asyncio.to_thread(self._sync.clear_all_memory)

    def close(self) -> None:
        self._sync.close()

    async def __aenter__(self) -> "AsyncMemfsMemoryTool":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()
