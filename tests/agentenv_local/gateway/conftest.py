"""Fixtures for the gateway server tests; helpers live in tests/kits/gateway.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from kits.gateway import ECHO, env_subprocess

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "env"))  # the env tests' fixtures, below
from test_env_changes import kv, kv_file  # noqa: E402,F401 - the env tests' changelog env (KV_SOURCE), for test_gateway_changes


@pytest.fixture(scope="module")
def echo_url():
    """The echo example env served over real HTTP by a subprocess: its MCP URL."""
    with env_subprocess(ECHO) as (base, _proc):
        yield base + "/mcp"
