"""The built-in ``tool-loop`` agent: a model that calls the registered MCP servers' tools in a loop.

Each turn it lists the tools of every MCP server registered through mcp-config/v1 (a tool name that two
servers offer becomes ``<server>__<tool>`` on both), sends the system prompt and the context's conversation
so far to the model, runs the tool calls the model makes against the server that owns each tool, and
repeats until the model answers without calling a tool (or ``max_steps`` model calls have been made).

Config (agent-config/v1), besides AgentConfig's ``model``, ``system_prompt``, ``output_format``, ...:

    base_url      the model endpoint (OpenAI-compatible ``.../v1`` root, or the Anthropic server root);
                  unset: ``$LITELLM_BASE_URL`` (with ``$LITELLM_API_KEY``), as the reference hands agents
    api           "openai" (Chat Completions, default) | "anthropic" (Messages)
    api_key       write-only: reads back masked, never logged, never in the trajectory or an error
    model_headers the endpoint's [model.headers], sent with each model request; write-only like api_key
                  (for the env's endpoint, $LITELLM_EXTRA_HEADERS too)
    max_steps     model calls per turn (default 20); past it the turn fails with tool_loop.max_steps
    temperature   sampling temperature (unset: the endpoint's default)
    max_tokens    per model call (unset: the provider's default)
    max_retries   retries of a failed model request (429/5xx/connection; default 3)
    request_timeout_s  each model request (default 120)
    max_turns     the reference's name (prompt_agent sends it): overrides max_steps
    model_params  the reference's model parameters (prompt_agent sends them): temperature, max_tokens

With ``output_format`` (a JSON schema) every model call asks for it (``response_format``); the final answer
is parsed and validated, and travels as the structured output. The trajectory (format
``agentenv-tool-loop/1``) records every model call (model, stop reason, usage, latency, the tool calls it
asked for) and every tool call (server, tool, args, result text, is_error, duration_ms).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections import OrderedDict
from typing import Any, Literal, cast

from pydantic import Field, field_validator

from agentenv_local.errors import describe

from .base import Agent
from .model_config import ModelEndpointConfig, request_headers
from .types import ErrorType, TaskRequest, TaskResult, Usage

TRAJECTORY_FORMAT = "agentenv-tool-loop/1"
MODEL_PARAMS = ("temperature", "max_tokens")  # the model_params a provider call takes
MAX_CONTEXTS = 1024
MAX_TOOL_RESULT_CHARS = 100_000
_TOOL_NAME_BAD = re.compile(r"[^A-Za-z0-9_-]")


class ToolLoopConfig(ModelEndpointConfig):  # base_url, the write-only api_key, max_retries, request_timeout_s
    api: Literal["openai", "anthropic"] = "openai"
    max_steps: int = Field(default=20, ge=1, le=1000)
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1)
    max_turns: int | None = Field(default=None, ge=1, le=1000)
    model_params: dict[str, Any] | None = None

    @field_validator("model_params")
    @classmethod
    def _known_params(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        unknown = sorted(set(value or {}) - set(MODEL_PARAMS))
        if unknown:
            raise ValueError(f"model_params: this agent takes {', '.join(MODEL_PARAMS)}, not {', '.join(unknown)}")
        temperature, max_tokens = (value or {}).get("temperature"), (value or {}).get("max_tokens")
        if temperature is not None and (isinstance(temperature, bool) or not isinstance(temperature, (int, float))
                                        or not 0 <= temperature <= 2):
            raise ValueError(f"model_params.temperature: a number from 0 to 2, not {temperature!r}")
        if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)
                                       or max_tokens < 1):
            raise ValueError(f"model_params.max_tokens: a positive integer, not {max_tokens!r}")
        return value

    @property
    def steps_per_turn(self) -> int:
        return self.max_turns or self.max_steps

    def call_params(self) -> dict[str, Any]:
        """temperature and max_tokens for each model call: model_params' win over the plain fields."""
        return {"temperature": self.temperature, "max_tokens": self.max_tokens, **(self.model_params or {})}


# --- MCP tools ---------------------------------------------------------------------------------------------

class _ToolIndex:
    """The registered servers' tools under the names the model sees; MCP clients open for one turn."""

    def __init__(self, servers: dict[str, dict[str, Any]], stack: contextlib.AsyncExitStack):
        self.servers = servers
        self.stack = stack
        self.clients: dict[str, Any] = {}
        self.routes: dict[str, tuple[str, str]] = {}  # exposed name -> (server, tool)
        self.specs: list[Any] = []

    async def client(self, server: str) -> Any:
        if server not in self.clients:
            import httpx2
            from mcp import Client
            from mcp.client.streamable_http import streamable_http_client

            from agentenv_local.http_clients import async_client

            reg = self.servers[server]
            # a gateway in this hub is called in-process (inproc.py), any other over the network
            http = async_client(headers=reg.get("headers") or {}, timeout=httpx2.Timeout(120.0))
            self.stack.push_async_callback(http.aclose)
            self.clients[server] = await self.stack.enter_async_context(
                Client(streamable_http_client(reg["url"], http_client=http), mode="auto"))
        return self.clients[server]

    async def load(self) -> None:
        from agentenv_local.models import ToolSpec

        listed: dict[str, list[Any]] = {}
        for server in self.servers:
            client = await self.client(server)
            tools: list[Any] = []
            cursor = None
            while True:
                page = await client.list_tools(cursor=cursor)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
            listed[server] = tools
        counts: dict[str, int] = {}
        for tools in listed.values():
            for t in tools:
                counts[t.name] = counts.get(t.name, 0) + 1
        taken: set[str] = set()
        for server, tools in listed.items():
            for t in tools:
                wanted = f"{server}__{t.name}" if counts[t.name] > 1 else t.name
                name = _unique(_TOOL_NAME_BAD.sub("_", wanted)[:64] or "tool", taken)
                taken.add(name)
                self.routes[name] = (server, t.name)
                schema = dict(t.input_schema or {}) or {"type": "object", "properties": {}}
                schema.setdefault("type", "object")
                self.specs.append(ToolSpec(name=name, description=t.description or t.title or "",
                                           input_schema=schema))


def _unique(name: str, taken: set[str]) -> str:
    if name not in taken:
        return name
    n = 2
    while f"{name[:60]}_{n}" in taken:
        n += 1
    return f"{name[:60]}_{n}"


def _result_text(result: Any) -> tuple[str, bool]:
    parts: list[str] = []
    for c in result.content:
        kind = getattr(c, "type", None)
        if kind == "text":
            parts.append(c.text)
        elif kind == "resource":
            res = getattr(c, "resource", None)
            parts.append(getattr(res, "text", None) or f"[resource {getattr(res, 'uri', '')}]")
        else:
            parts.append(f"[{kind or 'non-text'} content omitted]")
    text = "\n".join(parts)
    if not text and result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False, default=str)
    return text, bool(result.is_error)


def _clip(text: str, limit: int = MAX_TOOL_RESULT_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters cut]"


class _Fail(Exception):
    def __init__(self, code: str, message: str, error_type: ErrorType = "agent_error"):
        super().__init__(message)
        self.code, self.message, self.error_type = code, message, error_type


# --- the agent ---------------------------------------------------------------------------------------------

class ToolLoopAgent(Agent):
    name = "tool-loop"
    description = "A model in a tool loop: calls the registered MCP servers' tools until it can answer."
    config_model = ToolLoopConfig

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        self._history: OrderedDict[str, list[Any]] = OrderedDict()

    def _endpoint(self, cfg: ToolLoopConfig) -> tuple[str, str | None]:
        if cfg.base_url:
            return cfg.base_url, cfg.api_key.get_secret_value() if cfg.api_key else None
        env_url = os.environ.get("LITELLM_BASE_URL")
        if env_url:  # the env's key only ever goes to the env's endpoint
            return env_url, (cfg.api_key.get_secret_value() if cfg.api_key else None) or \
                os.environ.get("LITELLM_API_KEY") or None
        raise _Fail("tool_loop.not_configured",
                    "no model endpoint: set the config field base_url (agent-config/v1), or $LITELLM_BASE_URL")

    async def run(self, request: TaskRequest) -> TaskResult:
        from agentenv_local.config.masking import mask_known_secrets

        cfg = cast(ToolLoopConfig, request.config)  # the server validated it with our config_model
        log = request.trajectory
        log.set_format(TRAJECTORY_FORMAT)
        history = list(self._history.get(request.context_id, []))
        log.append({"type": "turn", "input": request.text, "data": request.data,
                    "history_messages": len(history)})
        key: str | None = None
        header_values = [value.get_secret_value() for value in cfg.model_headers.values()]
        try:
            base_url, key = self._endpoint(cfg)
            result, turn_messages = await self._turn(request, cfg, base_url, key, history)
        except _Fail as f:
            message = mask_known_secrets(f.message, ([key] if key else []) + header_values)
            log.append({"type": "fail", "code": f.code, "message": message, "error_type": f.error_type})
            return TaskResult.failure(f.code, message, error_type=f.error_type)
        self._history[request.context_id] = history + turn_messages
        self._history.move_to_end(request.context_id)
        while len(self._history) > MAX_CONTEXTS:
            self._history.popitem(last=False)
        return result

    async def _turn(self, request: TaskRequest, cfg: ToolLoopConfig, base_url: str, key: str | None,
                    history: list[Any]) -> tuple[TaskResult, list[Any]]:
        from agentenv_local.models import Message, make_provider

        if not cfg.model:
            raise _Fail("tool_loop.not_configured", "no model: set the config field model (agent-config/v1)")
        try:
            provider = make_provider(cfg.api, base_url, api_key=key, headers=request_headers(cfg),
                                     timeout_s=cfg.request_timeout_s, max_retries=cfg.max_retries)
        except Exception as exc:  # a config problem (bad URL): say so, masked
            raise _Fail("tool_loop.not_configured", getattr(exc, "message", str(exc))) from None
        user_text = request.text
        if request.data:
            user_text = (user_text + "\n\n" if user_text else "") + json.dumps(request.data, ensure_ascii=False,
                                                                               default=str)
        turn: list[Any] = [Message.user(user_text)]
        failure: _Fail | None = None
        outcome: TaskResult | None = None
        # the MCP clients close before anything is raised (raising inside them wraps it in an ExceptionGroup)
        async with contextlib.AsyncExitStack() as stack:
            tools = _ToolIndex(request.mcp_servers, stack)
            try:
                outcome = await self._loop(request, cfg, provider, tools, history, turn)
            except _Fail as f:
                failure = f
        if failure is not None:
            raise failure
        assert outcome is not None
        return outcome, turn

    async def _loop(self, request: TaskRequest, cfg: ToolLoopConfig, provider: Any, tools: _ToolIndex,
                    history: list[Any], turn: list[Any]) -> TaskResult:
        from agentenv_local.models import Message, ModelError

        log = request.trajectory
        schema = cfg.output_format or None
        usage = {"input": 0, "output": 0, "total": 0, "calls": 0}
        tool_calls = 0
        repaired = False
        try:
            await tools.load()
        except Exception as exc:  # an env that cannot be listed is an infra problem
            raise _Fail("tool_loop.mcp_unavailable", f"could not list the tools of the registered MCP "
                                                     f"servers: {describe(exc)}",
                        "infra_error") from None
        log.append({"type": "tools", "tools": [{"name": n, "server": s, "tool": t}
                                               for n, (s, t) in tools.routes.items()]})
        system = [Message.system(cfg.system_prompt)] if cfg.system_prompt else []
        for step in range(cfg.steps_per_turn):
            try:
                reply = await provider.complete(system + history + turn, tools=tools.specs or None,
                                                model=cfg.model, response_format=schema, **cfg.call_params())
            except ModelError as exc:
                log.append({"type": "model_call", "step": step, "model": cfg.model, "api": cfg.api,
                            "error": exc.message, "error_kind": exc.kind, "status": exc.status,
                            "attempts": exc.attempts})
                if exc.kind == "tool_arguments":
                    raise _Fail("tool_loop.bad_tool_arguments", exc.message) from None
                raise _Fail("tool_loop.model_error", exc.message, "infra_error") from None
            usage["input"] += reply.usage.input_tokens
            usage["output"] += reply.usage.output_tokens
            usage["total"] += reply.usage.total
            usage["calls"] += 1
            log.append({"type": "model_call", "step": step, "model": reply.model, "api": cfg.api,
                        "stop_reason": reply.stop_reason,
                        "usage": {"input_tokens": reply.usage.input_tokens,
                                  "output_tokens": reply.usage.output_tokens, "total": reply.usage.total},
                        "latency_s": round(reply.latency_s, 4), "text": reply.text,
                        "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments}
                                       for c in reply.tool_calls]})
            turn.append(reply.message)
            if reply.tool_calls:
                for call in reply.tool_calls:
                    tool_calls += 1
                    turn.append(await self._call(tools, call, log))
                continue
            text = reply.text
            builder = TaskResult.builder().succeeded()
            if schema:
                value, problem = _structured(text, schema)
                if problem is not None:
                    if not repaired and step + 1 < cfg.steps_per_turn:
                        repaired = True
                        log.append({"type": "output_format_retry", "problem": problem})
                        turn.append(Message.user(f"Your answer does not follow the required JSON schema: "
                                                 f"{problem}. Answer again with JSON that does."))
                        continue
                    raise _Fail("tool_loop.output_format", f"the model's answer does not follow "
                                                           f"output_format: {problem}")
                builder.add_text(text).add_structured_output(value)
                log.append({"type": "final", "text": text, "structured_output": value})
            else:
                builder.add_text(text)
                log.append({"type": "final", "text": text})
            builder.usage(Usage(tool_call_count=tool_calls, input_tokens=usage["input"],
                                output_tokens=usage["output"], total_tokens=usage["total"],
                                provider_details={"model_calls": usage["calls"], "model": cfg.model,
                                                  "api": cfg.api}))
            return builder.build()
        raise _Fail("tool_loop.max_steps", f"the model was still calling tools after max_steps={cfg.steps_per_turn} "
                                           f"model calls ({tool_calls} tool calls); raise max_steps or simplify "
                                           "the task")

    async def _call(self, tools: _ToolIndex, call: Any, log: Any) -> Any:
        from agentenv_local.models import Message

        route = tools.routes.get(call.name)
        started = time.perf_counter()
        if route is None:
            server, tool = None, call.name
            known = ", ".join(sorted(tools.routes)) or "none"
            text, is_error = f"unknown tool {call.name!r}; the tools are: {known}", True
        else:
            server, tool = route
            try:
                result = await (await tools.client(server)).call_tool(tool, call.arguments)
                text, is_error = _result_text(result)
            except Exception as exc:  # an MCP-level failure is the call's (error) result
                text, is_error = describe(exc), True
        duration_ms = round((time.perf_counter() - started) * 1000, 3)
        text = _clip(text)
        log.append({"type": "tool_call", "id": call.id, "name": call.name, "server": server, "tool": tool,
                    "args": call.arguments, "result": text, "is_error": is_error, "duration_ms": duration_ms})
        return Message.tool_result(call.id, text, is_error=is_error, name=call.name)


def _structured(text: str, schema: dict[str, Any]) -> tuple[Any, str | None]:
    """(value, None) when ``text`` is JSON following ``schema``; else (None, what is wrong)."""
    raw = text.strip()
    fence = re.match(r"^```(?:json)?\s*(.*?)\s*```$", raw, re.DOTALL)
    if fence:
        raw = fence.group(1)
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return None, f"not JSON ({exc.msg} at position {exc.pos})"
    try:
        import jsonschema
    except ImportError:  # pragma: no cover - jsonschema comes with mcp
        return value, None
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as exc:
        where = ".".join(str(p) for p in exc.absolute_path) or "(root)"
        return None, f"at {where}: {exc.message}"
    except jsonschema.SchemaError as exc:
        return None, f"output_format is not a valid JSON schema: {exc.message}"
    return value, None
