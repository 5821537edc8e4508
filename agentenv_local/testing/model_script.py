"""What the fake model server answers with and what it records: `Reply` (one scripted answer), `RecordedRequest`
(one request, with a view of the conversation that is the same for every wire format) and `RuleResponder`
(the default answers). Import them from `agentenv_local.testing.fake_models`."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from agentenv_local.testing import wire_gemini, wire_responses

Api = Literal["openai", "anthropic", "responses", "gemini"]


# --- replies ---------------------------------------------------------------------------------------


@dataclass
class Reply:
    """One scripted answer. Build it with the class methods.

    `tool_calls`: (name, arguments) pairs; arguments given as a str are sent verbatim (use that
    for malformed JSON). `status` other than 200 answers an error in the API's shape with
    `error_message` (and `Retry-After` if `retry_after` is set). `delay_s` waits before answering
    (to trigger client timeouts). `thinking`: on the Anthropic API, a thinking block before the answer
    when the request enables thinking. `json` is a structured answer (text JSON, or on the Anthropic API
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
    thinking: str | None = None

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
    query: str = ""  # the URL's query string (Gemini: alt=sse, key=...)

    # -- a view of the conversation that is the same for both APIs --------------------------------

    @property
    def valid(self) -> bool:
        return not self.problems and isinstance(self.body, dict)

    @property
    def model(self) -> str | None:
        if self.api == "gemini":  # the model is in the path: /v1beta/models/MODEL:generateContent
            found = wire_gemini.PATH.match(self.path)
            return found.group("model") if found else None
        return self.body.get("model") if isinstance(self.body, dict) else None

    @property
    def messages(self) -> list[dict]:
        if self.api == "responses" and isinstance(self.body, dict):
            return wire_responses.messages(self.body)
        if self.api == "gemini" and isinstance(self.body, dict):
            return wire_gemini.messages(self.body)
        return list(self.body.get("messages") or []) if isinstance(self.body, dict) else []

    @property
    def tools(self) -> list[dict]:
        """Offered tools as {name, description, input_schema} (both APIs)."""
        if self.api == "responses" and isinstance(self.body, dict):
            return wire_responses.tools(self.body)
        if self.api == "gemini" and isinstance(self.body, dict):
            return wire_gemini.tools(self.body)
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
                return choice.get("name") or (choice.get("function") or {}).get("name")  # Responses: top-level name
        return None

    @property
    def system(self) -> str:
        if not isinstance(self.body, dict):
            return ""
        if self.api == "anthropic":
            sys_ = self.body.get("system") or ""
            return sys_ if isinstance(sys_, str) else "".join(b.get("text", "") for b in sys_)
        if self.api == "gemini":
            return wire_gemini.system(self.body)
        if self.api == "responses":
            head = self.body.get("instructions") or ""
            rest = [_text(m.get("content")) for m in self.messages if m.get("role") in ("system", "developer")]
            return "\n\n".join([head, *rest] if head else rest)
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
        if self.api == "responses" and isinstance(self.body, dict):
            return wire_responses.tool_results(self.body)
        if self.api == "gemini" and isinstance(self.body, dict):
            return wire_gemini.tool_results(self.body)
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
        if self.api == "responses":
            fmt = (self.body.get("text") or {}).get("format") or {}
            return fmt.get("schema") if fmt.get("type") == "json_schema" else None
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
