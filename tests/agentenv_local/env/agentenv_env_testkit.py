"""Helpers for the env SDK tests (imported by name: this folder has no __init__.py): real transports only (uvicorn on a free loopback port, subprocesses, stdio)."""

from __future__ import annotations

import asyncio
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


def run(coro):
    return asyncio.run(coro)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(env, **app_options):
    """Serve `env.app()` with uvicorn in a thread on a free 127.0.0.1 port; yields the base URL."""
    import uvicorn

    port = free_port()
    config = uvicorn.Config(env.app(**app_options), host="127.0.0.1", port=port, log_level="warning",
                            lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


ANNOUNCE = re.compile(r"serving on (http://\S+)")


@contextlib.contextmanager
def env_subprocess(target: str | Path, *args: str, env_vars: dict | None = None):
    """`python -m agentenv_local.env TARGET --port 0 ...` as a subprocess; yields (base URL, process)."""
    environ = {**os.environ, **(env_vars or {})}
    proc = subprocess.Popen([sys.executable, "-m", "agentenv_local.env", str(target), "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environ, cwd=ROOT)
    try:
        line = proc.stderr.readline()
        match = ANNOUNCE.search(line)
        if not match:
            proc.kill()
            rest = proc.stderr.read()
            raise RuntimeError(f"the env did not announce its address: {line}{rest}")
        yield match.group(1), proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream:
                stream.close()


# The echo example's card, exactly as served.
ECHO_CARD = {
    "name": "echo",
    "description": "Says back what it's sent; remembers what it was loaded with.",
    "protocolVersion": "1.0",
    "url": "/agentenv",
    "preferredTransport": "JSONRPC",
    "additionalInterfaces": [{"url": "/mcp", "transport": "mcp"}],
    "capabilities": {
        "extensions": [{
            "uri": "urn:agentenv:echo-config/v1",
            "description": "Tune how echo behaves.",
            "params": {"endpoint": "/agentenv/ext/configure", "methods": {"configure": {"method": "POST", "request": {
                "properties": {"calls": {"title": "Calls", "type": "integer"},
                               "reason": {"default": "", "title": "Reason", "type": "string"}},
                "required": ["calls"], "title": "configureParams", "type": "object"}}}},
            "required": False,
        }],
        "tools": [
            {"name": "echo", "description": "Return the text it's sent.", "inputSchema": {
                "properties": {"text": {"description": "The text to say back", "title": "Text", "type": "string"}},
                "required": ["text"], "title": "echoArguments", "type": "object"}},
            {"name": "whoami", "description": "Who is calling (role and session, as the gateway forwards them) and "
                                              "what time it is for the env.",
             "inputSchema": {"properties": {}, "title": "whoamiArguments", "type": "object"}},
            {"name": "fail", "description": "Always fails with a structured error (for testing clients).",
             "inputSchema": {"properties": {"code": {"default": "refused", "description": "The error code to answer with",
                                                     "title": "Code", "type": "string"}},
                             "title": "failArguments", "type": "object"}},
            {"name": "call_count", "description": "How many times echo was called (plumbing for tasks; hidden from "
                                                  "agents by default).",
             "inputSchema": {"properties": {}, "title": "call_countArguments", "type": "object"}},
        ],
        "operations": ["data/reset", "data/add", "data/get"],
    },
    "children_environments": None,
}
