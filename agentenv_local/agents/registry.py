"""Agent records: what `deploy_agent` and `agentenv agent deploy` can start by id.

A stored agent (`agentenv agent put`, or a bundle's `agents/<name>/`: bundles/agents.py) is a document in the
`agents` collection, versioned like everything else: exactly one of `"spec"` ("scripted" | "tool-loop" |
"human" | "file.py[:Class]" | "pkg.mod:Class"), `"url"` (an already-served agent), `"command"` (an argv that
serves A2A and announces its URL, run in `"cwd"`) and `"image"` (a Podman image serving A2A on $A2A_PORT); plus
"config" (default agent-config fields; `env:`/`secret:` refs read when it deploys), "env_vars", "description",
and for a bundle's, "bundle" and "aliases". Agents of the `agentenv_local.agents` entry-point group (ours:
scripted, human, tool-loop, the coding CLIs; and plugins') need no record: their names are their ids.
"""

from __future__ import annotations

from typing import Any

from agentenv_local.errors import NotFoundError, ValidationError

from .builtin import named_agents

COLLECTION = "agents"
KINDS = ("spec", "url", "command", "image")  # what an agent record starts or reaches: exactly one
BUILTIN_DESCRIPTIONS = {
    "scripted": "follows a plan: tool calls, templated replies, conditions; no model (also a user simulator "
                "and a deterministic judge)",
    "tool-loop": "calls a model with the env's MCP tools until the model stops ([model] config)",
    "human": "a person answers, in the TUI or with `agentenv human reply`",
    "pi": "pi (`pi -p --mode json`) with the env's MCP tools (through our pi extension), on the [model] endpoint "
          "(scripts/setup-agent-clis.sh installs the CLI)",
    "opencode": "opencode (`opencode run --format json`) with the env's MCP tools, on the [model] endpoint spoken "
                "as the Anthropic Messages API (scripts/setup-agent-clis.sh installs the CLI)",
    "openhands": "OpenHands CLI (`openhands --headless --json`) with the env's MCP tools, on the [model] endpoint "
                 "over Chat Completions (scripts/setup-agent-clis.sh installs the CLI)",
    "claude-code": "Claude Code (`claude -p`) with the env's MCP tools, on the [model] endpoint "
                   "(scripts/setup-agent-clis.sh installs the CLI)",
    "gemini": "Gemini CLI (`gemini -p`) with the env's MCP tools, on the [model] endpoint spoken as the Gemini "
              "API (scripts/setup-agent-clis.sh installs the CLI)",
    "codex": "OpenAI Codex CLI (`codex exec`) with the env's MCP tools, on the [model] endpoint over the Responses "
             "API (scripts/setup-agent-clis.sh installs the CLI)",
}


def validate_body(body: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ValidationError("an agent record is a JSON object")
    if sum(1 for key in KINDS if body.get(key)) != 1:
        raise ValidationError("an agent record needs exactly one of `spec` (what to start), `url` (an agent "
                              "that is already served), `command` (an argv serving A2A) and `image` (a Podman "
                              "image serving A2A)")
    command = body.get("command")
    if command is not None and not (isinstance(command, list) and command and all(isinstance(a, str) for a in command)):
        raise ValidationError("`command` must be a non-empty list of strings (an argv)")
    for key in ("config", "env_vars"):
        if key in body and not isinstance(body[key], dict):
            raise ValidationError(f"`{key}` must be an object")
    if body.get("url") and not str(body["url"]).startswith(("http://", "https://")):
        raise ValidationError(f"`url` {body['url']!r} is not an http(s) URL")
    return body


def resolve(store: Any, agent_id: str, version: int | None = None) -> dict[str, Any]:
    """{"id", "version", "spec" | "url", "config", "env_vars", "builtin"} for a built-in name or a stored id."""
    named = named_agents()
    if agent_id in named and version is None:
        return {"id": agent_id, "version": None, "spec": agent_id, "url": None, "command": None, "image": None,
                "cwd": None, "config": {}, "env_vars": {}, "builtin": True}
    doc = store.documents.find(COLLECTION, agent_id, version) if store is not None else None
    if doc is None:
        if ":" in agent_id or agent_id.endswith(".py"):  # a Python agent named directly
            return {"id": agent_id, "version": None, "spec": agent_id, "url": None, "command": None, "image": None,
                    "cwd": None, "config": {}, "env_vars": {}, "builtin": False}
        known = ", ".join(sorted(named))
        raise NotFoundError(f"agent {agent_id!r}" + (f" v{version}" if version else "") + " not found",
                            hint=f"agents by name: {known}; store one with `agentenv agent put`; or name a "
                                 "Python agent as `file.py:Class` / `package.module:Class`")
    body = doc["body"]
    return {"id": agent_id, "version": doc["version"], "spec": body.get("spec"), "url": body.get("url"),
            "command": body.get("command"), "image": body.get("image"), "cwd": body.get("cwd"),
            "config": dict(body.get("config") or {}), "env_vars": dict(body.get("env_vars") or {}),
            "builtin": False}


def resolved_config(config: Any, agent_id: str, fields: dict[str, Any]) -> dict[str, Any]:
    """A record's agent-config fields with each `env:`/`secret:` reference read now (the record keeps the
    reference, never the value)."""
    from agentenv_local.config.refs import parse_ref

    out = {}
    for key, value in fields.items():
        ref = parse_ref(value)
        out[key] = config._resolve_ref(("agents", agent_id, "config", key), ref) if ref is not None else value
    return out


def solver_step_ids(steps: list[dict]) -> set[str]:
    """The ids of a task's deploy_agent and install_agent steps (its JSON `steps`) that deploy or install an agent a
    prompt_agent step prompts, not as its user simulator: the solver's, whose agent `--agent` swaps for one run (as
    the reference's solver_steps does)."""
    prompts = [s for s in steps if isinstance(s, dict) and s.get("type") == "prompt_agent"]
    prompted = {p.get("agent_name") or "default-agent" for p in prompts}
    prompted -= {p.get("user_agent_name") for p in prompts if p.get("user_agent_name")}
    return {s["id"] for s in steps if isinstance(s, dict) and isinstance(s.get("id"), str)
            and s.get("type") in ("deploy_agent", "install_agent")
            and (s.get("agent_name") or "default-agent") in prompted}
