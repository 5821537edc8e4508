"""Fixtures for the agent tests; helpers live in tests/kits/agents.py."""

from __future__ import annotations

import pytest
from kits.agents import ECHO, serving_app


@pytest.fixture()
def echo_url():
    """The echo env served over HTTP; yields its MCP URL."""
    from agentenv_local.env import load_env

    with serving_app(load_env(ECHO).app()) as base:
        yield base + "/mcp"
