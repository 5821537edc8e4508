"""Helpers for the gateway server tests (imported by name): real transports only: uvicorn on a free loopback
port in a thread, env subprocesses, mcp 2.x clients over HTTP."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
ECHO = ROOT / "examples" / "envs" / "echo" / "server.py"
NOTES = ROOT / "examples" / "envs" / "notes" / "server.py"
ANNOUNCE = re.compile(r"serving on (http://\S+)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load(path):
    from agentenv_local.env import load_env

    return load_env(path)


@contextlib.contextmanager
def serving_app(app):
    """Serve an ASGI app with uvicorn in a thread on a free 127.0.0.1 port; yields the base URL."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
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


@contextlib.contextmanager
def env_subprocess(target, *args: str):
    """`python -m agentenv_local.env TARGET --port 0`; yields (base URL, process)."""
    proc = subprocess.Popen([sys.executable, "-m", "agentenv_local.env", str(target), "--port", "0", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env=dict(os.environ))
    try:
        line = proc.stderr.readline()
        match = ANNOUNCE.search(line)
        if not match:
            proc.kill()
            raise RuntimeError(f"the env did not announce its address: {line}{proc.stderr.read()}")
        threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
        yield match.group(1), proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextlib.contextmanager
def gateway_serving(name, children, **options):
    """A Gateway over `children`, served over HTTP; yields (base URL, gateway)."""
    from agentenv_local.gateway.server import Gateway

    gw = Gateway(name, children, **options)
    with serving_app(gw.app()) as base:
        yield base, gw


def http(base, **headers):
    import httpx2

    return httpx2.Client(base_url=base, headers=headers, timeout=30)
