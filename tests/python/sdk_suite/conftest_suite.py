# Copied into the suite's run directory as conftest.py by test_sdk_suite.py.
"""Closes every memfs tool a test of the SDK's suite made (the SDK's own
tool holds no process, so its tests never close one)."""
import pytest

import memfs_shim


@pytest.fixture(autouse=True)
def _close_memfs_tools():
    yield
    while memfs_shim.MADE:
        memfs_shim.MADE.pop().close()
