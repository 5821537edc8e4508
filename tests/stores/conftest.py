"""Shared fixtures for the store tests: a real DuckDB file in the test's tmp dir."""

from __future__ import annotations

import pytest
from kits.store import open_store


@pytest.fixture
def store(tmp_path):
    s = open_store(tmp_path)
    yield s
    s.close()
