"""Helpers for the docs server tests: the repo root, the `agentenv` executable, and an `agentenv docs serve
--http --port 0` subprocess (real transports only)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from kits.docs_server import agentenv_exe
from kits.servers import announced_subprocess

ROOT = Path(__file__).resolve().parents[3]


@contextlib.contextmanager
def docs_http_server(cwd: Path):
    """`agentenv docs serve --http --port 0` in `cwd`; yields its MCP URL."""
    with announced_subprocess([agentenv_exe(), "docs", "serve", "--http", "--port", "0"], what="docs server",
                              cwd=cwd) as (url, _proc):
        yield url


@pytest.fixture(scope="module")
def docs_url(tmp_path_factory):
    with docs_http_server(tmp_path_factory.mktemp("docs-http")) as url:
        yield url
