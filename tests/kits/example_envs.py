"""Helpers for the example env tests (`from kits.example_envs import ...`)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path

from kits.servers import announced_subprocess, run  # noqa: F401 - run: the tests' helper

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "envs"
MAIL = EXAMPLES / "mail" / "server.py"
CRM = EXAMPLES / "crm" / "server.py"
MAIL_SEED = EXAMPLES / "mail" / "seed.json"
CRM_SEED = EXAMPLES / "crm" / "seed.json"



def load_seed(path: Path) -> dict:
    return json.loads(path.read_text())


def dump(result) -> dict:
    """An mcp `CallToolResult` in wire form, without `_meta`."""
    return result.model_dump(by_alias=True, exclude_none=True, mode="json", exclude={"meta", "result_type"})


def rpc(env, method: str, params: dict | None = None) -> dict:
    """One in-process data-plane request."""
    return run(env.data_rpc({"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}))


def exported(env) -> dict:
    """The env's `data/get` export (its single data part's object)."""
    parts = rpc(env, "data/get")["result"]["parts"]
    assert len(parts) == 1 and parts[0]["kind"] == "data"
    return parts[0]["data"]


async def call_all(env, calls: list[tuple], mode: str = "auto") -> list:
    """Run `(tool, arguments[, meta])` calls through one in-process mcp `Client(env.mcp_server())`."""
    from mcp import Client

    out = []
    async with Client(env.mcp_server(), mode=mode) as client:
        for name, arguments, *meta in calls:
            out.append(await client.call_tool(name, arguments, meta=meta[0] if meta else None))
    return out


def call(env, name: str, arguments: dict | None = None, meta: dict | None = None):
    """One call through an in-process mcp client; returns the `CallToolResult`."""
    return run(call_all(env, [(name, arguments or {}, meta)]))[0]


def error_code(result) -> str:
    assert result.is_error, dump(result)
    return result.structured_content["code"]


@contextlib.contextmanager
def env_subprocess(target: Path, env_vars: dict | None = None):
    """`python -m agentenv_local.env TARGET --port 0` as a subprocess; yields its base URL."""
    with announced_subprocess([sys.executable, "-m", "agentenv_local.env", str(target), "--port", "0"], what="env",
                              env={**os.environ, **(env_vars or {})}, drain=False) as (url, _proc):
        yield url
