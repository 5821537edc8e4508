"""Env deploy tests: an in-process hub in tmp_path deploying example envs."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "hub"))


@pytest.fixture(autouse=True)
def _no_agentenv_env(monkeypatch):
    for key in list(os.environ):
        if key.startswith("AGENTENV_"):
            monkeypatch.delenv(key)
