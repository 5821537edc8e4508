"""Helpers for the agent tests (`from kits.agents import ...`): real HTTP only."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path

from kits.servers import announced_subprocess, run, serving_app, uvicorn_thread  # noqa: F401 - run: the tests' helper

ROOT = Path(__file__).resolve().parents[2]
ECHO = ROOT / "examples" / "envs" / "echo" / "server.py"
REF_PYTHON = ROOT / ".venv-ref" / "bin" / "python"



@contextlib.contextmanager
def serving_agent(agent):
    with serving_app(agent.app()) as base:
        yield base


@contextlib.contextmanager
def subprocess_server(argv: list[str], *, python: str = sys.executable, env_vars: dict | None = None):
    """Run `python ARGV...` that prints a "serving on http://..." line to stderr; yields (base URL, process)."""
    with announced_subprocess([python, *argv], env={**os.environ, **(env_vars or {})}, scan_seconds=60) as (url, proc):
        yield url.rstrip("/"), proc


def wait_healthy(base: str, what: str = "the reference agent", timeout: float = 30) -> None:
    """Poll `GET base/health` until it answers 200; raise if it has not within `timeout` seconds."""
    import httpx2

    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx2.get(base + "/health").status_code == 200:
                return
        except httpx2.TransportError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start")
        time.sleep(0.1)
