"""Helpers every test folder shares (`from kits.servers import ...`): a uvicorn
server on a thread, a subprocess that prints a "serving on http://..." line to stderr, the `agentenv` executable,
and the reference's side venv. Real transports only."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ANNOUNCE = re.compile(r"serving on (http://\S+)")

# The reference's clients and SDK need mcp<2 beside them, so they live in a side venv, never in this project's:
# scripts/setup.sh --test makes .venv-ref in the project; AGENTENV_REF_VENV points elsewhere.
_PROJECT_REF_VENV = ROOT / ".venv-ref"
REF_VENV = Path(os.environ.get("AGENTENV_REF_VENV") or
                (_PROJECT_REF_VENV if _PROJECT_REF_VENV.exists() else "/tmp/agentenv-ref-venv"))
REF_PYTHON = REF_VENV / "bin" / "python"


def agentenv_exe() -> str:
    """The `agentenv` console script of this venv (else the project's .venv, else PATH's)."""
    for candidate in (Path(sys.executable).parent / "agentenv", ROOT / ".venv" / "bin" / "agentenv"):
        if candidate.is_file():
            return str(candidate)
    found = shutil.which("agentenv")
    assert found, "agentenv is not installed (scripts/setup.sh --test)"
    return found


def reference_imports(modules: str) -> bool:
    """Whether REF_PYTHON exists and imports `modules` (e.g. "agentenv_protocol, mcp")."""
    if not REF_PYTHON.is_file():
        return False
    return subprocess.run([str(REF_PYTHON), "-c", f"import {modules}"], check=False,
                          capture_output=True).returncode == 0


@contextlib.contextmanager
def uvicorn_thread(config, sockets=None):
    """Run `uvicorn.Server(config)` (on `sockets`, if given) in a daemon thread; enters once it has started
    (yields the server) and stops it at exit."""
    import uvicorn

    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": sockets}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    try:
        yield server
    finally:
        server.should_exit = True
        thread.join(timeout=15)


@contextlib.contextmanager
def accepting(listener: socket.socket):
    """Accept one connection on `listener` on a thread while the block runs; yields the list it lands in. At exit
    the listener is shut down, which ends a thread still waiting (a test that checks nothing can connect leaves
    it waiting: closing the socket alone does not wake an accept() blocked in another thread)."""
    accepted: list[object] = []

    def accept_one() -> None:
        with contextlib.suppress(OSError):  # shut down at exit
            accepted.append(listener.accept())

    thread = threading.Thread(target=accept_one, daemon=True, name=f"accept one on {listener.getsockname()}")
    thread.start()
    try:
        yield accepted
    finally:
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join(10)


def end_process(proc: subprocess.Popen) -> None:
    """Terminate `proc` if it still runs (kill it if it lingers 10 s) and reap it."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _announced(proc: subprocess.Popen, what: str, scan_seconds: float | None) -> str:
    """The URL of `proc`'s "serving on" line: its first stderr line, or (`scan_seconds`) any line read within
    that long. Without one, kill `proc` and raise with what it printed."""
    deadline = time.monotonic() + (scan_seconds or 0)
    stderr = proc.stderr
    assert stderr is not None, "the process's stderr must be piped"
    lines = []
    while True:
        line = stderr.readline()
        lines.append(line)
        match = ANNOUNCE.search(line)
        if match or not line or scan_seconds is None or time.monotonic() >= deadline:
            break
    if not match:
        proc.kill()
        raise RuntimeError(f"the {what} did not announce its address: " + "".join(lines) + stderr.read())
    return match.group(1)


@contextlib.contextmanager
def announced_subprocess(argv: list[str], *, what: str = "server", env: dict | None = None,
                         cwd: str | Path = ROOT, scan_seconds: float | None = None, drain: bool = True):
    """Run `argv` (stdout discarded, stderr piped; `env` default: this process's environment) until it prints its
    "serving on http://..." line; yields (that URL, the process) and ends the process at exit.

    `drain`: keep reading its stderr on a thread, so a chatty server never blocks on a full pipe (else the pipe is
    closed at exit). `scan_seconds`: see `_announced`.
    """
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ) if env is None else env, cwd=cwd)
    try:
        url = _announced(proc, what, scan_seconds)
        if drain:
            stderr = proc.stderr
            assert stderr is not None  # piped above
            threading.Thread(target=lambda: [None for _ in stderr], daemon=True,
                             name=f"drain stderr of {what} pid {proc.pid}: {' '.join(map(str, argv))[:120]}").start()
        yield url, proc
    finally:
        end_process(proc)
        if not drain and proc.stderr:
            proc.stderr.close()


def piped_mcp(argv: list[str], calls: list[tuple[str, dict]], *, cwd=None, env: dict | None = None,
              timeout: float = 120) -> dict:
    """Run an MCP stdio server as a shell pipe would: write the handshake and `calls` (method, params) at once,
    close stdin, read stdout to the end. Answers {request id: JSON-RPC message} (the calls have ids 2, 3...); the
    process must exit 0."""
    import json

    lines = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "sh", "version": "1"}}},
             {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    lines += [{"jsonrpc": "2.0", "id": i, "method": method, "params": params}
              for i, (method, params) in enumerate(calls, start=2)]
    done = subprocess.run(argv, cwd=cwd, env=env, input="".join(json.dumps(line) + "\n" for line in lines),
                          capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return {m.get("id"): m for m in map(json.loads, done.stdout.splitlines())}


def run(coro):
    return asyncio.run(coro)


@contextlib.contextmanager
def serving_app(app):
    """Serve an ASGI app with uvicorn in a thread on 127.0.0.1 (a bind_socket port 0); yields the base URL."""
    import uvicorn

    from agentenv_local.env.serve import bind_socket

    sock = bind_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    try:
        with uvicorn_thread(uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2),
                            sockets=[sock]):
            yield f"http://127.0.0.1:{port}"
    finally:
        sock.close()


async def one_request_per_connection_server(answer: Callable[[bytes], bytes]
                                            ) -> tuple[asyncio.Server, int, dict[str, int]]:
    """A server that answers the first request on a connection (`answer(body) -> JSON body`, the connection kept
    open) and resets the connection when another request arrives on it: what a client meets when its request
    crosses the server's keep-alive close, every time instead of by bad luck. Returns (server, port, counts of
    connections, answered and reset)."""
    counts = {"connections": 0, "answered": 0, "reset": 0}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        counts["connections"] += 1
        served = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if served:
                    counts["reset"] += 1
                    writer.transport.abort()  # unread data + close: the client sees a reset
                    return
                length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                body = answer(await reader.readexactly(length) if length else b"")
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                             b"content-length: %d\r\n\r\n" % len(body) + body)
                await writer.drain()
                served += 1
                counts["answered"] += 1
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], counts
