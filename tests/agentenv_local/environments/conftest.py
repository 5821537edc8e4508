"""Env deploy tests: an in-process hub in tmp_path deploying example envs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "hub"))


@pytest.fixture
def session(tmp_path):
    """A hub session (env_deploy_testkit.hub_session) in tmp_path, closed after the test."""
    from env_deploy_testkit import hub_session

    s = hub_session(tmp_path)
    try:
        yield s
    finally:
        s.close()
