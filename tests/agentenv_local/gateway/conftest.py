"""Fixtures for the gateway server tests; helpers live in gateway_testkit.py."""

from __future__ import annotations

import pytest
from gateway_testkit import ECHO, env_subprocess
from test_env_changes import kv, kv_file  # noqa: F401 - the env tests' changelog env (KV_SOURCE), for test_gateway_changes


@pytest.fixture(scope="module")
def echo_url():
    """The echo example env served over real HTTP by a subprocess: its MCP URL."""
    with env_subprocess(ECHO) as (base, _proc):
        yield base + "/mcp"
