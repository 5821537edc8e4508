"""Env deploy tests: an in-process hub in tmp_path deploying example envs."""

from __future__ import annotations

import pytest


@pytest.fixture
def session(tmp_path):
    """A hub session (kits.env_deploy.hub_session) in tmp_path, closed after the test."""
    from kits.env_deploy import hub_session

    s = hub_session(tmp_path)
    try:
        yield s
    finally:
        s.close()
