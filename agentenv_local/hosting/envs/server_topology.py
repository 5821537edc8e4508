"""The `server` topology (`env_provider_type = "server"`): one MCP server on its own, no gateway (so no clock,
RBAC or triggers); its own card is the env's card."""

from __future__ import annotations

from typing import Any

from .instance import Instance, sandbox_fields, utc_now
from .records import McpServerEnv
from .serving import fetch_card, serve


async def deploy_server(inst: Instance, doc: dict, env: McpServerEnv, target: Any, child: dict, name: str,
                        metadata: dict, guard: Any) -> dict:
    """Serve the one child (an in-hub Env gets its own app in the hub; any other child serves itself); the
    instance's record."""
    if isinstance(target, str):  # a subprocess, command or url child: it serves itself
        mcp_url = target
        base = target[: -len(env.mcp_path)] if target.endswith(env.mcp_path) else target.rsplit("/", 1)[0]
    else:  # an in-process Env: serve its own app in the hub
        from agentenv_local.env.app import build_app

        app = build_app(target._ae_runtime(), admin_token=inst.admin_token, guard=guard)
        base = await serve(inst, None, app=app)
        mcp_url = base + "/mcp"
    card_url = base + "/.well-known/agent-env.json"
    card = await fetch_card(card_url, None)
    return {
        "env_id": doc["id"], "env_version": doc["version"], "env_provider_type": "server",
        "instance_id": inst.instance_id, "gateway_url": None, "server_url": base, "mcp_url": mcp_url,
        "mcp_server_name": name, "environment_card": card, "environment_card_url": card_url,
        "environment_card_read_at_utc": utc_now(), "created_at_utc": utc_now(), "run_id": inst.run_id,
        "children": [child], "gateway_mode": None, "metadata": metadata,
        "control_plane_auth": inst.admin_token is not None, **sandbox_fields([child]), "status": "running",
    }
