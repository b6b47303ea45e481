"""The SDK's filesystem memory tool, as memfs: what the SDK's own test
suite (`tests/lib/tools/memory_tools/test_filesystem.py`) imports in place
of `BetaLocalFilesystemMemoryTool` and its async twin. `base_path=` is
memfs' data dir; after each command the plain files are brought up to date
(`memfs checkpoint`), since the suite reads them; `memory_root` is where
they are (`base_path/memories`). Every tool made is closed after each test
(conftest.py), as the SDK's own tool has nothing to close."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from memfs_memory import AsyncMemfsMemoryTool, MemfsMemoryTool, find_memfs

MADE: list = []


def _checkpoint(base: Path) -> None:
    subprocess.run([find_memfs(), "--data", str(base), "checkpoint"], capture_output=True, timeout=60)


class BetaLocalFilesystemMemoryTool(MemfsMemoryTool):
    def __init__(self, base_path: str = "./memory", **kwargs: Any) -> None:
        super().__init__(data=os.fspath(base_path), **kwargs)
        self.base_path = Path(os.fspath(base_path)).resolve()
        self.memory_root = self.base_path / "memories"
        MADE.append(self)

    def _run(self, command: Any) -> Any:
        try:
            return super()._run(command)
        finally:
            _checkpoint(self.base_path)


class BetaAsyncLocalFilesystemMemoryTool(AsyncMemfsMemoryTool):
    def __init__(self, base_path: str = "./memory", **kwargs: Any) -> None:
        from anyio import Path as AsyncPath

        super().__init__(**kwargs)
        self._sync.close()
        self._sync = BetaLocalFilesystemMemoryTool(base_path=base_path)
        # (The SDK's async tool gives its paths as anyio's.)
        self.base_path = AsyncPath(self._sync.base_path)
        self.memory_root = AsyncPath(self._sync.memory_root)
