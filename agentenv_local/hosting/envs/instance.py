"""What every part of env hosting shares: the store collections, the DeployError, one live instance and its
subprocess children, and the readiness probe of an env server."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentenv_local.errors import AgentenvError
from agentenv_local.hosting.leftovers import ENV_INSTANCES

INSTANCES = ENV_INSTANCES
STATE = "env_instance_state"
ADMIN = "env_instance_admin"  # {token}: the control plane's credential, apart from the listed records
READY_TIMEOUT_S = 60.0


class DeployError(AgentenvError):
    """An env could not be deployed (a child never got ready, an image env, a bad record)."""


def utc_now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


@dataclass
class ChildProc:
    """A server the hub started as a subprocess (a module env with run_as = "subprocess", or a `command`)."""

    name: str
    proc: subprocess.Popen
    log_path: Path

    def last_output(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(nothing)"
        tail = text.strip().splitlines()[-lines:]
        return "\n".join(tail) or "(nothing)"


@dataclass
class Instance:
    """One deployed env instance while this hub runs it."""

    instance_id: str
    record: dict
    folder: Path
    gateway: Any = None
    server: Any = None
    serve_task: asyncio.Task | None = None
    procs: list[ChildProc] = field(default_factory=list)
    sandboxes: list[Any] = field(default_factory=list)  # the containers of image children
    run_id: str | None = None
    options: dict = field(default_factory=dict)  # sandbox_type, cpu, memory_mb, services (image children)
    admin_token: str | None = field(default=None, repr=False)  # None: the reference's open control plane


async def answers(http: Any, base: str, url: str) -> bool:
    """Is an env server up: its `/ready` says so, or its MCP URL answers without a server error?"""
    with contextlib.suppress(Exception):  # not listening yet
        if (await http.get(base + "/ready")).status_code == 200:
            return True
        return (await http.get(url)).status_code < 500
    return False


def sandbox_fields(children: list[dict]) -> dict:
    """The record's sandbox_id / sandbox_type: the (first) container child's, else None."""
    boxed = [c for c in children if c.get("sandbox_id")]
    return {"sandbox_id": boxed[0]["sandbox_id"] if boxed else None,
            "sandbox_type": boxed[0].get("sandbox_type") if boxed else None}
