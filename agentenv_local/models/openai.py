"""OpenAI-compatible Chat Completions: `POST {base_url}/chat/completions` with a bearer key.

Works with OpenAI itself and the local servers that copy its API: Ollama, vLLM, llama.cpp server,
LiteLLM (their base URLs end in `/v1`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from agentenv_local.models.base import ModelProvider
from agentenv_local.models.errors import ModelError
from agentenv_local.models.types import (
    Message,
    ModelResponse,
    StopReason,
    ToolCall,
    Usage,
)

_FINISH: dict[str, StopReason] = {"stop": "end", "tool_calls": "tool_calls", "function_call": "tool_calls",
                                  "length": "length"}


def _schema_name(schema: dict) -> str:
    title = schema.get("title")
    name = re.sub(r"[^A-Za-z0-9_-]", "_", title)[:64] if isinstance(title, str) and title else ""
    return name or "response"


def _text_of(content: Any) -> str:
    """Message content as text: a string, None, or a list of `{"type": "text", "text": ...}` parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return str(content)


def parse_arguments(name: str, raw: Any) -> dict[str, Any]:
    """Tool-call arguments (a JSON string, or already an object) as a dict; ModelError naming the tool."""
    if isinstance(raw, dict):
        return raw
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    if not isinstance(raw, str):
        raise ModelError(f"the model called tool {name!r} with arguments that are not a JSON object "
                         f"(got {type(raw).__name__})", kind="tool_arguments", tool_name=name,
                         hint="retry, lower the temperature, or use a model with better tool-calling support")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        shown = raw if len(raw) <= 200 else raw[:200] + "..."
        raise ModelError(f"the model called tool {name!r} with arguments that are not valid JSON "
                         f"({exc.msg} at position {exc.pos}): {shown}", kind="tool_arguments", tool_name=name,
                         hint="retry, lower the temperature, or use a model with better tool-calling support"
                         ) from None
    if not isinstance(value, dict):
        raise ModelError(f"the model called tool {name!r} with arguments that are JSON but not an object "
                         f"(got {type(value).__name__})", kind="tool_arguments", tool_name=name,
                         hint="retry, lower the temperature, or use a model with better tool-calling support")
    return value


def to_openai_messages(messages: list[Message]) -> list[dict]:
    out: list[dict] = []
    for m in messages:
        if m.role == "assistant":
            item: dict[str, Any] = {"role": "assistant",
                                    "content": m.content if (m.content or not m.tool_calls) else None}
            if m.tool_calls:
                item["tool_calls"] = [{"id": c.id, "type": "function",
                                       "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                                      for c in m.tool_calls]
            out.append(item)
        elif m.role == "tool":
            text = m.content
            if m.is_error and not text.lower().startswith("error"):
                text = f"Error: {text}"  # Chat Completions has no error flag on tool results
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": text})
        else:
            out.append({"role": m.role, "content": m.content})
    return out


class OpenAIChatProvider(ModelProvider):
    """OpenAI-compatible Chat Completions (Ollama, vLLM, llama.cpp server, LiteLLM, OpenAI)."""

    api = "openai"
    label = "chat completions"

    def _auth_headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def _not_found_hint(self, model: str) -> str:
        return (f"check [model] base_url (OpenAI-compatible base URLs usually end in /v1, e.g. "
                f"http://127.0.0.1:11434/v1 for Ollama) and that the endpoint serves model {model!r}")

    def _request(self, messages, tools, *, model, max_tokens, temperature, response_format):
        body: dict[str, Any] = {"model": model, "messages": to_openai_messages(messages)}
        if tools:
            body["tools"] = [{"type": "function",
                              "function": {"name": t.name, "description": t.description, "parameters": t.input_schema}}
                             for t in tools]
        if max_tokens is not None:
            body["max_tokens"] = int(max_tokens)
        if temperature is not None:
            body["temperature"] = float(temperature)
        if response_format is not None:
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": _schema_name(response_format),
                                                       "schema": response_format}}
        return "/chat/completions", body

    def _parse(self, data, *, model, latency_s, specs, response_format) -> ModelResponse:
        try:
            choice = data["choices"][0]
            msg = choice["message"]
            if not isinstance(msg, dict):
                raise TypeError
        except (KeyError, IndexError, TypeError):
            raise ModelError(f"the endpoint at {self.base_url} answered without choices[0].message; "
                             "is it an OpenAI-compatible Chat Completions endpoint?", kind="protocol",
                             endpoint=self.base_url,
                             hint="point [model] base_url at the /v1 root of an OpenAI-compatible server, "
                                  "or set [model] api = \"anthropic\" for an Anthropic endpoint") from None
        calls: list[ToolCall] = []
        for i, raw in enumerate(msg.get("tool_calls") or []):
            fn = raw.get("function") if isinstance(raw, dict) else None
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
                raise ModelError("the endpoint answered a tool call without a function name", kind="protocol",
                                 endpoint=self.base_url, hint="use a model/server with tool-calling support")
            call_id = raw.get("id") if isinstance(raw.get("id"), str) and raw.get("id") else f"call_{i}"
            calls.append(ToolCall(id=call_id, name=fn["name"],
                                  arguments=parse_arguments(fn["name"], fn.get("arguments"))))
        finish = choice.get("finish_reason")
        stop: StopReason = "tool_calls" if calls else _FINISH.get(finish, "end" if finish is None else "other")
        if stop == "tool_calls" and not calls:
            stop = "other"
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        return ModelResponse(
            message=Message(role="assistant", content=_text_of(msg.get("content")), tool_calls=calls),
            stop_reason=stop,
            usage=Usage(input_tokens=int(usage.get("prompt_tokens") or 0),
                        output_tokens=int(usage.get("completion_tokens") or 0),
                        total=int(usage.get("total_tokens") or 0)),
            model=str(data.get("model") or model), latency_s=latency_s)
