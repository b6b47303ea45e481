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


@pytest.fixture
def data_dir(tmp_path) -> pathlib.Path:
    return tmp_path / "data"
