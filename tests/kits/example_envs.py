"""Helpers for the example env tests (`from kits.example_envs import ...`)."""

from __future__ import annotations

import json
from pathlib import Path

from kits.data_plane import rpc
from kits.servers import run

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

