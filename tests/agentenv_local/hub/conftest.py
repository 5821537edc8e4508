"""Fixtures for the hub tests (their helpers are tests/kits/hub.py)."""

from __future__ import annotations

import pytest
from kits.hub import InProcessHub, clean_env


@pytest.fixture
def hub_and_client(tmp_path):
    """This test process as a project's hub, and a second session in it as a client of that hub."""
    from agentenv_local.config import load_config
    from agentenv_local.hub import connect

    project = tmp_path / "proj"
    project.mkdir()
    hub = InProcessHub(project)
    client = connect(start=project, config=load_config(project, environ=clean_env()), become_hub=False)
    assert not client.is_hub
    yield hub, client
    client.close()
    hub.close()
