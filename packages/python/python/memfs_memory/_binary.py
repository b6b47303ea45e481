"""Finding the memfs binary the wheel carries (installed beside the
interpreter's scripts, as `memfs`), or the one `MEMFS_BIN` names."""

from __future__ import annotations

import os
import platform
import sys
import sysconfig
import warnings

# The platforms a wheel is built for (scripts/package_python.sh).
BUILT_FOR = ("linux-x86_64",)


class MemfsError(RuntimeError):
    """memfs could not be found, started or reached, or answered something
    that is not a result. The message says what to do."""


def platform_name() -> str:
    """This machine as the wheels name it: `linux-x86_64`, `darwin-arm64`, ..."""
    return f"{sys.platform}-{platform.machine().lower()}"


def _candidates():
    env = os.environ.get("MEMFS_BIN")
    if env:
        yield env
        return
    name = "memfs.exe" if sys.platform == "win32" else "memfs"
    seen = set()
    schemes = [None, "posix_user" if os.name == "posix" else "nt_user"]
    for scheme in schemes:
        try:
            scripts = sysconfig.get_path("scripts", scheme) if scheme else sysconfig.get_path("scripts")
        except KeyError:
            continue
        if scripts and scripts not in seen:
            seen.add(scripts)
            yield os.path.join(scripts, name)
    # A virtual environment's bin, when sysconfig points elsewhere.
    yield os.path.join(os.path.dirname(sys.executable), name)


def find_memfs() -> str:
    """The memfs binary: `MEMFS_BIN` if set, else the one this package
    installed. Raises `MemfsError` saying what to do when there is none."""
    for path in _candidates():
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    if os.environ.get("MEMFS_BIN"):
        raise MemfsError(f"MEMFS_BIN names {os.environ['MEMFS_BIN']!r}, which is not an executable file")
    here = platform_name()
    if here not in BUILT_FOR:
        raise MemfsError(
            f"memfs-memory has no memfs binary for {here} (built for: {', '.join(BUILT_FOR)}); "
            "build memfs from source (cargo install --git ...) and set MEMFS_BIN, or pass socket= to reach a running memfs"
        )
    raise MemfsError("the memfs binary of memfs-memory is missing; reinstall it "
                     "(pip install --force-reinstall memfs-memory), or set MEMFS_BIN")


def _say_at_import() -> None:
    here = platform_name()
    if here not in BUILT_FOR and not os.environ.get("MEMFS_BIN"):
        warnings.warn(
            f"memfs-memory has no memfs binary for {here} (built for: {', '.join(BUILT_FOR)}): "
            "set MEMFS_BIN to a memfs built from source, or pass socket= to reach a running memfs",
            RuntimeWarning,
            stacklevel=3,
        )


_say_at_import()
