"""The ``opencode`` agent: each A2A turn runs opencode headless (``opencode run --format json``) and its JSON
events become the turn's trajectory as they arrive.

The model endpoint is the run's ``[model]`` (deploy_agent sends base_url, api_key, model over agent-config/v1),
spoken by opencode's built-in ``anthropic`` provider (Messages API, streamed) with ``options.baseURL`` pointed
at it (the agent's model proxy and its token, never the key: harness.py). The whole config is handed in
``OPENCODE_CONFIG_CONTENT`` (no file of the user's is read or written), with every network feature of its own
turned off (updates, the models.dev catalogue, sharing, LSP downloads, default plugins). The MCP servers
registered over mcp-config/v1 become ``remote`` MCP servers (their tools are named ``<server>_<tool>``). A
context continues with ``--session ID``; ``--auto`` approves the tool permissions a headless run cannot ask.
"""

from __future__ import annotations

import json
import os
import tempfile
from contextvars import ContextVar
from typing import Any

from ..types import TaskRequest, TaskResult, TrajectoryLog
from .harness import CliAgent, CliAgentConfig, CliAgentError, CliTurn

MAX_RESULT_CHARS = 100_000
# opencode's own traffic (update check, model catalogue, share links, language servers, plugins): all off
OFFLINE_ENV = {"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1",
               "OPENCODE_DISABLE_SHARE": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
               "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1"}
_TURN_MCP: ContextVar[dict[str, dict[str, Any]]] = ContextVar("opencode_turn_mcp", default={})  # never mutated


class OpencodeAgent(CliAgent):
    name = "opencode"
    description = "opencode (opencode run) as an A2A agent: runs headless in a workspace with the env's MCP tools."
    cli_cache_name = "opencode"
    cli_binary = "opencode"
    install_hint = "run scripts/setup-agent-clis.sh, or `npm i -g opencode-ai`, or set config command"
    trajectory_format = "agentenv-opencode/1"
    skills_folder = ".config/opencode/skills"  # where the CLI reads skills (NAME/SKILL.md) in its HOME

    def argv(self, executable: str, request: TaskRequest, cfg: CliAgentConfig, session_id: str | None) -> list[str]:
        prompt = self.prompt_text(request)
        argv = [executable, "run", "--format", "json", "--auto"]
        if session_id:
            argv += ["--session", session_id]
        return [*argv, "--", prompt]  # a prompt starting with "-" stays the message

    def cli_env(self, cfg: CliAgentConfig, base_url: str, api_key: str | None) -> dict[str, str]:
        model = self.model_name(cfg)
        if cfg.api != "anthropic":
            raise CliAgentError("opencode.unsupported_api", f"the opencode agent speaks the Anthropic Messages API "
                                                            f"here, not {cfg.api!r}: set [model] api = \"anthropic\" "
                                                            "with an endpoint that serves /v1/messages")
        root = base_url.rstrip("/")
        if not root.endswith("/v1"):  # the provider's baseURL includes /v1 (it adds /messages itself)
            root += "/v1"
        config: dict[str, Any] = {
            "$schema": "https://opencode.ai/config.json", "autoupdate": False, "share": "disabled",
            "model": model if model.startswith("anthropic/") else f"anthropic/{model}",
            "provider": {"anthropic": {"options": {"baseURL": root,
                                                   "timeout": int(cfg.request_timeout_s * 1000)}}},
        }
        servers = self._mcp_servers
        if servers:
            config["mcp"] = servers
        if cfg.allowed_tools is not None:  # only these of opencode's own tools, plus every MCP server's
            config["tools"] = {"*": False, **{tool: True for tool in cfg.allowed_tools},
                               **{f"{name}_*": True for name in servers}}
        if cfg.system_prompt:
            config["instructions"] = [self._instructions_file(cfg.system_prompt)]
        env = {**OFFLINE_ENV, "OPENCODE_CONFIG_CONTENT": json.dumps(config)}
        if api_key:
            env["ANTHROPIC_API_KEY"] = api_key
        return env

    async def run(self, request: TaskRequest) -> TaskResult:
        # cli_env and on_event see no request: this turn's MCP servers ride in a context variable (turns of
        # different contexts may run at once, each in its own task)
        _TURN_MCP.set({name: {"type": "remote", "url": reg["url"], "enabled": True,
                              **({"headers": reg["headers"]} if reg.get("headers") else {})}
                       for name, reg in (request.mcp_servers or {}).items()})
        return await super().run(request)

    @property
    def _mcp_servers(self) -> dict[str, dict[str, Any]]:
        return _TURN_MCP.get()

    def _instructions_file(self, text: str) -> str:
        fd, path = tempfile.mkstemp(prefix="instructions-", suffix=".md", dir=self.private_home())
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        return self.turn_file(path)

    def on_event(self, event: dict[str, Any], turn: CliTurn, log: TrajectoryLog) -> None:
        kind = event.get("type")
        part = _dict(event.get("part"))
        if event.get("sessionID"):
            if turn.session_id is None:
                log.append({"type": "cli_init", "cli": self.name, "session_id": event["sessionID"]})
            turn.session_id = str(event["sessionID"])
        if kind == "step_start":
            turn.usage["step_texts"] = []  # the answer is the text of the step that ends the turn
        elif kind == "text" and part.get("text"):
            log.append({"type": "assistant_text", "text": part["text"]})
            turn.usage.setdefault("step_texts", []).append(str(part["text"]))
        elif kind == "tool_use":
            self._tool_event(part, turn, log)
        elif kind == "step_finish":
            self._step_finish(part, turn, log)
        elif kind == "error":
            error = _dict(event.get("error"))
            message = _dict(error.get("data")).get("message") or error.get("name") or str(event.get("error"))
            log.append({"type": "cli_error", "message": message})
            turn.is_error = True
            turn.error_text = f"opencode failed: {message}"

    def _tool_event(self, part: dict[str, Any], turn: CliTurn, log: TrajectoryLog) -> None:
        state = _dict(part.get("state"))
        call: dict[str, Any] = {"id": part.get("callID"), "name": part.get("tool"), "args": state.get("input")}
        status = state.get("status")
        if status not in ("completed", "error"):  # a call still running: shown live, its result comes later
            turn.pending_tools[str(call["id"])] = call
            log.append({"type": "tool_use", **call})
            return
        turn.pending_tools.pop(str(call["id"]), None)
        turn.tool_calls += 1
        server, tool = self._mcp_route(str(call["name"] or ""))
        result = state.get("output") if status == "completed" else state.get("error")
        log.append({"type": "tool_use", **call})
        log.append({"type": "tool_call", **call, "server": server, "tool": tool, "result": _cut(result),
                    "is_error": status == "error"})

    def _mcp_route(self, name: str) -> tuple[str | None, str]:
        """(server, tool) of an MCP tool (``<server>_<tool>``); (None, name) for opencode's own tools."""
        for server in sorted(self._mcp_servers, key=len, reverse=True):
            if name.startswith(server + "_"):
                return server, name[len(server) + 1:]
        return None, name

    def _step_finish(self, part: dict[str, Any], turn: CliTurn, log: TrajectoryLog) -> None:
        tokens = _dict(part.get("tokens"))
        cache = _dict(tokens.get("cache"))
        usage = turn.usage
        usage["input_tokens"] = int(usage.get("input_tokens") or 0) + int(tokens.get("input") or 0) + \
            int(cache.get("read") or 0) + int(cache.get("write") or 0)
        usage["output_tokens"] = int(usage.get("output_tokens") or 0) + int(tokens.get("output") or 0) + \
            int(tokens.get("reasoning") or 0)
        usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
        usage["cost_usd"] = float(usage.get("cost_usd") or 0.0) + float(part.get("cost") or 0.0)
        if part.get("reason") == "tool-calls":
            return
        text = "\n".join(usage.pop("step_texts", None) or [])
        turn.final_text = text
        log.append({"type": "final", "reason": part.get("reason"), "text": text, "is_error": False,
                    "usage": {k: usage[k] for k in ("input_tokens", "output_tokens", "total_tokens", "cost_usd")}})


def _cut(value: Any) -> str:
    text = "" if value is None else value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= MAX_RESULT_CHARS else text[:MAX_RESULT_CHARS] + "\n[... cut]"


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
