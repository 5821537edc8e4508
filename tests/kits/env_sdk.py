"""Helpers for the env SDK tests (`from kits.env_sdk import ...`): real transports only
(uvicorn on a free loopback port, subprocesses, stdio)."""

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

from kits.servers import announced_subprocess, end_process, run, serving_app, uvicorn_thread  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]

ECHO = ROOT / "examples" / "envs" / "echo" / "server.py"
NOTES = ROOT / "examples" / "envs" / "notes" / "server.py"



def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(env, **app_options):
    """Serve `env.app()` with uvicorn in a thread on a free 127.0.0.1 port; yields the base URL."""
    with serving_app(env.app(**app_options)) as base:
        yield base


@contextlib.contextmanager
def env_subprocess(target: str | Path, *args: str, env_vars: dict | None = None):
    """`python -m agentenv_local.env TARGET --port 0 ...` as a subprocess; yields (base URL, process).

    Its stderr is drained after the address line, so a chatty server never blocks on a full pipe.
    """
    with announced_subprocess([sys.executable, "-m", "agentenv_local.env", str(target), "--port", "0", *args],
                              what="env", env={**os.environ, **(env_vars or {})}) as (url, proc):
        yield url, proc


# An env file the hot-reload tests rewrite under a running `agentenv env dev`: V2 adds `shout`.
DEV_V1 = '''
from agentenv_local.env import Env, environment_card, tool


@environment_card(name="devecho", description="version one")
class DevEcho(Env):
    @tool()
    def echo(self, text: str) -> str:
        "Say it back."
        return text
'''

DEV_V2 = DEV_V1.replace("version one", "version two") + '''
    @tool()
    def shout(self, text: str) -> str:
        "Say it back, loudly."
        return text.upper()
'''


class DevProcess:
    """`agentenv env dev FILE ARGS...` with its stderr collected on a thread."""

    def __init__(self, target: Path, *args: str) -> None:
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agentenv_local.cli.main", "env", "dev", str(target), *args],
            stdin=subprocess.PIPE if "--stdio" in args else subprocess.DEVNULL,
            stdout=subprocess.PIPE if "--stdio" in args else subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True, cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None  # piped in __init__
        for line in self.proc.stderr:
            with self._lock:
                self.lines.append(line.rstrip("\n"))

    def output(self) -> str:
        with self._lock:
            return "\n".join(self.lines)

    def wait_for(self, pattern: str, *, after: int = 0, timeout: float = 15.0) -> re.Match:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                text = "\n".join(self.lines[after:])
            match = re.search(pattern, text)
            if match:
                return match
            if self.proc.poll() is not None and not self._reader.is_alive():
                break
            time.sleep(0.05)
        raise AssertionError(f"no {pattern!r} in the dev server's output:\n{self.output()}")

    def mark(self) -> int:
        with self._lock:
            return len(self.lines)

    def stop(self) -> None:
        end_process(self.proc)


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
             "inputSchema": {"properties": {"code": {"default": "refused",
                                                     "description": "The error code to answer with",
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
