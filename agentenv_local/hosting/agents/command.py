"""An agent that is a command of its own (a bundle's `agent.toml` `command = [...]`): started on the host in its
folder, in its own session, with a minimal environment plus its `env_vars` and `A2A_HOST`/`A2A_PORT=0`; ready
once it prints `serving on http://HOST:PORT` on stderr (as `agentenv agent` and `agentenv env` servers do), or
uvicorn's `Uvicorn running on http://HOST:PORT` (a server on the reference's agent framework).
Stopping it stops its process group (hosted.HostedAgent.stop)."""

from __future__ import annotations

import asyncio
import re
import subprocess
from pathlib import Path

from agentenv_local.procs import announced_url, host_env

from .hosted import READY_TIMEOUT_S, AgentStartError, HostedAgent

# uvicorn's own line: how a server on the reference's agent framework (A2A_HOST/A2A_PORT) says it listens
_UVICORN = re.compile(r"Uvicorn running on (http://\S+)")


async def spawn_command(argv: list[str], *, cwd: str | None, env_vars: dict[str, str] | None = None,
                        log_path: Path | None = None, timeout: float = READY_TIMEOUT_S,
                        name: str = "agent") -> HostedAgent:
    env = {**host_env(), "A2A_HOST": "127.0.0.1", "A2A_PORT": "0", **(env_vars or {})}
    if cwd is not None and not Path(cwd).is_dir():
        raise AgentStartError(f"agent {name!r}: its folder {cwd} is gone",
                              hint="run its bundle again (agentenv run BUNDLE) from where the folder is")
    try:
        proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    except OSError as exc:
        raise AgentStartError(f"agent {name!r}: cannot run {argv[0]!r}: {exc.strerror or exc}",
                              hint="fix `command` in its agent.toml (a program on PATH, or a path from its folder)"
                              ) from None
    hosted = HostedAgent(url="", runtime="command", pid=proc.pid, _proc=proc)

    def wait_announce() -> str | None:
        assert proc.stderr is not None
        for line in proc.stderr:
            hosted._log.append(line.rstrip())
            match = _UVICORN.search(line)
            if url := announced_url(line) or (match.group(1).rstrip("/") if match else None):
                return url
        return None

    try:
        url = await asyncio.wait_for(asyncio.to_thread(wait_announce), timeout)
    except TimeoutError:
        url = None
    if not url:
        await hosted.stop()
        tail = "\n".join(hosted._log[-20:])
        raise AgentStartError(f"agent {name!r} (command {' '.join(argv)}) did not print `serving on "
                              f"http://HOST:PORT` on stderr within {timeout:g} s"
                              + (f"; it printed:\n{tail}" if tail else ""),
                              hint="the command must serve A2A and announce its URL on stderr once listening")
    hosted.url = url
    log = open(log_path, "a") if log_path else None  # closed by the drain thread

    def drain() -> None:  # a chatty agent must never block on a full pipe
        assert proc.stderr is not None
        for line in proc.stderr:
            if log:
                log.write(line)
        if log:
            log.close()

    asyncio.get_running_loop().run_in_executor(None, drain)
    return hosted
