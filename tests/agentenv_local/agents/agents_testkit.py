"""Helpers for the agent tests (imported by name; this folder has no __init__.py): real HTTP only."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
ECHO = ROOT / "examples" / "envs" / "echo" / "server.py"
REF_PYTHON = ROOT / ".venv-ref" / "bin" / "python"
ANNOUNCE = re.compile(r"serving on (http://\S+)")


def run(coro):
    return asyncio.run(coro)


@contextlib.contextmanager
def serving_app(app):
    """Serve an ASGI app with uvicorn in a thread on 127.0.0.1 (a bind_socket port 0); yields the base URL."""
    import uvicorn

    from agentenv_local.env.serve import bind_socket

    sock = bind_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()


@contextlib.contextmanager
def serving_agent(agent):
    with serving_app(agent.app()) as base:
        yield base


@contextlib.contextmanager
def subprocess_server(argv: list[str], *, python: str = sys.executable, env_vars: dict | None = None):
    """Run `python ARGV...` that prints a "serving on http://..." line to stderr; yields (base URL, process)."""
    proc = subprocess.Popen([python, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env_vars or {})}, cwd=ROOT)
    try:
        lines = []
        deadline = time.monotonic() + 60
        match = None
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            match = ANNOUNCE.search(line)
            if match:
                break
        if not match:
            proc.kill()
            raise RuntimeError("the server did not announce its address: " + "".join(lines) + proc.stderr.read())
        threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
        yield match.group(1).rstrip("/"), proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
