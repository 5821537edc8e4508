"""The run's deployed agents, as the agent steps share them: find one by name (`deployed_agents` in the run's
state), read its card's AgentEnv extensions, send it the agent-config fields its card says it takes."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentenv_local.errors import StepError

if TYPE_CHECKING:
    from agentenv_local.tasks.context import StepContext


def utc_text(ts: datetime) -> str:
    """A UTC time as the reference's agent records spell it (`...Z`)."""
    return ts.isoformat().replace("+00:00", "Z")


def deployed_agent(ctx: "StepContext", name: str) -> dict:
    for record in reversed(ctx.state.get("deployed_agents", [])):
        if record.get("agent_name") == name and not record.get("torn_down"):
            return record
    known = [r.get("agent_name") for r in ctx.state.get("deployed_agents", []) if not r.get("torn_down")]
    raise StepError(f"step {ctx.step.id!r}: no agent named {name!r} is deployed in this run"
                    + (f" (deployed: {', '.join(known)})" if known else ""),
                    hint="add a deploy_agent step with that agent_name and list it in depends_on")


def has_extension(card: dict | None, name: str) -> bool:
    """Does the card list the `urn:agentenv:<name>/v…` extension?"""
    return any(str(e.get("uri", "")).startswith(f"urn:agentenv:{name}/")
               for e in ((card or {}).get("capabilities") or {}).get("extensions") or [] if isinstance(e, dict))


async def set_agent_config(client: Any, card: dict, config: dict[str, Any]) -> dict[str, Any]:
    """Send the agent-config fields the card says the agent takes (the reference's rule: only those); an agent
    without agent-config/v1 gets none. Returns what was sent."""
    if not config or not has_extension(card, "agent-config"):
        return {}
    supported = None
    for ext in (card.get("capabilities") or {}).get("extensions") or []:
        if isinstance(ext, dict) and str(ext.get("uri", "")).startswith("urn:agentenv:agent-config/"):
            methods = (ext.get("params") or {}).get("methods") or {}
            supported = ((methods.get("set") or {}).get("request") or {}).get("supported")
    if supported is not None:
        config = {k: v for k, v in config.items() if k in supported}
    if config:
        await client.agent_config_set(**config)
    return config
