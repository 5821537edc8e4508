"""A local model server that speaks both wire formats, for tests and offline examples.

    from agentenv_local.testing.fake_models import FakeModelServer, Reply

    with FakeModelServer(api_key="test-key", script=[Reply.tool_call("search", {"q": "x"}),
                                                      Reply.text("found it")]) as srv:
        provider = OpenAIChatProvider(srv.base_url, api_key="test-key")     # or AnthropicMessagesProvider
        ...
        srv.requests        # every request, in order: api, path, headers, body, status, problems

It is a real HTTP server (uvicorn in a background thread, listening on 127.0.0.1, any free port)
serving `POST /v1/chat/completions` (OpenAI Chat Completions) and `POST /v1/messages` (Anthropic
Messages). Each request is checked strictly, the way the real APIs check it: required fields,
message and content-block shapes, that tool results answer the tool calls of the assistant turn
right before them, tool schemas, sampling ranges, and the auth header (`Authorization: Bearer KEY`
or `x-api-key: KEY` plus `anthropic-version`). A bad request gets the API's own error shape (400 or
401) and does not consume the script.

A good request is answered by the next item of `script` (a `Reply`, or a callable taking the
`RecordedRequest` and returning one); when the script is used up, by `responder` (default:
`RuleResponder()`: call the first offered tool until a tool result comes back, then answer text).
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Self

from agentenv_local.env.serve import bind_socket

Api = Literal["openai", "anthropic"]

_OPENAI_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}\Z")
_ANTHROPIC_NAME = re.compile(r"^[A-Za-z0-9_-]{1,128}\Z")
ANTHROPIC_VERSIONS = ("2023-06-01", "2023-01-01")


# --- replies ---------------------------------------------------------------------------------------


@dataclass
class Reply:
    """One scripted answer. Build it with the class methods.

    `tool_calls`: (name, arguments) pairs; arguments given as a str are sent verbatim (use that
    for malformed JSON). `status` other than 200 answers an error in the API's shape with
    `error_message` (and `Retry-After` if `retry_after` is set). `delay_s` waits before answering
    (to trigger client timeouts). `json` is a structured answer (text JSON, or on the Anthropic API
    the input of the forced tool). `raw` is sent as the body exactly (to break the protocol).
    """

    text: str | None = None
    tool_calls: list[tuple[str, Any]] = field(default_factory=list)
    stop: Literal["end", "length"] = "end"
    status: int = 200
    error_message: str = ""
    error_type: str | None = None
    retry_after: float | str | None = None
    delay_s: float = 0.0
    usage: tuple[int, int] | None = None
    json: Any = None
    raw: Any = None
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def tool_call(cls, name: str, arguments: Mapping[str, Any] | str | None = None, *, text: str | None = None,
                  **kw: Any) -> Reply:
        args = dict(arguments) if isinstance(arguments, Mapping) else ({} if arguments is None else arguments)
        return cls(text=text, tool_calls=[(name, args)], **kw)

    @classmethod
    def calls(cls, calls: Iterable[tuple[str, Any]], *, text: str | None = None, **kw: Any) -> Reply:
        """Several tool calls in one turn: `Reply.calls([("a", {...}), ("b", {...})])`."""
        return cls(text=text, tool_calls=list(calls), **kw)

    @classmethod
    def malformed_tool_call(cls, name: str, raw_arguments: str = '{"query": "unterminated', **kw: Any) -> Reply:
        return cls(tool_calls=[(name, raw_arguments)], **kw)

    @classmethod
    def error(cls, status: int, message: str = "internal error", *, retry_after: float | str | None = None,
              error_type: str | None = None, **kw: Any) -> Reply:
        return cls(status=status, error_message=message, retry_after=retry_after, error_type=error_type, **kw)

    @classmethod
    def delay(cls, seconds: float, then: Reply | None = None) -> Reply:
        base = then if then is not None else cls(text="(late)")
        base.delay_s = seconds
        return base

    @classmethod
    def structured(cls, value: Any, **kw: Any) -> Reply:
        return cls(json=value, **kw)

    @classmethod
    def raw_body(cls, body: Any, status: int = 200) -> Reply:
        return cls(raw=body, status=status)


# `Reply.text("hi")` reads best: on the class, `text` builds a text reply; on an instance it is the
# field (the dataclass __init__ sets it on every instance, so the two never meet).
def _text_reply(text: str, **kw: Any) -> Reply:
    return Reply(text=text, **kw)


Reply.text = staticmethod(_text_reply)  # type: ignore[assignment]  # the class attribute is a builder (above)


# --- recorded requests -----------------------------------------------------------------------------


@dataclass
class RecordedRequest:
    """One request the server received, whether it was valid or not."""

    api: Api | None
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    status: int = 0
    problems: list[str] = field(default_factory=list)
    at: float = field(default_factory=time.monotonic)

    # -- a view of the conversation that is the same for both APIs --------------------------------

    @property
    def valid(self) -> bool:
        return not self.problems and isinstance(self.body, dict)

    @property
    def model(self) -> str | None:
        return self.body.get("model") if isinstance(self.body, dict) else None

    @property
    def messages(self) -> list[dict]:
        return list(self.body.get("messages") or []) if isinstance(self.body, dict) else []

    @property
    def tools(self) -> list[dict]:
        """Offered tools as {name, description, input_schema} (both APIs)."""
        out = []
        for t in (self.body.get("tools") or []) if isinstance(self.body, dict) else []:
            if self.api == "openai":
                fn = t.get("function") or {}
                out.append({"name": fn.get("name"), "description": fn.get("description", ""),
                            "input_schema": fn.get("parameters") or {"type": "object", "properties": {}}})
            else:
                out.append({"name": t.get("name"), "description": t.get("description", ""),
                            "input_schema": t.get("input_schema")})
        return out

    @property
    def tool_names(self) -> list[str]:
        return [t["name"] for t in self.tools]

    @property
    def forced_tool(self) -> str | None:
        """The tool `tool_choice` forces, if any (Anthropic `{"type": "tool"}`, OpenAI function choice)."""
        choice = self.body.get("tool_choice") if isinstance(self.body, dict) else None
        if isinstance(choice, dict):
            if choice.get("type") == "tool":
                return choice.get("name")
            if choice.get("type") == "function":
                return (choice.get("function") or {}).get("name")
        return None

    @property
    def system(self) -> str:
        if not isinstance(self.body, dict):
            return ""
        if self.api == "anthropic":
            sys_ = self.body.get("system") or ""
            return sys_ if isinstance(sys_, str) else "".join(b.get("text", "") for b in sys_)
        return "\n\n".join(_text(m.get("content")) for m in self.messages if m.get("role") in ("system", "developer"))

    @property
    def last_user_text(self) -> str:
        for m in reversed(self.messages):
            if m.get("role") != "user":
                continue
            content = m.get("content")
            if isinstance(content, list):
                texts = [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]
                if texts:
                    return "".join(texts)
                continue
            return content or ""
        return ""

    @property
    def tool_results(self) -> list[dict]:
        """Every tool result in the conversation: {tool_call_id, content, is_error}."""
        out = []
        for m in self.messages:
            if self.api == "openai" and m.get("role") == "tool":
                out.append({"tool_call_id": m.get("tool_call_id"), "content": _text(m.get("content")),
                            "is_error": False})
            elif self.api == "anthropic" and isinstance(m.get("content"), list):
                for b in m["content"]:
                    if isinstance(b, dict) and b.get("type") == "tool_result":
                        out.append({"tool_call_id": b.get("tool_use_id"), "content": _text(b.get("content")),
                                    "is_error": bool(b.get("is_error"))})
        return out

    @property
    def answered_tools(self) -> bool:
        """Did a tool result come back since the last plain user text?"""
        for m in reversed(self.messages):
            role, content = m.get("role"), m.get("content")
            if role == "tool":
                return True
            if role == "user":
                return isinstance(content, list) and any(
                    isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
        return False

    @property
    def response_schema(self) -> dict | None:
        """The JSON schema the answer must follow: OpenAI `response_format`, or the Anthropic forced tool's."""
        if not isinstance(self.body, dict):
            return None
        if self.api == "openai":
            rf = self.body.get("response_format") or {}
            if rf.get("type") == "json_schema":
                return (rf.get("json_schema") or {}).get("schema")
            return {"type": "object"} if rf.get("type") == "json_object" else None
        name = self._output_tool()
        for t in self.tools:
            if t["name"] == name:
                return t["input_schema"]
        return None

    def _output_tool(self) -> str | None:
        choice = self.body.get("tool_choice") if isinstance(self.body, dict) else None
        if not isinstance(choice, dict):
            return None
        if choice.get("type") == "tool":
            return choice.get("name")
        if choice.get("type") == "any" and self.tools:
            return self.tools[-1]["name"]  # agentenv's providers put the output tool last
        return None


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return str(content)


# --- the default responder --------------------------------------------------------------------------


def example_from_schema(schema: Any) -> Any:
    """A small value that satisfies a (simple) JSON schema: const/enum/default first, then by type."""
    if not isinstance(schema, dict):
        return None
    for key in ("const", "default"):
        if key in schema:
            return schema[key]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return example_from_schema(schema[key][0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        props = schema.get("properties") or {}
        required = schema.get("required") or list(props)
        return {k: example_from_schema(props.get(k, {})) for k in required}
    if kind == "array":
        n = int(schema.get("minItems") or 0)
        return [example_from_schema(schema.get("items") or {}) for _ in range(n)]
    if kind == "string":
        return "x" * int(schema.get("minLength") or 0) if schema.get("minLength") else "example"
    if kind == "integer":
        return int(schema.get("minimum", 0))
    if kind == "number":
        return float(schema.get("minimum", 0))
    if kind == "boolean":
        return True
    return None


@dataclass
class RuleResponder:
    """The default answers: a forced tool is called; else, when tools are offered and no tool result
    came back since the last user text, the first tool (or `tool`) is called with `arguments[name]`
    (or an example built from its schema); else a structured answer when a schema was asked for;
    else `text`."""

    arguments: dict[str, dict[str, Any]] = field(default_factory=dict)
    text: str = "done"
    tool: str | None = None

    def __call__(self, request: RecordedRequest) -> Reply:
        tools = {t["name"]: t for t in request.tools}
        forced = request.forced_tool
        schema = request.response_schema
        if forced and forced in tools and not (schema is not None and request.api == "anthropic"
                                               and forced == request._output_tool()):
            return Reply.tool_call(forced, self._args(tools[forced]))
        output_tool = request._output_tool() if request.api == "anthropic" else None
        callable_tools = [n for n in tools if n != output_tool]
        if callable_tools and not request.answered_tools:
            name = self.tool if self.tool is not None and self.tool in callable_tools else callable_tools[0]
            return Reply.tool_call(name, self._args(tools[name]))
        if schema is not None:
            return Reply.structured(example_from_schema(schema))
        return Reply(text=self.text)

    def _args(self, tool: dict) -> dict:
        if tool["name"] in self.arguments:
            return dict(self.arguments[tool["name"]])
        return example_from_schema(tool.get("input_schema") or {}) or {}


# --- validation ------------------------------------------------------------------------------------


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check_sampling(body: dict, problems: list[str], *, temp_max: float) -> None:
    if "temperature" in body and body["temperature"] is not None:
        t = body["temperature"]
        if not _is_num(t) or not 0 <= t <= temp_max:
            problems.append(f"temperature: must be a number from 0 to {temp_max:g}, got {t!r}")
    top_p = body.get("top_p")
    if top_p is not None and (not _is_num(top_p) or not 0 <= top_p <= 1):
        problems.append(f"top_p: must be a number from 0 to 1, got {body['top_p']!r}")


def _check_schema(schema: Any, where: str, problems: list[str]) -> None:
    if not isinstance(schema, dict):
        problems.append(f"{where}: must be a JSON Schema object")
    elif schema.get("type") != "object":
        problems.append(f"{where}: the schema must have \"type\": \"object\", got {schema.get('type')!r}")
    elif "properties" in schema and not isinstance(schema["properties"], dict):
        problems.append(f"{where}.properties: must be an object")
    elif "required" in schema and not (isinstance(schema["required"], list)
                                       and all(isinstance(r, str) for r in schema["required"])):
        problems.append(f"{where}.required: must be a list of strings")


_OPENAI_TOP = {"model", "messages", "tools", "tool_choice", "max_tokens", "max_completion_tokens", "temperature",
               "top_p", "response_format", "stream", "stream_options", "n", "stop", "seed", "user",
               "parallel_tool_calls", "frequency_penalty", "presence_penalty", "logprobs", "top_logprobs",
               "metadata", "logit_bias", "store", "reasoning_effort"}
_OPENAI_MSG_KEYS = {"system": {"role", "content", "name"}, "developer": {"role", "content", "name"},
                    "user": {"role", "content", "name"},
                    "assistant": {"role", "content", "tool_calls", "name", "refusal"},
                    "tool": {"role", "content", "tool_call_id"}}


def _openai_content(content: Any, where: str, problems: list[str], *, role: str) -> None:
    if isinstance(content, str):
        return
    if isinstance(content, list):
        for j, part in enumerate(content):
            ok = isinstance(part, dict) and (
                (part.get("type") == "text" and isinstance(part.get("text"), str))
                or (role == "user" and part.get("type") == "image_url" and isinstance(part.get("image_url"), dict)))
            if not ok:
                problems.append(f"{where}.content[{j}]: invalid content part for role {role!r}")
        return
    problems.append(f"{where}.content: must be a string or a list of content parts")


def validate_openai(body: Any) -> list[str]:
    """Problems with a Chat Completions request body (empty when it is valid)."""
    if not isinstance(body, dict):
        return ["the request body must be a JSON object"]
    problems: list[str] = []
    for key in body:
        if key not in _OPENAI_TOP:
            problems.append(f"Unrecognized request argument supplied: {key}")
    if not isinstance(body.get("model"), str) or not body.get("model"):
        problems.append("model: a non-empty string is required")
    if body.get("stream"):
        problems.append("stream: streaming is not supported by the fake server")
    if body.get("n") not in (None, 1):
        problems.append("n: only n=1 is supported")
    for key in ("max_tokens", "max_completion_tokens"):
        if body.get(key) is not None and (not isinstance(body[key], int) or isinstance(body[key], bool)
                                          or body[key] < 1):
            problems.append(f"{key}: must be an integer >= 1, got {body[key]!r}")
    _check_sampling(body, problems, temp_max=2)
    names: list[str] = []
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            problems.append("tools: must be a list")
            tools = []
        for i, tool in enumerate(tools):
            where = f"tools[{i}]"
            if (not isinstance(tool, dict) or tool.get("type") != "function"
                    or not isinstance(tool.get("function"), dict)):
                problems.append(f"{where}: must be {{\"type\": \"function\", \"function\": {{...}}}}")
                continue
            if set(tool) - {"type", "function"}:
                problems.append(f"{where}: unexpected keys {sorted(set(tool) - {'type', 'function'})}")
            fn = tool["function"]
            extra = set(fn) - {"name", "description", "parameters", "strict"}
            if extra:
                problems.append(f"{where}.function: unexpected keys {sorted(extra)}")
            name = fn.get("name")
            if not isinstance(name, str) or not _OPENAI_NAME.match(name):
                problems.append(f"{where}.function.name: must match ^[a-zA-Z0-9_-]{{1,64}}$, got {name!r}")
            else:
                names.append(name)
            if "description" in fn and not isinstance(fn["description"], str):
                problems.append(f"{where}.function.description: must be a string")
            if "parameters" in fn:
                _check_schema(fn["parameters"], f"{where}.function.parameters", problems)
        if len(set(names)) != len(names):
            problems.append("tools: function names must be unique")
    choice = body.get("tool_choice")
    if choice is not None:
        if isinstance(choice, str):
            if choice not in ("none", "auto", "required"):
                problems.append(f"tool_choice: must be none, auto, required or a function, got {choice!r}")
        elif not (isinstance(choice, dict) and choice.get("type") == "function"
                  and (choice.get("function") or {}).get("name") in names):
            problems.append("tool_choice: must name an offered function")
        if not names and choice not in ("none", None):
            problems.append("tool_choice: is only allowed when tools are specified")
    rf = body.get("response_format")
    if rf is not None:
        if not isinstance(rf, dict) or rf.get("type") not in ("text", "json_object", "json_schema"):
            problems.append("response_format: type must be text, json_object or json_schema")
        elif rf["type"] == "json_schema":
            js = rf.get("json_schema")
            if not isinstance(js, dict):
                problems.append("response_format.json_schema: required")
            else:
                if not isinstance(js.get("name"), str) or not _OPENAI_NAME.match(js.get("name") or ""):
                    problems.append("response_format.json_schema.name: must match ^[a-zA-Z0-9_-]{1,64}$")
                if not isinstance(js.get("schema"), dict):
                    problems.append("response_format.json_schema.schema: must be a JSON Schema object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        problems.append("messages: a non-empty list is required")
        return problems
    pending: dict[str, str] = {}  # tool call id -> the assistant message that made it
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict) or m.get("role") not in _OPENAI_MSG_KEYS:
            problems.append(f"{where}: role must be one of {', '.join(_OPENAI_MSG_KEYS)}")
            continue
        role = m["role"]
        extra = set(m) - _OPENAI_MSG_KEYS[role]
        if extra:
            problems.append(f"{where}: Additional properties are not allowed ({', '.join(sorted(extra))} "
                            f"{'was' if len(extra) == 1 else 'were'} unexpected)")
        if role != "tool" and pending:
            problems.append(f"{where}: An assistant message with 'tool_calls' must be followed by tool messages "
                            f"responding to each 'tool_call_id'. Missing: {', '.join(sorted(pending))}")
            pending = {}
        if role == "assistant":
            calls = m.get("tool_calls")
            if m.get("content") is None and not calls:
                problems.append(f"{where}: an assistant message needs content or tool_calls")
            if m.get("content") is not None:
                _openai_content(m["content"], where, problems, role=role)
            if calls is not None:
                if not isinstance(calls, list) or not calls:
                    problems.append(f"{where}.tool_calls: must be a non-empty list")
                    continue
                for j, call in enumerate(calls):
                    cw = f"{where}.tool_calls[{j}]"
                    fn = call.get("function") if isinstance(call, dict) else None
                    if not isinstance(call, dict) or not isinstance(call.get("id"), str) or not call.get("id"):
                        problems.append(f"{cw}.id: a non-empty string is required")
                        continue
                    if call.get("type") != "function" or not isinstance(fn, dict):
                        problems.append(f"{cw}: must be {{\"id\", \"type\": \"function\", \"function\"}}")
                        continue
                    if not isinstance(fn.get("name"), str) or not fn.get("name"):
                        problems.append(f"{cw}.function.name: required")
                    if not isinstance(fn.get("arguments"), str):
                        problems.append(f"{cw}.function.arguments: must be a string (JSON text)")
                    if call["id"] in pending:
                        problems.append(f"{cw}.id: duplicate tool call id {call['id']!r}")
                    pending[call["id"]] = where
        elif role == "tool":
            tcid = m.get("tool_call_id")
            if not isinstance(tcid, str) or not tcid:
                problems.append(f"{where}.tool_call_id: a non-empty string is required")
            elif tcid not in pending:
                problems.append(f"{where}: Invalid parameter: messages with role 'tool' must be a response to a "
                                f"preceding message with 'tool_calls' (tool_call_id {tcid!r} answers none)")
            else:
                del pending[tcid]
            _openai_content(m.get("content"), where, problems, role=role)
        else:
            if "content" not in m:
                problems.append(f"{where}.content: required")
            else:
                _openai_content(m["content"], where, problems, role=role)
    if pending:
        problems.append("An assistant message with 'tool_calls' must be followed by tool messages responding to "
                        f"each 'tool_call_id'. Missing: {', '.join(sorted(pending))}")
    return problems


_ANTHROPIC_TOP = {"model", "max_tokens", "messages", "system", "tools", "tool_choice", "temperature", "top_p",
                  "top_k", "stop_sequences", "stream", "metadata", "thinking", "service_tier"}


def _anthropic_blocks(content: Any, where: str, role: str, problems: list[str]) -> list[dict]:
    if isinstance(content, str):
        if not content:
            problems.append(f"{where}: all messages must have non-empty content except for the optional final "
                            "assistant message")
        return [{"type": "text", "text": content}]
    if not isinstance(content, list) or not content:
        problems.append(f"{where}.content: must be a non-empty string or a non-empty list of content blocks")
        return []
    blocks = []
    for j, b in enumerate(content):
        bw = f"{where}.content.{j}"
        kind = b.get("type") if isinstance(b, dict) else None
        if kind == "text":
            if not isinstance(b.get("text"), str) or not b["text"]:
                problems.append(f"{bw}: text content blocks must be non-empty")
            extra = set(b) - {"type", "text", "cache_control", "citations"}
        elif kind == "image":
            if not isinstance(b.get("source"), dict):
                problems.append(f"{bw}.source: required")
            extra = set(b) - {"type", "source", "cache_control"}
        elif kind == "tool_use":
            if role != "assistant":
                problems.append(f"{bw}: tool_use blocks are only allowed in assistant messages")
            if not isinstance(b.get("id"), str) or not b.get("id"):
                problems.append(f"{bw}.id: required")
            if not isinstance(b.get("name"), str) or not b.get("name"):
                problems.append(f"{bw}.name: required")
            if not isinstance(b.get("input"), dict):
                problems.append(f"{bw}.input: must be an object")
            extra = set(b) - {"type", "id", "name", "input", "cache_control"}
        elif kind == "tool_result":
            if role != "user":
                problems.append(f"{bw}: tool_result blocks are only allowed in user messages")
            if not isinstance(b.get("tool_use_id"), str) or not b.get("tool_use_id"):
                problems.append(f"{bw}.tool_use_id: required")
            c = b.get("content")
            if c is not None and not isinstance(c, str) and not (
                    isinstance(c, list) and all(isinstance(x, dict) and x.get("type") in ("text", "image") for x in c)):
                problems.append(f"{bw}.content: must be a string or a list of text/image blocks")
            if "is_error" in b and not isinstance(b["is_error"], bool):
                problems.append(f"{bw}.is_error: must be a boolean")
            extra = set(b) - {"type", "tool_use_id", "content", "is_error", "cache_control"}
        else:
            problems.append(f"{bw}.type: unknown content block type {kind!r}")
            continue
        if extra:
            problems.append(f"{bw}.{min(extra)}: Extra inputs are not permitted")
        blocks.append(b)
    return blocks


def validate_anthropic(body: Any, headers: Mapping[str, str] | None = None) -> list[str]:
    """Problems with a Messages request (empty when it is valid)."""
    problems: list[str] = []
    if headers is not None:
        version = headers.get("anthropic-version")
        if not version:
            problems.append("anthropic-version: header is required")
        elif version not in ANTHROPIC_VERSIONS:
            problems.append(f"anthropic-version: {version!r} is not a valid version")
    if not isinstance(body, dict):
        return problems + ["the request body must be a JSON object"]
    for key in body:
        if key not in _ANTHROPIC_TOP:
            problems.append(f"{key}: Extra inputs are not permitted")
    if not isinstance(body.get("model"), str) or not body.get("model"):
        problems.append("model: Field required")
    mt = body.get("max_tokens")
    if mt is None:
        problems.append("max_tokens: Field required")
    elif not isinstance(mt, int) or isinstance(mt, bool) or mt < 1:
        problems.append(f"max_tokens: must be an integer >= 1, got {mt!r}")
    if body.get("stream"):
        problems.append("stream: streaming is not supported by the fake server")
    _check_sampling(body, problems, temp_max=1)
    if body.get("top_k") is not None and (not isinstance(body["top_k"], int) or body["top_k"] < 0):
        problems.append("top_k: must be an integer >= 0")
    system = body.get("system")
    if system is not None and not isinstance(system, str) and not (
            isinstance(system, list) and all(isinstance(b, dict) and b.get("type") == "text"
                                             and isinstance(b.get("text"), str) and b["text"] for b in system)):
        problems.append("system: must be a string or a list of non-empty text blocks")
    names: list[str] = []
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            problems.append("tools: must be a list")
            tools = []
        for i, t in enumerate(tools):
            where = f"tools.{i}"
            if not isinstance(t, dict):
                problems.append(f"{where}: must be an object")
                continue
            extra = set(t) - {"name", "description", "input_schema", "cache_control", "type"}
            if extra:
                problems.append(f"{where}.{min(extra)}: Extra inputs are not permitted")
            if t.get("type") not in (None, "custom"):
                problems.append(f"{where}.type: unsupported tool type {t.get('type')!r}")
            name = t.get("name")
            if not isinstance(name, str) or not _ANTHROPIC_NAME.match(name):
                problems.append(f"{where}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'")
            else:
                names.append(name)
            if "description" in t and not isinstance(t["description"], str):
                problems.append(f"{where}.description: must be a string")
            if "input_schema" not in t:
                problems.append(f"{where}.input_schema: Field required")
            else:
                _check_schema(t["input_schema"], f"{where}.input_schema", problems)
        if len(set(names)) != len(names):
            problems.append("tools: Tool names must be unique.")
    choice = body.get("tool_choice")
    if choice is not None:
        if not isinstance(choice, dict) or choice.get("type") not in ("auto", "any", "tool", "none"):
            problems.append("tool_choice.type: must be auto, any, tool or none")
        elif choice["type"] == "tool" and choice.get("name") not in names:
            problems.append(f"tool_choice.name: {choice.get('name')!r} is not one of the offered tools")
        elif choice["type"] in ("any", "tool") and not names:
            problems.append("tool_choice: requires tools")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        problems.append("messages: a non-empty list is required")
        return problems
    prev_tool_uses: list[str] = []
    seen_ids: set[str] = set()
    for i, m in enumerate(messages):
        where = f"messages.{i}"
        if not isinstance(m, dict):
            problems.append(f"{where}: must be an object")
            continue
        role = m.get("role")
        if role == "system":
            problems.append(f'{where}: Unexpected role "system". The Messages API accepts a top-level `system` '
                            'parameter, not "system" as an input message role.')
            continue
        if role not in ("user", "assistant"):
            problems.append(f"{where}.role: must be user or assistant, got {role!r}")
            continue
        if i == 0 and role != "user":
            problems.append('messages: first message must use the "user" role')
        if set(m) - {"role", "content"}:
            problems.append(f"{where}.{min(set(m) - {'role', 'content'})}: Extra inputs are not permitted")
        blocks = _anthropic_blocks(m.get("content"), where, role, problems)
        results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
        if prev_tool_uses:
            missing = [t for t in prev_tool_uses if t not in results] if role == "user" else prev_tool_uses
            if missing:
                problems.append(f"{where}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                                f"{', '.join(missing)}. Each `tool_use` block must have a corresponding "
                                "`tool_result` block in the next message.")
        unexpected = [r for r in results if r not in prev_tool_uses]
        if unexpected:
            problems.append(f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: "
                            f"{', '.join(map(str, unexpected))}. Each `tool_result` block must have a corresponding "
                            "`tool_use` block in the previous message.")
        if results:
            first_other = next((k for k, b in enumerate(blocks) if b.get("type") != "tool_result"), len(blocks))
            if any(b.get("type") == "tool_result" for b in blocks[first_other:]):
                problems.append(f"{where}: tool_result blocks must come before any other content")
        prev_tool_uses = []
        if role == "assistant":
            for b in blocks:
                if b.get("type") == "tool_use" and isinstance(b.get("id"), str):
                    if b["id"] in seen_ids:
                        problems.append(f"{where}: `tool_use` ids must be unique ({b['id']})")
                    seen_ids.add(b["id"])
                    prev_tool_uses.append(b["id"])
    if prev_tool_uses:
        problems.append(f"messages: the final assistant message has `tool_use` blocks ({', '.join(prev_tool_uses)}) "
                        "without a following user message with their `tool_result` blocks")
    return problems


# --- answers in each API's shape ------------------------------------------------------------------


def _count(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


def _openai_error(status: int, message: str, kind: str | None, code: str | None = None) -> dict:
    default = {400: "invalid_request_error", 401: "invalid_request_error", 404: "invalid_request_error",
               429: "rate_limit_error"}.get(status, "server_error")
    return {"error": {"message": message, "type": kind or default, "param": None, "code": code}}


def _anthropic_error(status: int, message: str, kind: str | None) -> dict:
    default = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
               529: "overloaded_error"}.get(status, "api_error")
    return {"type": "error", "error": {"type": kind or default, "message": message}}


# --- the server -------------------------------------------------------------------------------------


ScriptItem = Reply | Callable[[RecordedRequest], Reply]


class FakeModelServer:
    """A local HTTP server speaking Chat Completions and Messages; see the module docstring.

    `api_key`: the key every request must carry (None: no auth check). `script`: replies in order.
    `responder`: answers once the script is used up (default `RuleResponder()`). `echo_key_in_errors`:
    a 401 quotes the key the client sent (some proxies do; tests use it to prove clients mask keys).
    """

    def __init__(self, *, api_key: str | None = None, script: Iterable[ScriptItem] | None = None,
                 responder: Callable[[RecordedRequest], Reply] | None = None, host: str = "127.0.0.1",
                 port: int = 0, echo_key_in_errors: bool = False) -> None:
        self.api_key = api_key
        self._script: list[ScriptItem] = list(script or [])
        self.responder = responder or RuleResponder()
        self.host = host
        self._port = port
        self.echo_key_in_errors = echo_key_in_errors
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._sock: Any = None
        self._ids = 0

    # -- lifecycle ------------------------------------------------------------------------------------

    def start(self) -> Self:
        import uvicorn

        if self._thread is not None:
            return self
        self._sock = bind_socket(self.host, self._port)
        self._port = self._sock.getsockname()[1]
        config = uvicorn.Config(self._app, log_level="warning", log_config=None, access_log=False, lifespan="off",
                                interface="asgi3",
                                timeout_graceful_shutdown=1)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]},
                                        name=f"fake-model-server:{self._port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the fake model server did not start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        self._closing.set()
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._sock is not None:
            self._sock.close()
        self._thread = self._server = self._sock = None

    close = stop

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what tests read and change -------------------------------------------------------------------

    @property
    def port(self) -> int:
        return self._port

    @property
    def root_url(self) -> str:
        return f"http://{self.host}:{self._port}"

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT/v1`: the base URL for both providers (Anthropic's drops the /v1)."""
        return self.root_url + "/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def valid_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if not r.problems]

    def push(self, *items: ScriptItem) -> None:
        """Add replies to the end of the script."""
        with self._lock:
            self._script.extend(items)

    def reset(self, script: Iterable[ScriptItem] | None = None) -> None:
        """Forget recorded requests and replace the script."""
        with self._lock:
            self._requests.clear()
            self._script = list(script or [])

    @property
    def remaining(self) -> int:
        """Script items not used yet."""
        with self._lock:
            return len(self._script)

    # -- ASGI -----------------------------------------------------------------------------------------

    async def _app(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return
        chunks = []
        while True:
            event = await receive()
            chunks.append(event.get("body", b""))
            if not event.get("more_body"):
                break
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        method, path = scope["method"], scope["path"]
        try:
            status, body, extra_headers = await self._handle(method, path, headers, b"".join(chunks))
        except Exception as exc:  # a bug in a scripted callable: answer 500, say what broke
            status, body, extra_headers = 500, {"error": {"message": f"fake server error: {exc!r}",
                                                          "type": "server_error"}}, {}
        payload = json.dumps(body).encode() if not isinstance(body, bytes) else body
        out = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
        out += [(k.encode("latin-1"), str(v).encode("latin-1")) for k, v in extra_headers.items()]
        await send({"type": "http.response.start", "status": status, "headers": out})
        await send({"type": "http.response.body", "body": payload})

    async def _handle(self, method: str, path: str, headers: dict, raw: bytes) -> tuple[int, Any, dict]:
        apis: dict[str, Api] = {"/v1/chat/completions": "openai", "/v1/messages": "anthropic"}
        api = apis.get(path)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        rec = RecordedRequest(api=api, method=method, path=path, headers=headers, body=body)
        with self._lock:
            self._requests.append(rec)

        def answer(status: int, payload: Any, extra: dict | None = None) -> tuple[int, Any, dict]:
            rec.status = status
            return status, payload, extra or {}

        if api is None:
            rec.problems.append(f"unknown path {path}")
            return answer(404, {"error": {"message": f"Not found: {method} {path}", "type": "not_found_error"}})
        error = _openai_error if api == "openai" else (lambda s, m, k, c=None: _anthropic_error(s, m, k))
        if method != "POST":
            rec.problems.append(f"method {method} not allowed")
            return answer(405, error(405, f"Method {method} not allowed", "invalid_request_error"))
        auth_problem = self._check_auth(api, headers)
        if auth_problem:
            rec.problems.append(auth_problem)
            return answer(401, error(401, auth_problem, None, "invalid_api_key"))
        if not isinstance(body, dict) and headers.get("content-type", "").split(";")[0].strip() != "application/json":
            rec.problems.append("content-type must be application/json")
        rec.problems += validate_openai(body) if api == "openai" else validate_anthropic(body, headers)
        if rec.problems:
            return answer(400, error(400, "; ".join(rec.problems), "invalid_request_error"))

        with self._lock:
            item = self._script.pop(0) if self._script else None
        reply = item(rec) if callable(item) else item
        if reply is None:
            reply = self.responder(rec)
        if reply.delay_s:
            deadline = time.monotonic() + reply.delay_s
            while time.monotonic() < deadline and not self._closing.is_set():
                await asyncio.sleep(min(0.02, max(0.0, deadline - time.monotonic())))
        extra = dict(reply.headers)
        if reply.retry_after is not None:
            extra["retry-after"] = str(reply.retry_after)
        if reply.raw is not None:
            raw_body = reply.raw if isinstance(reply.raw, (bytes, dict, list)) else str(reply.raw).encode()
            return answer(reply.status, raw_body, extra)
        if reply.status != 200:
            return answer(reply.status, error(reply.status, reply.error_message, reply.error_type), extra)
        return answer(200, self._openai_body(rec, reply) if api == "openai" else self._anthropic_body(rec, reply),
                      extra)

    def _check_auth(self, api: Api, headers: Mapping[str, str]) -> str | None:
        if self.api_key is None:
            return None
        if api == "openai":
            got = headers.get("authorization")
            if not got:
                return ("You didn't provide an API key. You need to provide your API key in an Authorization header "
                        "using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).")
            scheme, _, key = got.partition(" ")
            if scheme.lower() != "bearer" or key != self.api_key:
                shown = key if self.echo_key_in_errors else (key[:3] + "..." if len(key) > 8 else "***")
                return f"Incorrect API key provided: {shown}."
            return None
        got = headers.get("x-api-key")
        if not got:
            return "x-api-key header is required"
        if got != self.api_key:
            return f"invalid x-api-key{': ' + got if self.echo_key_in_errors else ''}"
        return None

    def _next_id(self, prefix: str) -> str:
        with self._lock:
            self._ids += 1
            return f"{prefix}{self._ids:04d}"

    def _usage(self, rec: RecordedRequest, reply: Reply, out_text: str) -> tuple[int, int]:
        if reply.usage is not None:
            return reply.usage
        return _count(json.dumps(rec.body.get("messages"))) + _count(rec.system), _count(out_text)

    def _openai_body(self, rec: RecordedRequest, reply: Reply) -> dict:
        text = reply.text
        if reply.json is not None:
            text = json.dumps(reply.json)
        message: dict[str, Any] = {"role": "assistant", "content": text if (text or not reply.tool_calls) else None}
        if reply.tool_calls:
            message["tool_calls"] = [{"id": self._next_id("call_"), "type": "function",
                                      "function": {"name": n, "arguments": a if isinstance(a, str) else json.dumps(a)}}
                                     for n, a in reply.tool_calls]
        finish = "tool_calls" if reply.tool_calls else ("length" if reply.stop == "length" else "stop")
        out_text = (text or "") + json.dumps(message.get("tool_calls") or "")
        inp, outp = self._usage(rec, reply, out_text)
        return {"id": self._next_id("chatcmpl-"), "object": "chat.completion", "created": int(time.time()),
                "model": rec.model, "choices": [{"index": 0, "message": message, "finish_reason": finish,
                                                 "logprobs": None}],
                "usage": {"prompt_tokens": inp, "completion_tokens": outp, "total_tokens": inp + outp}}

    def _anthropic_body(self, rec: RecordedRequest, reply: Reply) -> dict:
        content: list[dict] = []
        calls = list(reply.tool_calls)
        if reply.json is not None:
            output_tool = rec._output_tool()
            if output_tool:
                calls.append((output_tool, reply.json))
            else:
                content.append({"type": "text", "text": json.dumps(reply.json)})
        if reply.text:
            content.insert(0, {"type": "text", "text": reply.text})
        for name, args in calls:
            content.append({"type": "tool_use", "id": self._next_id("toolu_"), "name": name, "input": args})
        if reply.tool_calls or (reply.json is not None and rec._output_tool()):
            stop = "tool_use"
        else:
            stop = "max_tokens" if reply.stop == "length" else "end_turn"
        inp, outp = self._usage(rec, reply, json.dumps(content))
        return {"id": self._next_id("msg_"), "type": "message", "role": "assistant", "model": rec.model,
                "content": content, "stop_reason": stop, "stop_sequence": None,
                "usage": {"input_tokens": inp, "output_tokens": outp}}


__all__ = ["FakeModelServer", "RecordedRequest", "Reply", "RuleResponder", "example_from_schema",
           "validate_anthropic", "validate_openai"]
