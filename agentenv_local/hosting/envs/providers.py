"""Env providers: how an env instance's servers run behind its gateway, registered in the
`agentenv_local.env_providers` group. Ours: `in_hub` (in_hub.py), `subprocess` (subprocesses.py), `container`
(containers.py) and `url` (here: a server that is already running). The env's type picks one per server by
name (env_types.EnvType.provider); the manager makes one provider object per name and calls `start` for each
server, `stop` when the instance stops and `aclose` when the hub closes.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar, Protocol

from .instance import DeployError, Instance
from .records import McpServerEnv

log = logging.getLogger(__name__)


class EnvHost(Protocol):
    """What a provider gets from the manager that makes it (the hub's EnvManager)."""

    paths: Any  # the project's Paths (state_dir, ...)
    services: Any  # the hub's RunServices (its sandbox providers) or None
    ready_timeout: float  # how long a server may take to answer (read when a server starts)

    def materialize(self, inst: Instance, child_name: str, server: McpServerEnv) -> Path:
        """The server's folder in the instance's, with the env version's pinned files written into it."""
        ...


class EnvProvider(ABC):
    """What an `agentenv_local.env_providers` entry point names: a subclass, made as `cls(host)` once per hub
    (per EnvManager) when an env first needs it."""

    name: ClassVar[str]

    def __init__(self, host: EnvHost):
        self.host = host

    @abstractmethod
    async def start(self, inst: Instance, child_name: str, where: str, server: McpServerEnv) -> tuple[Any, dict]:
        """Start one server of `inst` and wait until it answers: (the gateway's target for it, a URL or an
        in-process Env; its entry in the instance record's `children`, with at least `name` and `kind`).
        Raise DeployError (prefixed with `where`) when it cannot; what was started is stopped by `stop`."""

    async def stop(self, inst: Instance) -> None:
        """Stop whatever this provider started for `inst` (called once when the instance stops or fails)."""

    def holds_resources(self) -> bool:
        """Does it hold something `aclose` must release even when no instance runs?"""
        return False

    async def aclose(self) -> None:
        """Release what it holds (the hub is closing)."""


class UrlProvider(EnvProvider):
    """A `url` server: already running; nothing to start or stop."""

    name = "url"

    async def start(self, inst: Instance, child_name: str, where: str, server: McpServerEnv) -> tuple[Any, dict]:
        assert server.url is not None
        return server.url, {"name": child_name, "kind": "url", "url": server.url}


def make_provider(name: str, host: EnvHost, where: str) -> EnvProvider:
    """Make the registered env provider `name`, or a DeployError naming the registered ones."""
    from agentenv_local.plugins import registry

    cls = registry().get("env_providers", name)
    if cls is None:
        failed = registry().failure("env_providers", name)
        raise DeployError(f"{where}: its env provider {name!r} is not available"
                          + (f" (its plugin failed to load: {failed})" if failed else "")
                          + f"; registered: {', '.join(sorted(registry().available('env_providers')))}",
                          hint="check `agentenv plugin list`")
    return cls(host)


def plugin_problem(name: str, obj: object) -> str | None:
    """Why `obj` cannot be the env provider `name` (an `agentenv_local.env_providers` entry), or None."""
    if not (isinstance(obj, type) and issubclass(obj, EnvProvider)):
        return "an env provider must be a subclass of agentenv_local.hosting.envs.providers.EnvProvider"
    if getattr(obj, "name", None) != name:
        return f"its name is {getattr(obj, 'name', None)!r}, but it is registered as {name!r}"
    return None
