"""Fixtures of the coding-CLI tests: a work dir (a git repository), a HOME, and the echo env served over MCP
streamable HTTP. The helpers are in agent_cli_kit.py."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_cli_kit import ROOT


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A git repository the CLI works in (several CLIs want one)."""
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    return work


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def echo_mcp_url() -> Iterator[str]:
    """The echo example env served over MCP streamable HTTP on loopback; yields its /mcp URL."""
    proc = subprocess.Popen([sys.executable, "-m", "agentenv_local.env", str(ROOT / "examples/envs/echo/server.py"),
                             "--host", "127.0.0.1", "--port", "0"], stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.search(r"serving on (http://\S+)", line)
        assert found, f"the echo env did not start: {line!r}"
        yield found.group(1) + "/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
