"""An agent that is a command of its own (a bundle's `agent.toml` `command = [...]`): started on the host in its
folder, in its own session, with a minimal environment plus its `env_vars` and `A2A_HOST`/`A2A_PORT=0`; ready
once it prints `serving on http://HOST:PORT` on stderr (as `agentenv agent` and `agentenv env` servers do), or
uvicorn's `Uvicorn running on http://HOST:PORT` (a server on the reference's agent framework).
Started and watched by hosted.start_announced, as `spawn`'s agents are; stopping it stops its process group
(hosted.HostedAgent.stop)."""

from __future__ import annotations

import re
from pathlib import Path

from agentenv_local.procs import announced_url, host_env

from .hosted import READY_TIMEOUT_S, AgentStartError, HostedAgent, NotAnnounced, start_announced

# uvicorn's own line: how a server on the reference's agent framework (A2A_HOST/A2A_PORT) says it listens
_UVICORN = re.compile(r"Uvicorn running on (http://\S+)")


def _announced_or_uvicorn(line: str) -> str | None:
    match = _UVICORN.search(line)
    return announced_url(line) or (match.group(1).rstrip("/") if match else None)


async def spawn_command(argv: list[str], *, cwd: str | None, env_vars: dict[str, str] | None = None,
                        log_path: Path | None = None, timeout: float = READY_TIMEOUT_S,
                        name: str = "agent") -> HostedAgent:
    env = {**host_env(), "A2A_HOST": "127.0.0.1", "A2A_PORT": "0", **(env_vars or {})}
    if cwd is not None and not Path(cwd).is_dir():
        raise AgentStartError(f"agent {name!r}: its folder {cwd} is gone",
                              hint="run its bundle again (agentenv run BUNDLE) from where the folder is")
    try:
        return await start_announced(argv, env=env, cwd=cwd, runtime="command", log_path=log_path, timeout=timeout,
                                     find_url=_announced_or_uvicorn)
    except OSError as exc:
        raise AgentStartError(f"agent {name!r}: cannot run {argv[0]!r}: {exc.strerror or exc}",
                              hint="fix `command` in its agent.toml (a program on PATH, or a path from its folder)"
                              ) from None
    except NotAnnounced as exc:
        raise AgentStartError(f"agent {name!r} (command {' '.join(argv)}) did not print `serving on "
                              f"http://HOST:PORT` on stderr within {timeout:g} s"
                              + (f"; it printed:\n{exc.tail}" if exc.tail else ""),
                              hint="the command must serve A2A and announce its URL on stderr once listening"
                              ) from None
