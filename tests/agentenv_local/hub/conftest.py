"""Hub tests: real `agentenv` subprocesses and real DuckDB files in tmp_path."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(autouse=True)
def _no_agentenv_env(monkeypatch):
    """Tests find their project from tmp_path, never from the developer's AGENTENV_* settings."""
    for key in list(os.environ):
        if key.startswith("AGENTENV_"):
            monkeypatch.delenv(key)
