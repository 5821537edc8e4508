"""Helpers for the env deploy tests: put example envs in a hub's store, call a deployed gateway."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "envs"


def hub_session(tmp_path: Path):
    from agentenv_local.config import load_config
    from agentenv_local.hub import connect

    return connect(start=tmp_path, config=load_config(tmp_path), defer_linger=False)


@contextlib.contextmanager
def open_hub_session(tmp_path: Path, *, own_state: bool = False) -> Iterator[Any]:
    """A hub session in tmp_path (hub_session), closed at exit. own_state: with its own state folder
    (tmp_path/.agentenv), so nothing above tmp_path is found."""
    if own_state:
        (tmp_path / ".agentenv").mkdir()
    s = hub_session(tmp_path)
    try:
        yield s
    finally:
        s.close()


def put_env(store, env_id: str, folder: Path | None = None, **fields) -> dict:
    """Store an env: an example folder's files with `fields` as its env.toml."""
    from agentenv_local.artifacts import read_folder
    from agentenv_local.hosting.envs import parse_env
    from agentenv_local.hosting.envs.store import env_body

    env = parse_env(dict(fields), env_id)
    files = read_folder(folder) if folder is not None else {}
    body = env_body(store, env_id, env, files, default_name=env_id)
    return store.documents.put("envs", env_id, body)


def on_hub(session, coro, timeout: float = 120):
    return asyncio.run_coroutine_threadsafe(coro, session.hub.loop).result(timeout)


def call_tool(mcp_url: str, name: str, args: dict | None = None):
    """tools/list then tools/call over streamable HTTP with an mcp 2.x client; (tool names, result). (A call through
    a gateway's REST `/step` is kits.env_steps.step_call_tool.)"""
    from mcp import Client

    async def go():
        async with Client(mcp_url) as c:
            tools = await c.list_tools()
            result = await c.call_tool(name, args or {})
            return [t.name for t in tools.tools], result

    return asyncio.run(go())


def result_text(result) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is not alive
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
    return True


def admin(session, record: dict) -> dict:
    """The headers that carry a deployed instance's admin token (the control plane's credential)."""
    return {"Authorization": f"Bearer {session.hub.envs.admin_token(record['instance_id'])}"}


def seed(name: str) -> dict:
    return json.loads((EXAMPLES / name / "seed.json").read_text())
