"""Helpers for the docs server tests: the repo root, the `agentenv` executable, and an `agentenv docs serve
--http --port 0` subprocess (real transports only)."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import threading
from pathlib import Path

import pytest
from docs_server_testkit import agentenv_exe

ROOT = Path(__file__).resolve().parents[2]
ANNOUNCE = re.compile(r"serving on (http://\S+)")


@contextlib.contextmanager
def docs_http_server(cwd: Path):
    """`agentenv docs serve --http --port 0` in `cwd`; yields its MCP URL."""
    proc = subprocess.Popen([agentenv_exe(), "docs", "serve", "--http", "--port", "0"], cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        line = proc.stderr.readline()
        match = ANNOUNCE.search(line)
        if not match:
            proc.kill()
            raise RuntimeError(f"the docs server did not announce its URL: {line}{proc.stderr.read()}")
        threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
        yield match.group(1)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="module")
def docs_url(tmp_path_factory):
    with docs_http_server(tmp_path_factory.mktemp("docs-http")) as url:
        yield url
