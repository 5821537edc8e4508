"""The gateway topology (the default): a Gateway in front of the instance's children, its RBAC rules, triggers and
clock restored from a saved state, its events appended to the store's event log as `env.<event_type>`, served
by serving.py; and the state the manager saves whenever it changes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .instance import DeployError, Instance, sandbox_fields, utc_now
from .serving import fetch_card, serve


def restored_options(saved_state: dict | None) -> dict[str, Any]:
    """The Gateway's `access`, `clock` and `triggers_state` from a saved state (a resumed instance)."""
    options: dict[str, Any] = {}
    if saved_state:
        from agentenv_local.gateway.clock import VirtualClock
        from agentenv_local.gateway.rbac import ToolAccess

        if saved_state.get("rbac"):
            options["access"] = ToolAccess.from_dict(saved_state["rbac"])
        if saved_state.get("clock"):
            options["clock"] = VirtualClock.from_dict(saved_state["clock"])
        if saved_state.get("triggers"):
            options["triggers_state"] = saved_state["triggers"]
    return options


def gateway_state(gateway: Any) -> dict:
    """What survives a hub restart: the gateway's RBAC rules, triggers and clock."""
    return {"rbac": gateway.access.to_dict(), "triggers": gateway.engine.to_dict(),
            "clock": gateway.clock.to_dict(), "saved_at_utc": utc_now()}


async def deploy_gateway(inst: Instance, doc: dict, name: str, specs: list[Any], children_info: list[dict], *,
                         mode: str, prefix_tools: bool, saved_state: dict | None, metadata: dict, store: Any,
                         guard: Any, ready_timeout: float, on_state_change: Callable[[Any], None]) -> dict:
    """Build and start the instance's gateway, serve it; the instance's record. `on_state_change(gateway)` is
    called whenever its RBAC rules, triggers or clock change."""
    from agentenv_local.gateway.children import ChildError
    from agentenv_local.gateway.server import Gateway

    env_id = doc["id"]
    instance_id = inst.instance_id
    run_id = inst.run_id

    def on_event(event: dict) -> None:
        kind = str(event.get("event_type") or "event")
        store.events.append(f"env.{kind}", {**event, "instance_id": instance_id}, run_id=run_id)

    gateway_ref: dict[str, Any] = {}

    def state_changed(what: str) -> None:
        gw = gateway_ref.get("gw")
        if gw is not None:
            on_state_change(gw)

    gateway = Gateway(name, specs, mode=mode, prefix_tools=prefix_tools, on_event=on_event,
                      on_state_change=state_changed, ready_timeout=ready_timeout,
                      control_plane_auth=inst.admin_token is not None, admin_token=inst.admin_token,
                      guard=guard, **restored_options(saved_state))
    gateway_ref["gw"] = gateway
    inst.gateway = gateway
    try:
        await gateway.start()
    except ChildError as e:
        raise DeployError(f"env {env_id}: {e}") from None
    if gateway.clashes:
        from agentenv_local.gateway.server import CLASH_FIX, clash_text

        raise DeployError(f"env {env_id}: {clash_text(gateway.clashes)}", hint=f"{CLASH_FIX}; in a multi "
                          "env's env.toml: prefix_tools = true")

    gateway_url = await serve(inst, gateway)
    card_url = gateway_url + "/.well-known/agent-env.json"
    card = await fetch_card(card_url, gateway)
    return {
        "env_id": env_id, "env_version": doc["version"], "env_provider_type": "gateway",
        "instance_id": instance_id, "gateway_url": gateway_url, "mcp_url": gateway_url + "/mcp",
        "mcp_server_name": name, "environment_card": card, "environment_card_url": card_url,
        "environment_card_read_at_utc": utc_now(), "created_at_utc": utc_now(), "run_id": run_id,
        "children": children_info, "gateway_mode": mode, "metadata": metadata,
        "control_plane_auth": inst.admin_token is not None, **sandbox_fields(children_info), "status": "running",
    }
