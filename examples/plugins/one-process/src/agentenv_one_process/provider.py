"""The `one_process` env provider (hub side): every server of an env instance loaded into ONE child process.

The built-in providers start one process per `run_as = "subprocess"` server (or load it into the hub itself).
This one starts a single `python -m agentenv_one_process.host` per instance, when the instance's first server
starts, and asks it to load each server in turn; each is served on its own path of the host's one loopback port
(`http://127.0.0.1:PORT/<n>-<name>/mcp`), and the env's gateway stands in front of them as usual.

The host runs in its own session with a minimal environment plus the instance's admin token (its data planes
require it; the gateway sends it because each child is recorded with kind "subprocess"). Stopping the instance
closes the host's stdin and stops its process group; a server that fails to load fails the deploy naming it, and
the manager then stops the host, so nothing is left running.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from typing import IO, Any

from agentenv_local.hosting.envs.instance import ChildProc, DeployError, Instance
from agentenv_local.hosting.envs.providers import EnvHost, EnvProvider
from agentenv_local.hosting.envs.records import McpServerEnv
from agentenv_local.hosting.envs.subprocesses import module_target
from agentenv_local.http_guard import ADMIN_TOKEN_ENV
from agentenv_local.procs import host_env, stop_group

NAME = "one_process"


@dataclass
class HostProcess:
    """The one process of an instance, and the pipes the provider talks to it through."""

    child: ChildProc
    commands: IO[str]
    answers: IO[str]
    port: int
    servers: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.child.proc.pid


class OneProcessProvider(EnvProvider):
    """`env_provider_type = "one_process"`: all of an env's servers (module envs) in one process."""

    name = NAME

    def __init__(self, host: EnvHost):
        super().__init__(host)
        self._hosts: dict[str, HostProcess] = {}  # instance id -> its one process
        self.processes_started = 0  # what it saves: one per instance, not one per server

    async def start(self, inst: Instance, child_name: str, where: str, server: McpServerEnv) -> tuple[Any, dict]:
        refusal = unsupported(server)
        if refusal is not None:
            raise DeployError(f"{where}: the one_process env provider cannot run it: {refusal}",
                              hint='deploy the env without env_provider_type = "one_process" (one process per '
                                   "server, or in the hub)")
        assert server.module is not None
        folder = self.host.materialize(inst, child_name, server)
        proc = self._hosts.get(inst.instance_id)
        if proc is None:
            proc = await self._spawn(inst, where)
        prefix = f"/{len(proc.servers)}-{re.sub(r'[^A-Za-z0-9_.-]', '_', child_name)}"
        answer = await self._ask(proc, where, {"op": "load", "name": child_name, "prefix": prefix,
                                               "target": module_target(folder, server.module),
                                               "mcp_path": server.mcp_path})
        if not answer.get("ok"):
            raise DeployError(f"{where}: server {child_name!r} did not load in the one process: {answer.get('error')}",
                              hint="load it on its own to see why: python -m agentenv_local.env "
                                   f"{server.module} (in the env's folder)")
        proc.servers.append(child_name)
        url = f"http://127.0.0.1:{proc.port}{prefix}{server.mcp_path}"
        return url, {"name": child_name, "kind": "subprocess", "url": url, "pid": proc.pid,
                     "env_provider": NAME, "shares_process_with": [s for s in proc.servers if s != child_name]}

    async def _spawn(self, inst: Instance, where: str) -> HostProcess:
        """Start the instance's one process and wait for its port."""
        inst.folder.mkdir(parents=True, exist_ok=True)
        log_path = inst.folder / "one-process.log"
        answers_r, answers_w = os.pipe()
        env = {**host_env(), "PYTHONUNBUFFERED": "1"}
        env.pop(ADMIN_TOKEN_ENV, None)
        if inst.admin_token:  # every data plane it serves requires it (the host takes it out of its environment)
            env[ADMIN_TOKEN_ENV] = inst.admin_token
        argv = [sys.executable, "-m", "agentenv_one_process.host", "--reply-fd", str(answers_w),
                "--instance", inst.instance_id]
        try:
            with open(log_path, "wb") as log:
                popen = subprocess.Popen(argv, cwd=inst.folder, env=env, stdin=subprocess.PIPE, stdout=log,
                                         stderr=subprocess.STDOUT, pass_fds=(answers_w,), start_new_session=True,
                                         text=True)
        except OSError as e:
            os.close(answers_r)
            raise DeployError(f"{where}: cannot start the one process: {e}") from None
        finally:
            os.close(answers_w)
        self.processes_started += 1
        child = ChildProc(NAME, popen, log_path)
        inst.procs.append(child)  # stopped with the instance's other processes too (stop_subprocesses)
        assert popen.stdin is not None
        proc = HostProcess(child, popen.stdin, os.fdopen(answers_r, "r", encoding="utf-8"), port=0)
        self._hosts[inst.instance_id] = proc  # so `stop` finds it even if it never answers
        ready = await self._answer(proc, where, "to start")
        if not ready.get("ok"):
            raise DeployError(f"{where}: the one process did not start: {ready.get('error')}")
        proc.port = int(ready["port"])
        return proc

    async def _ask(self, proc: HostProcess, where: str, command: dict) -> dict:
        try:
            proc.commands.write(json.dumps(command) + "\n")
            proc.commands.flush()
        except OSError:
            raise DeployError(f"{where}: the one process is gone; its last output:\n"
                              f"{proc.child.last_output()}") from None
        return await self._answer(proc, where, f"to load {command.get('name')!r}")

    async def _answer(self, proc: HostProcess, where: str, what: str) -> dict:
        """Its next answer, within the hub's ready timeout; a process that exits or hangs fails the deploy."""
        loop = asyncio.get_running_loop()
        try:
            line = await asyncio.wait_for(loop.run_in_executor(None, proc.answers.readline),
                                          self.host.ready_timeout)
        except TimeoutError:
            raise DeployError(f"{where}: the one process did not answer {what} within "
                              f"{self.host.ready_timeout:g}s; its last output:\n{proc.child.last_output()}") from None
        if not line:
            code = proc.child.proc.poll()
            raise DeployError(f"{where}: the one process exited (code {code}) before it answered {what}; its last "
                              f"output:\n{proc.child.last_output()}")
        answer = json.loads(line)
        assert isinstance(answer, dict)
        return answer

    async def stop(self, inst: Instance) -> None:
        proc = self._hosts.pop(inst.instance_id, None)
        if proc is None:
            return
        with contextlib.suppress(OSError):
            proc.commands.close()  # it shuts its servers down and exits
        popen = proc.child.proc
        loop = asyncio.get_running_loop()
        with contextlib.suppress(subprocess.TimeoutExpired):
            await loop.run_in_executor(None, popen.wait, 5)
        if popen.poll() is None:
            await loop.run_in_executor(None, stop_group, popen.pid)
        else:  # it exited; whatever its servers started in its session goes too
            await loop.run_in_executor(None, stop_group, popen.pid, 0.5)
        proc.answers.close()


def unsupported(server: McpServerEnv) -> str | None:
    """Why one server cannot share the one process (None: it can)."""
    if not server.module:
        kind = next(k for k in ("command", "url", "image") if getattr(server, k))
        return f"it is a {kind} server; only module envs (module = \"server.py:Class\") share the process"
    if server.env_vars:
        return ("it declares env_vars, and the servers in one process share one environment "
                f"({', '.join(sorted(server.env_vars))})")
    return None

