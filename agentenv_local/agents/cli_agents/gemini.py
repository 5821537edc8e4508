"""The ``gemini`` agent: each A2A turn runs Gemini CLI headless (``gemini -p --output-format stream-json``) and
its events become the turn's trajectory as they arrive.

The model endpoint is the run's ``[model]`` (deploy_agent sends base_url, api_key, model over agent-config/v1),
spoken as the Gemini API (``GOOGLE_GEMINI_BASE_URL`` is the server root, the model proxy's token is
``GEMINI_API_KEY``). The CLI's settings (API-key auth, no telemetry, no update checks, the MCP servers
registered over mcp-config/v1 as ``httpUrl`` with their headers) are written to ``settings.json`` in the agent's
private HOME before each turn. A context continues with ``--resume SESSION``. ``--yolo`` approves the tools;
``--skip-trust`` lets it work in a folder it has not been told to trust. Gemini CLI refuses a shell command
holding ``$(`` (``$((6 * 7))`` included) as command substitution.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from ..types import TaskRequest, TaskResult, TrajectoryLog
from .harness import CliAgent, CliAgentConfig, CliTurn

MAX_RESULT_CHARS = 100_000
# Gemini CLI will not start API-key auth without a key; an endpoint that wants none (a local proxy) gets this
NO_KEY = "no-key"
# the assistant text streamed since the last tool, kept with the turn's in-flight tool calls (no tool id is empty)
TEXT_SEGMENT = ""


class GeminiAgent(CliAgent):
    name = "gemini"
    description = "Gemini CLI (gemini -p) as an A2A agent: runs headless in a workspace with the env's MCP tools."
    cli_cache_name = "gemini"
    cli_binary = "gemini"
    install_hint = "run scripts/setup-agent-clis.sh, or `npm i -g @google/gemini-cli`, or set config command"
    trajectory_format = "agentenv-gemini/1"
    skills_folder = ".gemini/skills"  # where the CLI reads skills (NAME/SKILL.md) in its HOME
    _servers: tuple[str, ...] = ()  # the MCP servers of the latest turn: an MCP tool's name starts with one

    def argv(self, executable: str, request: TaskRequest, cfg: CliAgentConfig, session_id: str | None) -> list[str]:
        model = self.model_name(cfg)
        prompt = self.prompt_text(request)
        self._write_settings(request, cfg)
        argv = [executable, "--output-format", "stream-json", "--yolo", "--skip-trust", "-m", model]
        if cfg.allowed_tools is not None:
            argv += ["--allowed-tools", ",".join(cfg.allowed_tools)]
        if session_id:
            argv += ["--resume", session_id]
        return argv + ["-p", prompt]

    def _write_settings(self, request: TaskRequest, cfg: CliAgentConfig) -> None:
        """settings.json (and the system prompt as the global GEMINI.md) in the private HOME, readable by this
        user only: a bound token in an MCP header stays off the command line."""
        folder = self.private_home() / ".gemini"
        folder.mkdir(mode=0o700, exist_ok=True)
        settings: dict[str, Any] = {
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
            "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
            "mcpServers": {name: {"httpUrl": reg["url"], "trust": True,
                                  **({"headers": reg["headers"]} if reg.get("headers") else {})}
                           for name, reg in request.mcp_servers.items()}}
        _write_private(folder / "settings.json", json.dumps(settings))
        memory = folder / "GEMINI.md"
        if cfg.system_prompt:
            _write_private(memory, cfg.system_prompt)
        else:
            memory.unlink(missing_ok=True)

    def cli_env(self, cfg: CliAgentConfig, base_url: str, api_key: str | None) -> dict[str, str]:
        root = base_url.rstrip("/")
        for suffix in ("/v1beta", "/v1"):  # Gemini CLI adds /v1beta/models/... itself
            if root.endswith(suffix):
                root = root[: -len(suffix)]
                break
        return {"GOOGLE_GEMINI_BASE_URL": root, "GEMINI_API_KEY": api_key or NO_KEY}

    def on_event(self, event: dict[str, Any], turn: CliTurn, log: TrajectoryLog) -> None:
        kind = event.get("type")
        if event.get("session_id"):
            turn.session_id = str(event["session_id"])
        segment = turn.pending_tools.setdefault(TEXT_SEGMENT, {"text": ""})
        if kind == "init":
            log.append({"type": "cli_init", "cli": self.name, "session_id": event.get("session_id"),
                        "model": event.get("model")})
        elif kind == "message" and event.get("role") == "assistant" and isinstance(event.get("content"), str):
            segment["text"] += event["content"]
        elif kind == "tool_use":
            _flush_text(segment, log)
            use: dict[str, Any] = {"id": event.get("tool_id"), "name": event.get("tool_name"),
                                   "args": event.get("parameters")}
            turn.pending_tools[str(event.get("tool_id"))] = use
            log.append({"type": "tool_use", **use})  # live: the call before its result
        elif kind == "tool_result":
            call = turn.pending_tools.pop(str(event.get("tool_id")), None) or \
                {"id": event.get("tool_id"), "name": None, "args": None}
            turn.tool_calls += 1
            server, tool = _mcp_route(str(call.get("name") or ""), self._servers)
            error = _error(event)
            result = event.get("output") if event.get("output") is not None else error.get("message")
            log.append({"type": "tool_call", **call, "server": server, "tool": tool, "result": _cut(result),
                        "is_error": event.get("status") != "success"})
        elif kind == "error":
            log.append({"type": "cli_error", "severity": event.get("severity"), "message": event.get("message")})
        elif kind == "result":
            text = _flush_text(segment, log)
            stats = event.get("stats") or {}
            turn.usage = {key: int(stats.get(key) or 0) for key in ("input_tokens", "output_tokens", "total_tokens")}
            failed = event.get("status") != "success"
            log.append({"type": "final", "status": event.get("status"), "text": text, "is_error": failed,
                        "usage": turn.usage})
            if failed:
                error = _error(event)
                turn.is_error = True
                turn.error_text = f"gemini ended with {event.get('status')}: " + \
                    str(error.get("message") or text or "no result text")
            else:
                turn.final_text = text

    async def run(self, request: TaskRequest) -> TaskResult:
        self._servers = tuple(request.mcp_servers)
        return await super().run(request)


def _write_private(path: Path, text: str) -> None:
    """Replace `path` by a new file of this user only (never writing through a link someone put there)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def _error(event: dict[str, Any]) -> dict[str, Any]:
    error = event.get("error")
    return error if isinstance(error, dict) else {}


def _flush_text(segment: dict[str, Any], log: TrajectoryLog) -> str:
    """Log the assistant text streamed since the last tool and start a new segment; returns that text."""
    text = str(segment.get("text") or "")
    if text:
        log.append({"type": "assistant_text", "text": text})
    segment["text"] = ""
    return text


def _mcp_route(name: str, servers: tuple[str, ...]) -> tuple[str | None, str]:
    """(server, tool) of an MCP tool name (Gemini CLI prefixes a tool with its server as `mcp_<server>_` or
    `<server>__`); (None, name) for Gemini CLI's own tools."""
    for server in sorted(servers, key=len, reverse=True):
        for prefix in (f"mcp_{server}_", f"{server}__"):
            if name.startswith(prefix):
                return server, name[len(prefix):]
    return None, name


def _cut(result: Any) -> str:
    text = "" if result is None else result if isinstance(result, str) else json.dumps(result, default=str)
    return text if len(text) <= MAX_RESULT_CHARS else text[:MAX_RESULT_CHARS] + "\n[... cut]"
