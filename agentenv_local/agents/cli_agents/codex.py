"""The ``codex`` agent: each A2A turn runs OpenAI's Codex CLI headless (``codex exec --json``) and its JSON
events become the turn's trajectory as they arrive.

Codex reads its settings from ``$CODEX_HOME/config.toml``, which the agent writes before each turn into its
private HOME: the run's ``[model]`` endpoint as a model provider spoken over the OpenAI Responses API
(``{base_url}/responses``, streamed; the key, the model proxy's token, comes from an environment variable the
provider names), no update check or analytics, and the MCP servers registered over mcp-config/v1 (the env's
gateway URL with its role header) as streamable-HTTP servers. A context continues with
``codex exec resume THREAD``. Codex's own sandbox (Landlock/seccomp) and approvals are off: the agent works in its
workspace, as the reference's does in its container.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..types import TaskRequest, TrajectoryLog
from .harness import CliAgent, CliAgentConfig, CliTurn

KEY_VARIABLE = "AGENTENV_CODEX_MODEL_KEY"  # the env var the provider reads its key from (the key is not in a file)
PROVIDER = "agentenv"
MAX_RESULT_CHARS = 100_000


class CodexAgent(CliAgent):
    name = "codex"
    description = ("OpenAI Codex CLI (codex exec) as an A2A agent: runs headless in a workspace with the env's "
                   "MCP tools.")
    cli_cache_name = "codex"
    cli_binary = "codex"
    install_hint = "run scripts/setup-agent-clis.sh, or `npm i -g @openai/codex`, or set config command"
    trajectory_format = "agentenv-codex/1"
    skills_folder = ".agents/skills"  # where the CLI reads skills (NAME/SKILL.md) in its HOME

    def argv(self, executable: str, request: TaskRequest, cfg: CliAgentConfig, session_id: str | None) -> list[str]:
        model = self.model_name(cfg)
        self._write_config(request, cfg)
        prompt = self.prompt_text(request)
        argv = [executable, "exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
                "--model", model]
        if session_id:
            argv += ["resume", session_id]
        return argv + ["--", prompt]  # `--`: a prompt that starts with '-' is no flag

    def codex_home(self) -> Path:
        return self.private_home() / ".codex"

    def _write_config(self, request: TaskRequest, cfg: CliAgentConfig) -> None:
        """config.toml for this turn (the MCP servers can change between turns), readable by this user only:
        a bound token in an MCP header stays off the command line."""
        endpoint, key, _ = self.model_route(cfg)  # run() resolved it before: the same proxy URL and token
        base_url = _responses_base(endpoint)
        lines = [f"model_provider = {_toml(PROVIDER)}", "check_for_update_on_startup = false"]
        if cfg.system_prompt:
            lines.append(f"developer_instructions = {_toml(cfg.system_prompt)}")
        lines += ["", "[analytics]", "enabled = false", "", f"[model_providers.{PROVIDER}]",
                  f"name = {_toml(PROVIDER)}", f"base_url = {_toml(base_url)}", 'wire_api = "responses"',
                  f"request_max_retries = {cfg.max_retries}", f"stream_max_retries = {cfg.max_retries}",
                  f"stream_idle_timeout_ms = {int(cfg.request_timeout_s * 1000)}"]
        if key:  # a keyless local server gets no Authorization header
            lines.append(f"env_key = {_toml(KEY_VARIABLE)}")
        for name, reg in request.mcp_servers.items():
            lines += ["", f"[mcp_servers.{_toml(name)}]", f"url = {_toml(str(reg['url']))}"]
            headers = reg.get("headers") or {}
            if headers:
                pairs = ", ".join(f"{_toml(str(k))} = {_toml(str(v))}" for k, v in headers.items())
                lines.append(f"http_headers = {{ {pairs} }}")
        home = self.codex_home()
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = home / "config.toml"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")

    def cli_env(self, cfg: CliAgentConfig, base_url: str, api_key: str | None) -> dict[str, str]:
        env = {"CODEX_HOME": str(self.codex_home())}
        if api_key:
            env[KEY_VARIABLE] = api_key
        return env

    def on_event(self, event: dict[str, Any], turn: CliTurn, log: TrajectoryLog) -> None:
        kind = event.get("type")
        if kind == "thread.started":
            turn.session_id = str(event.get("thread_id") or "") or None
            log.append({"type": "cli_init", "cli": self.name, "session_id": turn.session_id})
        elif kind in ("item.started", "item.completed"):
            item = event.get("item")
            if isinstance(item, dict):
                self._on_item(item, kind == "item.completed", turn, log)
        elif kind == "turn.completed":
            usage = event.get("usage") or {}
            inputs = int(usage.get("input_tokens") or 0)  # cached input is a part of it (OpenAI's counting)
            outputs = int(usage.get("output_tokens") or 0)
            turn.usage = {"input_tokens": inputs, "output_tokens": outputs, "total_tokens": inputs + outputs,
                          "cached_input_tokens": usage.get("cached_input_tokens"),
                          "reasoning_output_tokens": usage.get("reasoning_output_tokens")}
            log.append({"type": "final", "text": turn.final_text, "is_error": turn.final_text is None,
                        "usage": turn.usage})
        elif kind in ("turn.failed", "error"):
            error = event.get("error") if kind == "turn.failed" else event
            message = str((error or {}).get("message") or "no message") if isinstance(error, dict) else str(error)
            log.append({"type": "cli_error", "event": kind, "message": message})
            turn.is_error = True
            turn.error_text = f"codex failed: {message}"

    def _on_item(self, item: dict[str, Any], done: bool, turn: CliTurn, log: TrajectoryLog) -> None:
        kind = item.get("type")
        item_id = str(item.get("id"))
        if kind == "agent_message" and done:
            text = str(item.get("text") or "")
            turn.final_text = text  # the turn's answer is its last message
            log.append({"type": "assistant_text", "text": text})
        elif kind == "reasoning" and done:
            log.append({"type": "reasoning", "text": item.get("text")})
        elif kind == "error":  # a warning of the CLI's (e.g. unknown model metadata); the turn goes on
            log.append({"type": "cli_warning", "message": item.get("message")})
        elif kind in ("command_execution", "mcp_tool_call"):
            use = _tool_use(item)
            if not done:
                turn.pending_tools[item_id] = use
                log.append({"type": "tool_use", **use})  # live: the call before its result
                return
            turn.pending_tools.pop(item_id, None)
            turn.tool_calls += 1
            log.append({"type": "tool_call", **use, **_tool_result(item)})
        elif done and kind in ("file_change", "web_search", "todo_list"):
            log.append({"type": kind, **{k: v for k, v in item.items() if k not in ("type", "id")}})


def _tool_use(item: dict[str, Any]) -> dict[str, Any]:
    """The call as the trajectory shows it: a shell command, or an MCP tool as mcp__server__tool."""
    if item.get("type") == "command_execution":
        return {"id": item.get("id"), "name": "command_execution", "args": {"command": item.get("command")},
                "server": None, "tool": "command_execution"}
    server, tool = str(item.get("server") or ""), str(item.get("tool") or "")
    return {"id": item.get("id"), "name": f"mcp__{server}__{tool}", "args": item.get("arguments"),
            "server": server, "tool": tool}


def _tool_result(item: dict[str, Any]) -> dict[str, Any]:
    if item.get("type") == "command_execution":
        code = item.get("exit_code")
        return {"result": _cut(str(item.get("aggregated_output") or "")), "exit_code": code,
                "is_error": code != 0 or item.get("status") == "failed"}
    error = item.get("error")
    if error:
        message = error.get("message") if isinstance(error, dict) else error
        return {"result": _cut(str(message)), "is_error": True}
    result = item.get("result") or {}
    content = result.get("content") if isinstance(result, dict) else result
    if isinstance(content, list):
        text = "\n".join(str(c.get("text", "")) if isinstance(c, dict) else str(c) for c in content)
    else:
        text = json.dumps(content, default=str) if content is not None else ""
    return {"result": _cut(text), "is_error": item.get("status") == "failed"}


def _responses_base(base_url: str) -> str:
    """Codex posts to {base_url}/responses: an OpenAI-style .../v1 is kept, a server root gets /v1."""
    root = base_url.rstrip("/")
    return root if root.endswith("/v1") else root + "/v1"


def _cut(text: str) -> str:
    return text if len(text) <= MAX_RESULT_CHARS else text[:MAX_RESULT_CHARS] + "\n[... cut]"


def _toml(value: str) -> str:
    """A TOML basic string: JSON's string escapes (\\", \\\\, \\n, \\uXXXX) are TOML's too."""
    return json.dumps(value, ensure_ascii=True)
