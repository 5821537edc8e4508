"""The ``pi`` agent: each A2A turn runs the pi coding agent headless (``pi -p --mode json``) and its JSON events
become the turn's trajectory as they arrive.

The model endpoint is the run's ``[model]`` (deploy_agent sends base_url, api_key, model over agent-config/v1),
declared to pi as one custom provider in ``models.json`` in the agent's private HOME: ``api = "openai"`` is spoken
as Chat Completions (base_url as given, e.g. ``.../v1``), ``api = "anthropic"`` as the Messages API (the server
root). The file names only the environment variable that holds the key (the model proxy's token: harness.py).
pi has no built-in MCP client (MCP is left to its extensions). Extension discovery stays off (``--no-extensions``:
nothing of a workspace's .pi/ folder runs as code in the agent), and the agent loads one extension of its own with
``-e``: ``pi_mcp.js``, which lists the MCP servers registered over mcp-config/v1 (named in a private file, with
their headers) and registers each tool as the pi tool ``<server>_<tool>``, called over MCP streamable HTTP. pi's
own tools stay (read, bash, edit, write). A context continues with ``--session ID``.
"""

from __future__ import annotations

import json
import os
import tempfile
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from ..types import TaskRequest, TaskResult, TrajectoryLog
from .harness import CliAgent, CliAgentConfig, CliTurn

PROVIDER = "agentenv"
KEY_VARIABLE = "AGENTENV_PI_MODEL_KEY"  # models.json names this variable; the key itself stays in the env
NO_KEY = "no-key"  # pi wants some key even for an endpoint that takes none
MAX_RESULT_CHARS = 100_000
PI_APIS = {"openai": "openai-completions", "anthropic": "anthropic-messages"}
MCP_EXTENSION = Path(__file__).with_name("pi_mcp.js")  # our own extension: the env's MCP tools as pi tools
MCP_VARIABLE = "AGENTENV_PI_MCP"  # names the extension's private file of servers
_TURN_SERVERS: ContextVar[tuple[str, ...]] = ContextVar("pi_turn_servers", default=())


class PiAgent(CliAgent):
    name = "pi"
    description = "pi (pi -p --mode json) as an A2A agent: runs headless in a workspace with the env's MCP tools."
    cli_cache_name = "pi"
    cli_binary = "pi"
    install_hint = ("run scripts/setup-agent-clis.sh, or `npm i -g @mariozechner/pi-coding-agent`, "
                    "or set config command")
    trajectory_format = "agentenv-pi/1"
    skills_folder = ".pi/agent/skills"  # where the CLI reads skills (NAME/SKILL.md) in its HOME

    def argv(self, executable: str, request: TaskRequest, cfg: CliAgentConfig, session_id: str | None) -> list[str]:
        model = self.model_name(cfg)
        prompt = self.prompt_text(request)
        if prompt.startswith(("-", "@")):  # pi would read it as a flag or a file to attach
            prompt = " " + prompt
        argv = [executable, "-p", "--mode", "json", "--provider", PROVIDER, "--model", model,
                "--session-dir", str(self.private_home() / "sessions"),
                "--no-extensions"]  # nothing of a workspace's .pi/ folder runs as code in the agent
        if request.mcp_servers:
            self._write_mcp_servers(request)
            argv += ["-e", str(MCP_EXTENSION)]
        if cfg.allowed_tools is not None:
            argv += ["--tools", ",".join(cfg.allowed_tools)] if cfg.allowed_tools else ["--no-tools"]
        if cfg.system_prompt:
            argv += ["--append-system-prompt", cfg.system_prompt]
        if session_id:
            argv += ["--session", session_id]
        return [*argv, prompt]

    async def run(self, request: TaskRequest) -> TaskResult:
        _TURN_SERVERS.set(tuple(request.mcp_servers or ()))  # this task's own: on_event routes MCP calls with it
        return await super().run(request)

    def _mcp_file(self) -> Path:
        return self._agent_dir() / "mcp-servers.json"

    def _write_mcp_servers(self, request: TaskRequest) -> None:
        """The servers for pi_mcp.js, in a file only this user reads (a bound token in a header stays off argv)."""
        servers = {name: {"url": reg["url"], "headers": reg.get("headers") or {}}
                   for name, reg in request.mcp_servers.items()}
        folder = self._agent_dir()
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix="mcp-", suffix=".json", dir=folder)  # mode 0600, our own private HOME
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"servers": servers}, f)
        os.replace(tmp, self._mcp_file())

    def cli_env(self, cfg: CliAgentConfig, base_url: str, api_key: str | None) -> dict[str, str]:
        # the provider needs the endpoint, which only this hook is given; models.json is rewritten each turn
        self._write_models_json(cfg, base_url)
        return {KEY_VARIABLE: api_key or NO_KEY, MCP_VARIABLE: str(self._mcp_file()),
                "PI_CODING_AGENT_DIR": str(self._agent_dir()),
                "PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0"}  # no traffic but the model's

    def _agent_dir(self) -> Path:
        return self.private_home() / ".pi" / "agent"

    def _write_models_json(self, cfg: CliAgentConfig, base_url: str) -> None:
        url = base_url.rstrip("/")
        if cfg.api == "anthropic":  # the Anthropic SDK adds /v1/messages itself; a LiteLLM-style .../v1 root works
            url = url.removesuffix("/v1")
        provider = {"baseUrl": url, "api": PI_APIS[cfg.api], "apiKey": KEY_VARIABLE,
                    "models": [{"id": cfg.model}]}
        folder = self._agent_dir()
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix="models-", suffix=".json", dir=folder)  # our own private HOME
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"providers": {PROVIDER: provider}}, f)
        os.replace(tmp, folder / "models.json")

    def on_event(self, event: dict[str, Any], turn: CliTurn, log: TrajectoryLog) -> None:
        kind = event.get("type")
        if kind == "session":
            turn.session_id = str(event.get("id")) if event.get("id") else turn.session_id
            log.append({"type": "cli_init", "cli": self.name, "session_id": event.get("id"), "cwd": event.get("cwd")})
        elif kind == "message_end":
            self._message_end(event.get("message") or {}, turn, log)
        elif kind == "tool_execution_start":
            use: dict[str, Any] = {"id": event.get("toolCallId"), "name": event.get("toolName"),
                                   "args": event.get("args")}
            turn.pending_tools[str(event.get("toolCallId"))] = use
            log.append({"type": "tool_use", **use})  # live: the call before its result
        elif kind == "tool_execution_end":
            call = turn.pending_tools.pop(str(event.get("toolCallId")), None) or \
                {"id": event.get("toolCallId"), "name": event.get("toolName"), "args": None}
            turn.tool_calls += 1
            server, tool = _mcp_route(str(call.get("name") or ""), _TURN_SERVERS.get())
            log.append({"type": "tool_call", **call, "server": server, "tool": tool,
                        "result": _result_text((event.get("result") or {}).get("content")),
                        "is_error": bool(event.get("isError"))})
        elif kind == "agent_end":
            log.append({"type": "final", "text": turn.final_text, "is_error": turn.is_error,
                        "usage": dict(turn.usage)})

    def _message_end(self, message: dict[str, Any], turn: CliTurn, log: TrajectoryLog) -> None:
        """An assistant message: its text, its usage added to the turn's, and an error stop ends the turn failed."""
        if message.get("role") != "assistant":
            return
        _add_usage(turn, message.get("usage") or {})
        text = "".join(str(b.get("text") or "") for b in message.get("content") or []
                       if isinstance(b, dict) and b.get("type") == "text")
        if text:
            log.append({"type": "assistant_text", "text": text})
        if message.get("stopReason") in ("error", "aborted"):
            turn.is_error = True
            turn.error_text = f"pi ended with {message.get('stopReason')}: " + \
                str(message.get("errorMessage") or "no error message")
        elif message.get("stopReason") != "toolUse":
            turn.final_text, turn.is_error, turn.error_text = text, False, None


def _mcp_route(name: str, servers: tuple[str, ...]) -> tuple[str | None, str]:
    """(server, tool) of a tool pi_mcp.js registered (``<server>_<tool>``); (None, name) for pi's own tools."""
    for server in sorted(servers, key=len, reverse=True):
        if name.startswith(server + "_"):
            return server, name[len(server) + 1:]
    return None, name


def _add_usage(turn: CliTurn, usage: dict[str, Any]) -> None:
    inputs = sum(int(usage.get(k) or 0) for k in ("input", "cacheRead", "cacheWrite"))
    outputs = int(usage.get("output") or 0)
    cost = (usage.get("cost") or {}).get("total") if isinstance(usage.get("cost"), dict) else None
    so_far = turn.usage
    turn.usage = {"input_tokens": int(so_far.get("input_tokens") or 0) + inputs,
                  "output_tokens": int(so_far.get("output_tokens") or 0) + outputs,
                  "total_tokens": int(so_far.get("total_tokens") or 0) + inputs + outputs,
                  "cost_usd": (so_far.get("cost_usd") or 0.0) + float(cost or 0.0)}


def _result_text(content: Any) -> str:
    if isinstance(content, list):
        content = "\n".join(str(c.get("text", "")) if isinstance(c, dict) else str(c) for c in content)
    text = "" if content is None else str(content)
    return text if len(text) <= MAX_RESULT_CHARS else text[:MAX_RESULT_CHARS] + "\n[... cut]"
