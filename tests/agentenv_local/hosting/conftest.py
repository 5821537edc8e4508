"""Env deploy tests: an in-process hub in tmp_path deploying example envs."""

from __future__ import annotations

import pytest


@pytest.fixture
def session(tmp_path):
    """A hub session (kits.env_deploy.hub_session) in tmp_path, closed after the test."""
    from kits.env_deploy import open_hub_session

    with open_hub_session(tmp_path) as s:
        yield s
