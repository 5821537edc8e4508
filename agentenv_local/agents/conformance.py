"""`agentenv agent validate`: conformance checks against a running A2A agent.

Each check talks to the agent over real HTTP, the way deploy_agent and prompt_agent will: the card,
the core protocol (message/send, tasks/get to a final state, an unknown method refused), agent-config
(set, and read back when offered), mcp-config (register an env, list it), the trajectory of a task, skills
(when the card offers skill-config) and peer-agents (set a peer, list it, and see the peer tools' `peer_list`
answer it when the card names their MCP endpoint). A check the card does not advertise is skipped, not failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentenv_local import jsonrpc
from agentenv_local.errors import AgentenvError


@dataclass
class Check:
    name: str
    status: str  # "pass" | "fail" | "skip"
    detail: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"check": self.name, "status": self.status, "detail": self.detail}


def _extensions(card: dict) -> set[str]:
    return {str(e.get("uri", "")).rsplit(":", 1)[-1].split("/")[0]
            for e in (card.get("capabilities") or {}).get("extensions") or [] if isinstance(e, dict)}


async def run_checks(url: str, *, prompt: str = "hello", mcp_url: str | None = None,
                     timeout: float = 60) -> list[Check]:
    from .client import A2AClient

    checks: list[Check] = []
    async with A2AClient(url, timeout=timeout) as client:
        try:
            card = await client.card()
            missing = [k for k in ("name", "url", "capabilities") if k not in card]
            checks.append(Check("card", "fail" if missing else "pass",
                                f"missing {', '.join(missing)}" if missing else f"{card.get('name')!r}"))
        except AgentenvError as exc:
            return [Check("card", "fail", exc.message)]
        extensions = _extensions(card)
        core, context_id = await check_core_protocol(client, prompt, timeout)
        checks.append(core)
        checks.append(await check_unknown_method(client, url, timeout))
        if "agent-config" in extensions:
            try:
                await client.agent_config_set(name="conformance", role="tester")
                checks.append(Check("agent-config", "pass", "set name and role"))
            except AgentenvError as exc:
                checks.append(Check("agent-config", "fail", exc.message))
        else:
            checks.append(Check("agent-config", "skip", "not on the card"))
        checks.append(await check_mcp_config(client, mcp_url) if "mcp-config" in extensions
                      else Check("mcp-config", "skip", "not on the card"))
        if "trajectory" in extensions and context_id:
            checks.append(await check_trajectory(client, context_id=context_id))
        else:
            checks.append(Check("trajectory", "skip", "not on the card" if "trajectory" not in extensions
                                else "no task to read"))
        checks.append(await check_skills(client) if "skill-config" in extensions
                      else Check("skills", "skip", "not on the card"))
        if "peer-agents" in extensions:
            checks.append(await check_peer_agents(client, card))
        else:
            checks.append(Check("peer-agents", "skip", "not on the card"))
    return checks


# --- single checks: `run_checks` composes them; the verify_a2a_* task steps (steps/agent_checks.py) call them alone


async def check_core_protocol(client: Any, prompt: str, timeout: float) -> tuple[Check, str | None]:
    """message/send + tasks/get to a final state; (the check, the task's contextId)."""
    try:
        task = await client.prompt(prompt, timeout=timeout)
    except AgentenvError as exc:
        return Check("core protocol", "fail", exc.message), None
    ok = task.terminal and not task.timed_out
    return (Check("core protocol", "pass" if ok else "fail", f"message/send + tasks/get ended {task.state!r}"),
            task.raw.get("contextId"))


async def check_unknown_method(client: Any, url: str, timeout: float) -> Check:
    import httpx2

    try:
        async with httpx2.AsyncClient(timeout=timeout) as http:
            # the JSON-RPC URL the client resolved from the card (it may be relative, as the reference's is)
            reply = (await http.post(client.rpc_url or url,
                                     json=jsonrpc.request("agentenv/no-such-method", {}))).json()
        code = (reply.get("error") or {}).get("code")
        return Check("unknown method refused", "pass" if code == jsonrpc.METHOD_NOT_FOUND else "fail",
                     f"error code {code}")
    except (httpx2.HTTPError, ValueError) as exc:
        return Check("unknown method refused", "fail", str(exc))


async def check_mcp_config(client: Any, mcp_url: str | None) -> Check:
    """Register an MCP server (`mcp_url`, else an unreachable placeholder: only the config is checked) and
    see it listed."""
    try:
        await client.mcp_config_add(mcp_url or "http://127.0.0.1:9/mcp", headers={"AgentEnv-Role": "tester"},
                                    name="conformance")
        listed = await client.mcp_config_list()
        found = "conformance" in (listed or {})
        return Check("mcp-config", "pass" if found else "fail",
                     "added and listed" if found else f"not listed: {listed}")
    except AgentenvError as exc:
        return Check("mcp-config", "fail", exc.message)


async def check_trajectory(client: Any, *, context_id: str | None = None, task_id: str | None = None,
                           require_events: bool = False) -> Check:
    """Read the trajectory of a context or a task; with `require_events`, an empty one fails."""
    try:
        page = await client.trajectory_get(context_id=context_id, task_id=task_id)
        events = page.get("trajectory") or page.get("events") or []
        ok = bool(events) or not require_events
        return Check("trajectory", "pass" if ok else "fail", f"{len(events)} event(s)")
    except AgentenvError as exc:
        return Check("trajectory", "fail", exc.message)


async def check_skills(client: Any) -> Check:
    try:
        await client.skill_add("conformance-skill", "a skill the validator installs",
                               "---\nname: conformance-skill\ndescription: test\n---\nSay hello.\n")
        listed = await client.skill_list()
        items = listed.values() if isinstance(listed, dict) else (listed or [])
        names = [s.get("name") if isinstance(s, dict) else s for s in items]
        if isinstance(listed, dict):
            names += list(listed)
        ok = "conformance-skill" in names
        return Check("skills", "pass" if ok else "fail", "added and listed" if ok else str(listed))
    except AgentenvError as exc:
        return Check("skills", "fail", exc.message)


async def check_peer_agents(client: Any, card: dict) -> Check:
    """Set a peer (the agent itself), list it back and, when the card names the peer tools' MCP endpoint, see
    ``peer_list`` there show it; the peer table is emptied again after."""
    peer = {"name": "conformance-peer", "url": client.base_url, "description": "the agent itself"}
    try:
        await client.peer_agents_set([peer])
        try:
            listed = [p.get("name") for p in await client.peer_agents_list()]
            if listed != [peer["name"]]:
                return Check("peer-agents", "fail", f"set one peer, listed {listed}")
            endpoint = _peer_tools_endpoint(card)
            if endpoint is None:
                return Check("peer-agents", "pass", "set and listed (the card names no peer tools endpoint)")
            from mcp import Client

            async with Client(client.base_url + endpoint) as mcp:
                result = await mcp.call_tool("peer_list", {})
            names = [p.get("name") for p in ((result.structured_content or {}).get("peers") or [])]
            ok = not result.is_error and names == [peer["name"]]
            return Check("peer-agents", "pass" if ok else "fail",
                         "set, listed, and peer_list answers it over MCP" if ok else f"peer_list answered {names}")
        finally:
            await client.peer_agents_set([])
    except AgentenvError as exc:
        return Check("peer-agents", "fail", exc.message)
    except Exception as exc:  # the peer tools' MCP endpoint failing is this check's finding
        return Check("peer-agents", "fail", f"the peer tools' MCP endpoint: {type(exc).__name__}: {exc}")


def _peer_tools_endpoint(card: dict) -> str | None:
    for ext in (card.get("capabilities") or {}).get("extensions") or []:
        if isinstance(ext, dict) and str(ext.get("uri", "")).endswith(":peer-agents/v1"):
            endpoint = ((ext.get("params") or {}).get("mcp") or {}).get("endpoint")
            return endpoint if isinstance(endpoint, str) and endpoint.startswith("/") else None
    return None


def summarize(checks: list[Check]) -> dict[str, Any]:
    return {"passed": sum(c.status == "pass" for c in checks), "failed": sum(c.status == "fail" for c in checks),
            "skipped": sum(c.status == "skip" for c in checks), "checks": [c.to_dict() for c in checks]}
