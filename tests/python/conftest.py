"""Shared fixtures: the memfs binary under test and fresh data dirs."""
import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def memfs_bin() -> str:
    path = os.environ.get("MEMFS_BIN", str(REPO / "target" / "release" / "memfs"))
    assert os.access(path, os.X_OK), f"build memfs first (cargo build --release): {path}"
    return path


@pytest.fixture(scope="session")
def failpoints_bin() -> str:
    """memfs built with the `failpoints` feature (scripts/integrations.sh
    builds it into target/failpoints)."""
    path = os.environ.get("MEMFS_FAILPOINTS_BIN",
                          str(REPO / "target" / "failpoints" / "release" / "memfs"))
    if not os.access(path, os.X_OK):
        why = f"no failpoints build of memfs at {path} (cargo build --release --features failpoints --target-dir target/failpoints)"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    return path


@pytest.fixture
def data_dir(tmp_path) -> pathlib.Path:
    return tmp_path / "data"
