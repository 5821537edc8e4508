"""Running agents for a run: in the hub (an ASGI app on the hub's loop), as a subprocess, in a sandbox
container, or at a URL someone else serves (a human's endpoint, an agent already running).

`serve_in_hub(spec, config)` and `spawn(spec, config)` return a `HostedAgent` with its A2A base URL; `stop()`
ends it (`ContainerAgent` is one whose sandbox the `deploy_agent` step created; a coding-CLI agent's container
runs its CLI-agent image, cli_image.py: `runs_in_container`, `cli_agent_image`). Built-in agents
(`scripted`, `tool-loop`, `human`: agentenv_local.agents.builtin) and Python agents (`file.py[:Class]`,
`pkg.mod:Class`) run in the hub by default, which costs no process and no HTTP hop to start;
`runtime = "subprocess"` runs them as `python -m agentenv_local.agents SPEC --port 0` instead (the same code,
its own process). `start_announced` starts such a process (and a bundle's command agent, command.py) and waits
for the URL it announces on stderr.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentenv_local.agents.builtin import named_agents
from agentenv_local.errors import AgentenvError
from agentenv_local.procs import announced_url, stop_group

from ..asgi import START_TIMEOUT_S, NotStarted, start_server, stop_server

READY_TIMEOUT_S = 60.0


class AgentStartError(AgentenvError):
    """An agent could not be started or did not answer in time."""


@dataclass
class HostedAgent:
    url: str
    runtime: str  # "in_hub" | "subprocess" | "url"
    pid: int | None = None
    _server: Any = None
    _task: asyncio.Task | None = None
    _proc: subprocess.Popen | None = None
    _log: list[str] = field(default_factory=list)
    _scratch: str | None = None  # the process's TMPDIR, ours to remove once it is gone

    async def stop(self) -> None:
        if self._server is not None:
            await stop_server(self._server, self._task)
            self._server = None
        if self._proc is not None and self._proc.poll() is None:
            # spawn() started it in its own session: stop its whole group (whatever it started too)
            await asyncio.to_thread(stop_group, self._proc.pid)
            self._proc.poll()  # stop_group reaped it: let the Popen know
        if self._scratch is not None:
            await asyncio.to_thread(shutil.rmtree, self._scratch, True)
            self._scratch = None


def resolve_spec(spec: str, base_dir: Path | None = None) -> str:
    """An agent's name (agents/builtin.py), or `file.py[:Class]` (relative to `base_dir`), or `pkg.mod:Class`."""
    named = named_agents()
    if spec in named:
        return named[spec]
    path_part = spec.split(":", 1)[0]
    if path_part.endswith(".py") and base_dir is not None and not os.path.isabs(path_part):
        return str(base_dir / spec)
    return spec


async def serve_in_hub(spec: str, config: dict[str, Any]) -> HostedAgent:
    from agentenv_local.agents.cli import load_agent

    try:
        agent = load_agent(spec, **config)
    except AgentenvError:
        raise
    except SystemExit as exc:  # sys.exit() at import: it must fail the step, not stop the hub's loop
        raise AgentStartError(f"agent {spec!r} exited while it was imported (sys.exit({exc.code!r}))",
                              hint=f"run it on its own to see why: python -m agentenv_local.agents {spec}") from None
    except Exception as exc:  # a broken agent module: say which and why
        raise AgentStartError(f"cannot load agent {spec!r}: {type(exc).__name__}: {exc}") from exc
    try:
        server, task, port = await start_server(agent.app(), task_name=f"agent-{spec}")
    except NotStarted as e:
        if e.timed_out:
            e.task.cancel()
            raise AgentStartError(f"agent {spec!r} did not start in {START_TIMEOUT_S:g} s") from None
        raise AgentStartError(f"agent {spec!r} did not start: {e.error!r}") from None
    return HostedAgent(url=f"http://127.0.0.1:{port}", runtime="in_hub", _server=server, _task=task)


class NotAnnounced(Exception):
    """A started agent process did not announce its URL in time (or exited); `tail` is what it printed."""

    def __init__(self, tail: str) -> None:
        super().__init__(tail)
        self.tail = tail


async def start_announced(argv: list[str], *, env: dict[str, str], cwd: str | None = None, runtime: str,
                          log_path: Path | None = None, timeout: float = READY_TIMEOUT_S,
                          find_url: Callable[[str], str | None] = announced_url) -> HostedAgent:
    """Start `argv` in its own session (stdout to /dev/null) and wait until a line of its stderr gives its URL
    (`find_url`); then keep draining its stderr into `log_path`, so a chatty agent never blocks on a full pipe.
    Raises OSError when it cannot be started, NotAnnounced (after stopping it) when no URL came in `timeout` s."""
    log = open(log_path, "a") if log_path else None  # opened first: no failure after the start leaves it running
    # A TMPDIR of its own, removed when it stops however it ends: a coding-CLI agent keeps a private HOME and
    # workspace there, which its own shutdown removes, but not when it is killed (stop_group's SIGKILL after
    # 3 s of a slow shutdown under load left dozens in /tmp during the test suite).
    scratch = None if "TMPDIR" in env else tempfile.mkdtemp(prefix="agentenv-agent-")
    try:
        proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, start_new_session=True,
                                env={**env, "TMPDIR": scratch} if scratch else env)
    except OSError:
        if log:
            log.close()
        if scratch:
            shutil.rmtree(scratch, True)
        raise
    hosted = HostedAgent(url="", runtime=runtime, pid=proc.pid, _proc=proc, _scratch=scratch)

    def wait_announce() -> str | None:
        assert proc.stderr is not None
        for line in proc.stderr:
            hosted._log.append(line.rstrip())
            if url := find_url(line):
                return url
        return None

    try:
        url = await asyncio.wait_for(asyncio.to_thread(wait_announce), timeout)
    except TimeoutError:
        url = None
    if not url:
        await hosted.stop()
        if log:
            log.close()
        raise NotAnnounced("\n".join(hosted._log[-20:]))
    hosted.url = url

    def drain() -> None:  # closes the log when the agent's stderr ends
        assert proc.stderr is not None
        for line in proc.stderr:
            if log:
                log.write(line)
        if log:
            log.close()

    asyncio.get_running_loop().run_in_executor(None, drain)
    return hosted


async def spawn(spec: str, config: dict[str, Any], *, env_vars: dict[str, str] | None = None,
                log_path: Path | None = None, timeout: float = READY_TIMEOUT_S) -> HostedAgent:
    import json

    from agentenv_local.procs import host_env

    argv = [sys.executable, "-m", "agentenv_local.agents", spec, "--port", "0"]
    if config:
        argv += ["--config", json.dumps(config)]
    # A minimal environment (as sandboxed commands get) plus the agent's own env_vars: not our secrets.
    env = {**host_env(), **(env_vars or {})}
    try:
        return await start_announced(argv, env=env, runtime="subprocess", log_path=log_path, timeout=timeout)
    except NotAnnounced as exc:
        raise AgentStartError(f"agent {spec!r} (a subprocess) did not start"
                              + (f"; it printed:\n{exc.tail}" if exc.tail else "")) from None


def runs_in_container(spec: str, sandbox_type: str | None) -> bool:
    """Does a `runtime = "auto"` agent run in a container? A coding-CLI agent (claude-code, codex, ...) does when
    its sandbox type (the run's --sandbox, else the step's sandbox_type) is podman; every other agent runs in
    the hub."""
    from .cli_image import CLI_AGENTS

    return sandbox_type == "podman" and spec in CLI_AGENTS


def cli_agent_image(provider: Any, spec: str, on_line: Callable[[str], None] | None = None) -> str | None:
    """The image a container agent `spec` runs in when its step names none: a coding-CLI agent's CLI-agent
    image (cli_image.py, built on first use), else None (the env runtime image). Blocking: run it in a thread."""
    from .cli_image import CLI_AGENTS, ensure_agent_image

    return ensure_agent_image(provider, spec, on_line=on_line) if spec in CLI_AGENTS else None


@dataclass
class ContainerAgent(HostedAgent):
    """An agent in a sandbox container; its A2A port is published on this machine, or with `net` (agent_net.py: a
    container with no network) carried out by its relay."""

    sandbox: Any = None
    net: Any = None  # agent_net.AgentNet

    @property
    def network(self) -> str:
        """What the container can reach: `relay` (only the endpoints agent_net carries), else `host_loopback`
        (slirp4netns: this machine's loopback and beyond), else `published_ports`."""
        if self.net is not None:
            return "relay"
        return "host_loopback" if self.host_address else "published_ports"

    @property
    def sandbox_id(self) -> str | None:
        return getattr(self.sandbox, "sandbox_id", None)

    @property
    def sandbox_type(self) -> str | None:
        return getattr(self.sandbox, "type", None)

    @property
    def host_address(self) -> str | None:
        return getattr(self.sandbox, "host_address", None)

    async def wait_ready(self, timeout: float) -> None:
        import httpx2

        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        async with httpx2.AsyncClient(timeout=2) as http:
            while True:
                try:
                    if (await http.get(self.url + "/.well-known/agent-card.json")).status_code < 500:
                        return
                except httpx2.TransportError:
                    pass
                if loop.time() > deadline:
                    logs = ""
                    provider = getattr(self.sandbox, "provider", None)
                    if provider is not None and hasattr(provider, "logs"):
                        logs = await asyncio.to_thread(provider.logs, self.sandbox.sandbox_id, 30)
                    raise AgentStartError(f"the agent container {self.sandbox_id} did not answer at {self.url} "
                                          f"within {timeout:g} s"
                                          + (f"; its logs:\n{logs.strip()}" if logs.strip() else ""))
                await asyncio.sleep(0.1)

    async def stop(self) -> None:
        try:
            if self.net is not None:
                await self.net.close()
                self.net = None
        finally:  # a relay that failed to close must not leave the container running
            if self.sandbox is not None:
                await self.sandbox.terminate()
                self.sandbox = None
