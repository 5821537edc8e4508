"""The ``openhands`` agent: each A2A turn runs the OpenHands CLI headless (``openhands --headless --json``) and
its JSON events become the turn's trajectory as they arrive.

The model endpoint is the run's ``[model]`` (deploy_agent sends base_url, api_key, model over agent-config/v1),
handed to OpenHands' LiteLLM through ``LLM_MODEL``/``LLM_BASE_URL``/``LLM_API_KEY`` with ``--override-with-envs``:
``openai/<model>`` (Chat Completions at ``.../v1``) or, with ``api = "anthropic"``, ``anthropic/<model>``. The MCP
servers registered over mcp-config/v1 are written to the private HOME's ``~/.openhands/mcp.json`` each turn. The
agent lists their tools first (over MCP, with the registration's headers): OpenHands cannot build a tool with an
argument named ``kind`` (its own discriminator field; pydantic refuses the override and the whole turn fails), so
such an argument is offered renamed (``kind_``) by a fastmcp tool transform in mcp.json, which hands it back to the
server as ``kind``; the listed names also route each MCP call of the trajectory to its server. The
agent names the conversation itself (a fresh UUID given to ``--resume``, which OpenHands starts when it does not
exist yet), so a context continues with the same ``--resume ID`` without reading the CLI's closing text. OpenHands
streams no usage: the turn's tokens are the growth of the conversation's ``base_state.json`` totals.

Its terminal tool runs commands in panes of a tmux server that leaves the CLI's process tree (a daemon), so each
turn gets a tmux socket folder of its own (``TMUX_TMPDIR``) and that server, with everything under it, is stopped
when the turn ends, fails or is cancelled.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..types import TaskRequest, TrajectoryLog
from .harness import CliAgent, CliAgentConfig, CliTurn

MAX_RESULT_CHARS = 100_000
SKILLS_REPO = "https://github.com/OpenHands/extensions"
NO_SKILLS_REPO = "/nonexistent/openhands-extensions"
TMUX_SOCKET = "openhands"  # the socket name OpenHands' terminal tool gives tmux (-L)
# argument names OpenHands' tool models cannot hold (its discriminator): offered as NAME + "_"
RESERVED_ARGUMENTS = frozenset({"kind"})
# an argument OpenHands adds to every tool call and keeps to itself (the MCP server never gets it)
OWN_ARGUMENTS = frozenset({"security_risk"})
_TURN_TMUX_DIR: contextvars.ContextVar[Path | None] = contextvars.ContextVar("openhands_tmux_dir", default=None)
# this turn's MCP tools: server -> {tool name: its argument names}
_TURN_TOOLS: contextvars.ContextVar[dict[str, dict[str, list[str]]]] = contextvars.ContextVar(
    "openhands_turn_tools", default={})


class OpenHandsAgent(CliAgent):
    name = "openhands"
    description = ("OpenHands CLI (openhands --headless --json) as an A2A agent: runs headless in a workspace with "
                   "the env's MCP tools.")
    cli_cache_name = "openhands-venv"
    cli_binary = "openhands"
    install_hint = "run scripts/setup-agent-clis.sh, or `uv tool install openhands`, or set config command"
    trajectory_format = "agentenv-openhands/1"
    skills_folder = ".openhands/skills"  # where the CLI reads skills (NAME/SKILL.md) in its HOME

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        self._turn_sessions: dict[str, str] = {}  # task id -> the conversation its argv named

    def find_cli(self, cfg: CliAgentConfig) -> str:
        """OpenHands lives in a Python venv of the setup cache (bin/openhands), not an npm prefix."""
        from . import harness  # read at call time: tests point the cache elsewhere

        cached = harness.CLI_CACHE / self.cli_cache_name / "bin" / self.cli_binary
        if cached.is_file() and os.access(cached, os.X_OK):
            return str(cached)
        return super().find_cli(cfg)

    def argv(self, executable: str, request: TaskRequest, cfg: CliAgentConfig, session_id: str | None) -> list[str]:
        self.model_name(cfg)  # no model name: one clear error before anything is written
        prompt = self.prompt_text(request)
        if cfg.system_prompt and not session_id:  # OpenHands has no system-prompt flag: the first message says it
            prompt = f"{cfg.system_prompt}\n\n{prompt}"
        conversation = session_id or str(uuid.uuid4())  # OpenHands starts a conversation of an unknown id
        self._turn_sessions[request.task_id] = conversation
        self._write_mcp_config(request)
        return [executable, "--headless", "--json", "--override-with-envs", "--resume", conversation, "-t", prompt]

    def _write_mcp_config(self, request: TaskRequest) -> None:
        """This turn's servers, in a file only this user reads (a bound token in a header stays off argv); none
        written is an empty list, so no server of an earlier turn lingers."""
        listed = _TURN_TOOLS.get()
        servers = {name: {"url": reg["url"], "transport": "http", "enabled": True,
                          **({"headers": reg["headers"]} if reg.get("headers") else {}),
                          **_renames(listed.get(name, {}))}
                   for name, reg in request.mcp_servers.items()}
        folder = self.private_home() / ".openhands"
        folder.mkdir(mode=0o700, exist_ok=True)
        path = folder / "mcp.json"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"mcpServers": servers}, f)

    def cli_env(self, cfg: CliAgentConfig, base_url: str, api_key: str | None) -> dict[str, str]:
        root = base_url.rstrip("/")
        if cfg.api == "anthropic":  # LiteLLM's anthropic provider adds /v1/messages itself
            model, url = f"anthropic/{cfg.model}", root[: -len("/v1")] if root.endswith("/v1") else root
        else:  # Chat Completions: a bare server root gets the usual /v1
            model, url = f"openai/{cfg.model}", root + "/v1" if urlsplit(root).path in ("", "/") else root
        env = {"LLM_MODEL": model, "LLM_BASE_URL": url, "OPENHANDS_SUPPRESS_BANNER": "1",
               "TMUX_TMPDIR": str(_TURN_TMUX_DIR.get() or self.private_home()),
               "PYTHONUNBUFFERED": "1",  # each event reaches the pipe as it happens, not when a buffer fills
               # every run clones OpenHands' public skills from GitHub: pointed at a missing local path, it fails
               # at once without network traffic (the URL rewrite touches no other repository)
               "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": f"url.{NO_SKILLS_REPO}.insteadOf",
               "GIT_CONFIG_VALUE_0": SKILLS_REPO,
               # LiteLLM's price list from the package, not fetched from GitHub
               "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        env["LLM_API_KEY"] = api_key or "none"  # --override-with-envs wants a key even for an open endpoint
        return env

    async def _run_cli(self, executable: str, request: TaskRequest, cfg: CliAgentConfig, session_id: str | None,
                       base_url: str, key: str | None) -> CliTurn:
        before = self._token_totals(session_id) if session_id else {}
        tmux_dir = self.private_home() / "tmux" / uuid.uuid4().hex[:12]  # short: a socket path has a size limit
        tmux_dir.mkdir(mode=0o700, parents=True)
        _TURN_TMUX_DIR.set(tmux_dir)  # this task's own value: concurrent turns get their own servers
        _TURN_TOOLS.set(await self._list_tools(request))
        try:
            turn = await super()._run_cli(executable, request, cfg, session_id, base_url, key)
        finally:
            await asyncio.to_thread(stop_tmux, tmux_dir)
        conversation = self._turn_sessions.pop(request.task_id, None)
        if conversation and self._state_file(conversation).is_file():  # the CLI made (or went on with) it
            turn.session_id = conversation
            after = self._token_totals(conversation)
            inputs = after.get("prompt_tokens", 0) - before.get("prompt_tokens", 0)
            outputs = after.get("completion_tokens", 0) - before.get("completion_tokens", 0)
            turn.usage = {"input_tokens": inputs, "output_tokens": outputs, "total_tokens": inputs + outputs,
                          "cost_usd": after.get("cost", 0.0) - before.get("cost", 0.0)}
        if turn.final_text is not None and not turn.is_error:
            request.trajectory.append({"type": "final", "text": turn.final_text, "is_error": False,
                                       "usage": turn.usage})
        return turn

    async def _list_tools(self, request: TaskRequest) -> dict[str, dict[str, list[str]]]:
        """Each registered server's tools and their argument names; a server that cannot be listed is left out
        (the CLI then meets it unchanged and says what fails)."""
        listed: dict[str, dict[str, list[str]]] = {}
        for name, reg in (request.mcp_servers or {}).items():
            try:
                listed[name] = await list_tool_arguments(reg["url"], reg.get("headers") or {})
            except Exception as exc:  # noqa: BLE001 - any failure of the listing only loses the renames
                request.trajectory.append({"type": "mcp_list_failed", "server": name, "error": str(exc)[:500]})
        return listed

    def _mcp_route(self, name: str) -> tuple[str | None, str]:
        """(server, tool) of a tool name as OpenHands offers it: unprefixed with one server, `<server>_<tool>`
        with more (fastmcp's composite client); (None, name) for OpenHands' own tools."""
        listed = _TURN_TOOLS.get()
        for server, tools in listed.items():
            if (len(listed) == 1 and name in tools) or (name.startswith(server + "_") and
                                                        name[len(server) + 1:] in tools):
                return server, name if len(listed) == 1 else name[len(server) + 1:]
        return None, name

    def _state_file(self, conversation: str) -> Path:
        return self.private_home() / ".openhands" / "conversations" / uuid.UUID(conversation).hex / "base_state.json"

    def _token_totals(self, conversation: str) -> dict[str, float]:
        """The conversation's token and cost totals so far (OpenHands keeps them in its state file)."""
        try:
            state = json.loads(self._state_file(conversation).read_text(encoding="utf-8"))
            metrics = state["stats"]["usage_to_metrics"]["agent"]
            usage = metrics["accumulated_token_usage"]
            return {"prompt_tokens": float(usage.get("prompt_tokens") or 0),
                    "completion_tokens": float(usage.get("completion_tokens") or 0),
                    "cost": float(metrics.get("accumulated_cost") or 0.0)}
        except (OSError, ValueError, KeyError, TypeError):
            return {}

    def on_event(self, event: dict[str, Any], turn: CliTurn, log: TrajectoryLog) -> None:
        kind = event.get("kind")
        if kind == "ActionEvent":
            call = event.get("tool_call") or {}
            use: dict[str, Any] = {"id": event.get("tool_call_id"), "name": event.get("tool_name"),
                                   "args": _arguments(call.get("arguments"))}
            turn.pending_tools[str(event.get("tool_call_id"))] = use
            if event.get("thought"):
                log.append({"type": "assistant_text", "text": _text(event.get("thought"))})
            log.append({"type": "tool_use", **use})  # live: the call before its result
        elif kind in ("ObservationEvent", "AgentErrorEvent", "UserRejectObservation"):
            observation = event.get("observation") or {}
            call = turn.pending_tools.pop(str(event.get("tool_call_id")), None) or \
                {"id": event.get("tool_call_id"), "name": event.get("tool_name"), "args": None}
            turn.tool_calls += 1
            result = _text(observation.get("content")) if observation else str(event.get("error") or
                                                                               event.get("rejection_reason") or "")
            server, tool = self._mcp_route(str(call.get("name") or ""))
            if server is not None and isinstance(call.get("args"), dict):  # the arguments the server got
                call = {**call, "args": _server_arguments(call["args"])}
            log.append({"type": "tool_call", **call, "server": server, "tool": tool, "result": result,
                        "is_error": kind != "ObservationEvent" or bool(observation.get("is_error"))})
        elif kind == "MessageEvent" and event.get("source") == "agent":
            text = _text((event.get("llm_message") or {}).get("content"))
            log.append({"type": "assistant_text", "text": text})
            turn.final_text = text  # the agent's last message is the turn's answer
        elif kind == "ConversationErrorEvent" or (isinstance(kind, str) and kind.endswith("ErrorEvent")):
            detail = str(event.get("detail") or event.get("error") or "no detail")
            log.append({"type": "cli_error", "code": event.get("code"), "detail": detail})
            turn.is_error = True
            turn.error_text = f"openhands ended with {event.get('code') or kind}: {detail}"


async def list_tool_arguments(url: str, headers: dict[str, str]) -> dict[str, list[str]]:
    """The tools of the MCP server at `url` (streamable HTTP) and each one's argument names."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from agentenv_local.http_clients import async_client

    tools: dict[str, list[str]] = {}
    async with async_client(headers=headers, timeout=httpx2.Timeout(60.0)) as http, \
            Client(streamable_http_client(url, http_client=http), mode="auto") as client:
        cursor = None
        while True:
            page = await client.list_tools(cursor=cursor)
            for tool in page.tools:
                tools[tool.name] = list(((tool.input_schema or {}).get("properties") or {}))
            cursor = page.next_cursor
            if not cursor:
                return tools


def _renames(tools: dict[str, list[str]]) -> dict[str, Any]:
    """fastmcp's tool transforms (mcp.json `tools`) offering each reserved argument as NAME + "_"."""
    transforms = {tool: {"arguments": {arg: {"name": arg + "_"} for arg in args if arg in RESERVED_ARGUMENTS}}
                  for tool, args in tools.items() if RESERVED_ARGUMENTS.intersection(args)}
    return {"tools": transforms} if transforms else {}


def _server_arguments(args: dict[str, Any]) -> dict[str, Any]:
    """An MCP call's arguments as its server got them: OpenHands' own dropped, renamed ones named back."""
    back = {name + "_": name for name in RESERVED_ARGUMENTS}
    return {back.get(key, key): value for key, value in args.items() if key not in OWN_ARGUMENTS}


def stop_tmux(tmux_dir: Path) -> None:
    """Stop the turn's tmux server and every shell and command under it, then drop its socket folder."""
    from .harness import stop_cli

    tmux = shutil.which("tmux")
    if tmux and any(tmux_dir.iterdir()):
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TMUX_TMPDIR": str(tmux_dir)}
        shown = subprocess.run([tmux, "-L", TMUX_SOCKET, "display-message", "-p", "#{pid}"], env=env,
                               capture_output=True, text=True, timeout=10, check=False, stdin=subprocess.DEVNULL)
        if shown.returncode == 0 and shown.stdout.strip().isdigit():
            stop_cli(int(shown.stdout.strip()))  # the server's group, then the pane sessions it started
    shutil.rmtree(tmux_dir, ignore_errors=True)


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _text(content: Any) -> str:
    if isinstance(content, list):
        content = "\n".join(str(c.get("text", "")) if isinstance(c, dict) else str(c) for c in content)
    text = "" if content is None else str(content)
    return text if len(text) <= MAX_RESULT_CHARS else text[:MAX_RESULT_CHARS] + "\n[... cut]"
