"""Subprocess children: a module env with `run_as = "subprocess"` (or with env_vars, see in_hub.py) run as
`python -m agentenv_local.env`, or a `command`, started through agentenv_local.procs in its own session with a
minimal environment plus its env_vars, and waited for until it answers."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
from pathlib import Path
from typing import Any

from agentenv_local.http_guard import ADMIN_TOKEN_ENV
from agentenv_local.procs import host_env, start_logged, stop_group

from .instance import ChildProc, DeployError, Instance, answers
from .providers import EnvProvider
from .records import McpServerEnv


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def module_target(folder: Path, module: str) -> str:
    """`server.py:Class` in the env's folder as a path `load_env` takes; a dotted module as it is."""
    ref, _, cls = module.rpartition(":")
    if ref.endswith(".py"):
        return f"{folder / ref}:{cls}"
    return module


async def start_subprocess_child(inst: Instance, child_name: str, where: str, folder: Path, senv: McpServerEnv,
                                 ready_timeout: float) -> tuple[str, dict]:
    """Start the child's server on a free port and wait until it answers; (its MCP URL, its record entry)."""
    port = free_port()
    if senv.module:
        argv = [sys.executable, "-m", "agentenv_local.env", module_target(folder, senv.module),
                "--port", str(port), "--host", "127.0.0.1"]
    else:
        argv = list(senv.command or [])
        if argv and argv[0] in ("python", "python3"):
            argv[0] = sys.executable
    # a minimal environment, not our secrets
    env = {**host_env(), **senv.env_vars, "MCP_PORT": str(port), "MCP_HOST": "127.0.0.1",
           "ENVIRONMENT_NAME": child_name, "PYTHONUNBUFFERED": "1"}
    env.pop(ADMIN_TOKEN_ENV, None)
    if inst.admin_token:  # its data plane requires it (the server takes it out of its environment)
        env[ADMIN_TOKEN_ENV] = inst.admin_token
    log_path = inst.folder / f"{child_name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        proc = start_logged(argv, cwd=folder, env=env, log_path=log_path)
    except OSError as e:
        raise DeployError(f"{where}: cannot start {argv[0]!r}: {e}") from None
    p = ChildProc(child_name, proc, log_path)
    inst.procs.append(p)
    url = f"http://127.0.0.1:{port}{senv.mcp_path}"
    await wait_ready(where, p, f"http://127.0.0.1:{port}", url, ready_timeout)
    return url, {"name": child_name, "kind": "subprocess", "url": url, "pid": proc.pid}


async def wait_ready(where: str, p: ChildProc, base: str, url: str, ready_timeout: float) -> None:
    """Until the server answers; one that exits first, or never answers, fails with its last output."""
    import httpx2

    loop = asyncio.get_running_loop()
    deadline = loop.time() + ready_timeout
    async with httpx2.AsyncClient(timeout=2.0) as http:
        while True:
            if p.proc.poll() is not None:
                raise DeployError(f"{where}: its server exited with code {p.proc.returncode} before it "
                                  f"was ready; its last output:\n{p.last_output()}")
            if await answers(http, base, url):
                return
            if loop.time() > deadline:
                raise DeployError(f"{where}: its server did not answer at {url} within "
                                  f"{ready_timeout:g}s; its last output:\n{p.last_output()}")
            await asyncio.sleep(0.05)


async def stop_subprocesses(inst: Instance) -> None:
    """Stop the instance's subprocess children (each one's process group), off the loop."""
    loop = asyncio.get_running_loop()
    for p in inst.procs:
        if p.proc.poll() is None:
            await loop.run_in_executor(None, stop_group, p.proc.pid)
        with contextlib.suppress(Exception):
            p.proc.wait(timeout=1)


class SubprocessProvider(EnvProvider):
    """The `subprocess` env provider: a module env or a `command` run as a process of its own."""

    name = "subprocess"

    async def start(self, inst: Instance, child_name: str, where: str, server: McpServerEnv) -> tuple[Any, dict]:
        folder = self.host.materialize(inst, child_name, server)
        return await start_subprocess_child(inst, child_name, where, folder, server, self.host.ready_timeout)

    async def stop(self, inst: Instance) -> None:
        await stop_subprocesses(inst)
