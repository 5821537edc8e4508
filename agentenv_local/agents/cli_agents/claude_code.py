"""The ``claude-code`` agent: each A2A turn runs Claude Code headless (``claude -p``) and its stream-json
events become the turn's trajectory as they arrive.

The model endpoint is the run's ``[model]`` (deploy_agent sends base_url, api_key, model over agent-config/v1),
spoken as the Anthropic Messages API (``ANTHROPIC_BASE_URL`` is the server root). The MCP servers are those
registered over mcp-config/v1 (the env's gateway URL with its role header), written to a private file and given
with ``--strict-mcp-config``. A context continues with ``--resume SESSION``. ``--dangerously-skip-permissions``
refuses to run as root, so the tools a turn may use are allowed by name (``allowed_tools``; every registered
MCP server's tools are added as ``mcp__<server>``).
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from ..types import TaskRequest, TrajectoryLog
from .harness import CliAgent, CliAgentConfig, CliTurn

DEFAULT_TOOLS = ("Bash", "Read", "Write", "Edit", "MultiEdit", "Glob", "Grep", "LS", "TodoWrite")
MAX_RESULT_CHARS = 100_000


class ClaudeCodeAgent(CliAgent):
    name = "claude-code"
    description = "Claude Code (claude -p) as an A2A agent: runs headless in a workspace with the env's MCP tools."
    cli_cache_name = "claude-code"
    cli_binary = "claude"
    install_hint = "run scripts/setup-agent-clis.sh, or `npm i -g @anthropic-ai/claude-code`, or set config command"
    trajectory_format = "agentenv-claude-code/1"
    skills_folder = ".claude/skills"  # where the CLI reads skills (NAME/SKILL.md) in its HOME

    def argv(self, executable: str, request: TaskRequest, cfg: CliAgentConfig, session_id: str | None) -> list[str]:
        model = self.model_name(cfg)
        prompt = self.prompt_text(request)
        argv = [executable, "-p", prompt, "--output-format", "stream-json", "--verbose", "--model", model]
        tools = list(cfg.allowed_tools if cfg.allowed_tools is not None else DEFAULT_TOOLS)
        if request.mcp_servers:
            argv += ["--mcp-config", self._mcp_config_file(request), "--strict-mcp-config"]
            tools += [f"mcp__{name}" for name in request.mcp_servers]
        else:
            argv += ["--strict-mcp-config"]  # no MCP server of the user's own settings
        if tools:
            argv += ["--allowedTools", ",".join(tools)]
        if cfg.system_prompt:
            argv += ["--append-system-prompt", cfg.system_prompt]
        if session_id:
            argv += ["--resume", session_id]
        return argv

    def _mcp_config_file(self, request: TaskRequest) -> str:
        """The servers in a file only this user reads (a bound token in a header stays off the command line)."""
        servers = {name: {"type": "http", "url": reg["url"], **({"headers": reg["headers"]} if reg.get("headers")
                                                                 else {})}
                   for name, reg in request.mcp_servers.items()}
        fd, path = tempfile.mkstemp(prefix="mcp-", suffix=".json", dir=self.private_home())
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"mcpServers": servers}, f)
        return self.turn_file(path)

    def cli_env(self, cfg: CliAgentConfig, base_url: str, api_key: str | None) -> dict[str, str]:
        root = base_url.rstrip("/")
        if root.endswith("/v1"):  # Claude Code adds /v1/messages itself; a LiteLLM-style .../v1 root works too
            root = root[: -len("/v1")]
        env = {"ANTHROPIC_BASE_URL": root, "API_TIMEOUT_MS": str(int(cfg.request_timeout_s * 1000)),
               # no network but the model endpoint and the env: no telemetry, reports, updates, other traffic
               "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
               "DISABLE_ERROR_REPORTING": "1", "DISABLE_AUTOUPDATER": "1",
               # MCP tools offered to the model directly, not deferred behind a ToolSearch tool
               "ENABLE_TOOL_SEARCH": "false"}
        if api_key:
            env["ANTHROPIC_API_KEY"] = api_key
        return env

    def on_event(self, event: dict[str, Any], turn: CliTurn, log: TrajectoryLog) -> None:
        kind = event.get("type")
        if event.get("session_id"):
            turn.session_id = str(event["session_id"])
        if kind == "system" and event.get("subtype") == "init":
            log.append({"type": "cli_init", "cli": self.name, "session_id": event.get("session_id"),
                        "model": event.get("model"), "tools": event.get("tools"),
                        "mcp_servers": event.get("mcp_servers")})
        elif kind == "assistant":
            for block in _blocks(event):
                if block.get("type") == "text" and block.get("text"):
                    log.append({"type": "assistant_text", "text": block["text"]})
                elif block.get("type") == "tool_use":
                    use: dict[str, Any] = {"id": block.get("id"), "name": block.get("name"),
                                           "args": block.get("input")}
                    turn.pending_tools[str(block.get("id"))] = use
                    log.append({"type": "tool_use", **use})  # live: the call before its result
        elif kind == "user":
            for block in _blocks(event):
                if block.get("type") == "tool_result":
                    call = turn.pending_tools.pop(str(block.get("tool_use_id")), None) or \
                        {"id": block.get("tool_use_id"), "name": None, "args": None}
                    turn.tool_calls += 1
                    name = call.get("name") or ""
                    server, tool = _mcp_route(name)
                    log.append({"type": "tool_call", **call, "server": server, "tool": tool,
                                "result": _result_text(block.get("content")),
                                "is_error": bool(block.get("is_error"))})
        elif kind == "result":
            usage = event.get("usage") or {}
            inputs = sum(int(usage.get(k) or 0) for k in ("input_tokens", "cache_creation_input_tokens",
                                                          "cache_read_input_tokens"))
            outputs = int(usage.get("output_tokens") or 0)
            turn.usage = {"input_tokens": inputs, "output_tokens": outputs, "total_tokens": inputs + outputs,
                          "cost_usd": event.get("total_cost_usd")}
            text = event.get("result")
            failed = bool(event.get("is_error")) or event.get("subtype") != "success"
            log.append({"type": "final", "subtype": event.get("subtype"), "text": text, "is_error": failed,
                        "num_turns": event.get("num_turns"), "usage": turn.usage})
            if failed:
                turn.is_error = True
                turn.error_text = f"claude-code ended with {event.get('subtype')}: {text or 'no result text'}"
            else:
                turn.final_text = text if isinstance(text, str) else json.dumps(text)


def _blocks(event: dict[str, Any]) -> list[dict[str, Any]]:
    content = (event.get("message") or {}).get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _mcp_route(name: str) -> tuple[str | None, str]:
    """(server, tool) of an ``mcp__server__tool`` name; (None, name) for Claude Code's own tools."""
    if name.startswith("mcp__"):
        server, _, tool = name[len("mcp__"):].partition("__")
        return server, tool
    return None, name


def _result_text(content: Any) -> str:
    if isinstance(content, list):
        content = "\n".join(str(c.get("text", "")) if isinstance(c, dict) else str(c) for c in content)
    text = "" if content is None else str(content)
    return text if len(text) <= MAX_RESULT_CHARS else text[:MAX_RESULT_CHARS] + "\n[... cut]"
