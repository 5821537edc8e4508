"""The agent card the A2A server publishes: the 0.3 card or the 1.0 card, with the AgentEnv extensions it serves."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import wire
from .base import Agent
from .peers import PEER_TOOL_NAMES, PEER_TOOLS_PATH, PEER_TOOLS_SERVER

A2A_PROTOCOL_VERSION = "0.3.0"
RPC_PATH = "/a2a"
CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")

EXT = "urn:agentenv:{}/v1"
AGENT_CONFIG_V1 = EXT.format("agent-config")
MCP_CONFIG_V1 = EXT.format("mcp-config")
SKILL_CONFIG_V1 = EXT.format("skill-config")
TRAJECTORY_V1 = EXT.format("trajectory")
TRIGGERS_V1 = EXT.format("triggers")
PEER_AGENTS_V1 = EXT.format("peer-agents")
EXTENSION_URIS = (AGENT_CONFIG_V1, MCP_CONFIG_V1, SKILL_CONFIG_V1, TRAJECTORY_V1, TRIGGERS_V1, PEER_AGENTS_V1)


def agent_card(agent: Agent, cfg: Any, registered_skills: Sequence[dict[str, Any]], *, public_url: str | None,
               base_url: str, dialect: wire.Dialect = "0.3") -> dict[str, Any]:
    """The card a client of ``dialect`` reads: the 0.3 card (also read by 1.0 clients that accept 0.3 fields)
    adds ``url``, ``protocolVersion``, ``preferredTransport``, ``additionalInterfaces`` and
    ``capabilities.stateTransitionHistory``, which a strict 1.0 parse (a2a-sdk 1.x's AgentCard) refuses.
    ``cfg`` is the agent's task config (its name and description win); ``registered_skills`` came by skill-config/v1."""
    base = public_url or base_url.rstrip("/")
    url = base + RPC_PATH
    skills = [dict(s) for s in agent.skills] + [
        {"id": f"skill-{s['name']}", "name": s["name"], "description": s["description"], "tags": ["skill"]}
        for s in registered_skills]
    config_fields = sorted(agent.config_model.model_fields)
    extensions = [
        {"uri": AGENT_CONFIG_V1, "description": "Set or read agent configuration.",
         "params": {"endpoint": "/ext/agent-config",
                    "methods": {"set": {"method": "POST", "request": {"supported": config_fields}},
                                "get": {"method": "GET", "response": {"required": ["config"]}}}}},
        {"uri": MCP_CONFIG_V1, "description": "Register MCP servers the agent should use.",
         "params": {"endpoint": "/ext/mcp-config",
                    "methods": {"add": {"method": "POST", "request": {"required": ["url"],
                                                                      "optional": ["headers", "name"]}},
                                "list": {"method": "GET", "response": {"required": ["mcp_servers"]}}}}},
        {"uri": SKILL_CONFIG_V1, "description": "Register skills made available to the agent.",
         "params": {"endpoint": "/ext/skill-config",
                    "methods": {"add": {"method": "POST", "request": {"variants": ["inline"]}},
                                "list": {"method": "GET", "response": {"required": ["skills"]}}}}},
        {"uri": TRAJECTORY_V1, "description": "Retrieve an agent trajectory.",
         "params": {"endpoint": "/ext/trajectory",
                    "methods": {"get": {"method": "POST", "request": {
                        "variants": ["task", "context", "task_events", "context_events"]}}}}},
        {"uri": TRIGGERS_V1, "description": "Register triggers and decide deterministic responses.",
         "params": {"endpoint": "/ext/triggers",
                    "methods": {"register": {"method": "POST"},
                                "decide": {"method": "POST", "endpoint": "/ext/triggers/decide",
                                           "response": {"required": ["parts", "done", "fired"]}},
                                "state": {"method": "GET", "response": {"required": ["firing_log"]}}}}},
        {"uri": PEER_AGENTS_V1, "description": "Configure peer A2A agents available for delegation.",
         "params": {"endpoint": "/ext/peer-agents",
                    "methods": {"set": {"method": "POST"}, "list": {"method": "GET"}},
                    "mcp": {"endpoint": PEER_TOOLS_PATH, "server_name": PEER_TOOLS_SERVER,
                            "tools": list(PEER_TOOL_NAMES)}}},
    ] + [dict(e) for e in agent.card_extensions()]
    interfaces = [{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                  {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}]
    if dialect == "1.0":
        return {"name": cfg.name or agent.name, "description": cfg.description or agent.description,
                "version": agent.version, "supportedInterfaces": interfaces,
                "defaultInputModes": list(agent.input_modes), "defaultOutputModes": list(agent.output_modes),
                "skills": skills,
                "capabilities": {"streaming": True, "pushNotifications": False, "extendedAgentCard": False,
                                 "extensions": extensions}}
    return {
        "name": cfg.name or agent.name,
        "description": cfg.description or agent.description,
        "version": agent.version,
        "url": url,
        "protocolVersion": A2A_PROTOCOL_VERSION,
        "preferredTransport": "JSONRPC",
        "additionalInterfaces": [{"url": url, "transport": "JSONRPC"}],
        "supportedInterfaces": interfaces[::-1],
        "defaultInputModes": list(agent.input_modes),
        "defaultOutputModes": list(agent.output_modes),
        "skills": skills,
        "capabilities": {"streaming": True, "pushNotifications": False, "stateTransitionHistory": False,
                         "extensions": extensions},
    }
