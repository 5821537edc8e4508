"""The Anthropic Messages API: `POST {base_url}/v1/messages` with `x-api-key` and `anthropic-version`.

`base_url` is the server root (`https://api.anthropic.com`); a trailing `/v1` is tolerated. The
system prompt travels as the top-level `system`; tool calls are `tool_use` blocks of the assistant
and their results `tool_result` blocks of the next user turn. Structured output (`response_format`)
is done the portable way: a tool whose input schema is the wanted schema, which the model must call;
its input becomes the answer's text (JSON).
"""

from __future__ import annotations

import json
from typing import Any

from agentenv_local.models.base import ModelProvider
from agentenv_local.models.errors import ModelError
from agentenv_local.models.openai import parse_arguments
from agentenv_local.models.types import (
    Message,
    ModelResponse,
    StopReason,
    ToolCall,
    ToolSpec,
    Usage,
)

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
OUTPUT_TOOL = "structured_output"

_STOP: dict[str, StopReason] = {"end_turn": "end", "stop_sequence": "end", "tool_use": "tool_calls",
                                "max_tokens": "length"}


def _output_tool_name(specs: list[ToolSpec]) -> str:
    taken = {t.name for t in specs}
    name, n = OUTPUT_TOOL, 1
    while name in taken:
        n += 1
        name = f"{OUTPUT_TOOL}_{n}"
    return name


def to_anthropic(messages: list[Message]) -> tuple[str, list[dict]]:
    """(system text, messages): tool results and user text of one turn merged into one user message."""
    system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
    out: list[dict] = []

    def user_turn() -> list[dict]:
        if not out or out[-1]["role"] != "user":
            out.append({"role": "user", "content": []})
        return out[-1]["content"]

    for m in messages:
        if m.role == "system":
            continue
        if m.role == "assistant":
            blocks: list[dict] = []
            if m.content:
                blocks.append({"type": "text", "text": m.content})
            blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in m.tool_calls]
            if not blocks:
                continue  # an empty assistant turn cannot be sent; the turns around it merge
            if out and out[-1]["role"] == "assistant":
                out[-1]["content"].extend(blocks)
            else:
                out.append({"role": "assistant", "content": blocks})
        elif m.role == "tool":
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}
            if m.is_error:
                block["is_error"] = True
            user_turn().append(block)
        elif m.content:
            user_turn().append({"type": "text", "text": m.content})
        else:
            user_turn()
    for turn in out:  # tool results go first in a user turn
        if turn["role"] == "user":
            turn["content"].sort(key=lambda b: 0 if b.get("type") == "tool_result" else 1)
    return system, out


class AnthropicMessagesProvider(ModelProvider):
    """The Anthropic Messages API (api.anthropic.com, or a proxy that serves `/v1/messages`)."""

    api = "anthropic"
    label = "messages"

    def __init__(self, base_url: str = "https://api.anthropic.com", **kwargs: Any) -> None:
        super().__init__(base_url, **kwargs)
        self._base_url = self._base_url.removesuffix("/v1")

    def _auth_headers(self) -> dict[str, str]:
        out = {"anthropic-version": ANTHROPIC_VERSION}
        if self._api_key:
            out["x-api-key"] = self._api_key
        return out

    def _not_found_hint(self, model: str) -> str:
        return (f"check [model] base_url (the server root, e.g. https://api.anthropic.com; /v1/messages is added) "
                f"and the model name {model!r}")

    def _request(self, messages, tools, *, model, max_tokens, temperature, response_format):
        system, msgs = to_anthropic(messages)
        body: dict[str, Any] = {"model": model, "max_tokens": int(max_tokens or DEFAULT_MAX_TOKENS), "messages": msgs}
        if system:
            body["system"] = system
        tool_list = [{"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in tools]
        if response_format is not None:
            schema = dict(response_format)
            schema.setdefault("type", "object")
            name = _output_tool_name(tools)
            tool_list.append({"name": name, "description": "Give the final answer in the required structure.",
                              "input_schema": schema})
            body["tool_choice"] = {"type": "tool", "name": name} if not tools else {"type": "any"}
        if tool_list:
            body["tools"] = tool_list
        if temperature is not None:
            body["temperature"] = float(temperature)
        return "/v1/messages", body

    def _parse(self, data, *, model, latency_s, specs, response_format) -> ModelResponse:
        content = data.get("content") if isinstance(data, dict) else None
        if not isinstance(content, list):
            raise ModelError(f"the endpoint at {self.base_url} answered without a content list; "
                             "is it an Anthropic Messages endpoint?", kind="protocol", endpoint=self.base_url,
                             hint="point [model] base_url at a server that serves /v1/messages, or set "
                                  "[model] api = \"openai\" for an OpenAI-compatible endpoint")
        output_tool = _output_tool_name(specs) if response_format else None
        texts: list[str] = []
        calls: list[ToolCall] = []
        structured: str | None = None
        for block in content:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif kind == "tool_use":
                name, call_id = block.get("name"), block.get("id")
                if not isinstance(name, str) or not name or not isinstance(call_id, str) or not call_id:
                    raise ModelError("the endpoint answered a tool_use block without a name or id", kind="protocol",
                                     endpoint=self.base_url, hint="is it an Anthropic Messages endpoint?")
                args = parse_arguments(name, block.get("input"))
                if name == output_tool:
                    structured = json.dumps(args, ensure_ascii=False)
                else:
                    calls.append(ToolCall(id=call_id, name=name, arguments=args))
        reason = data.get("stop_reason")
        stop: StopReason
        if calls:
            stop = "tool_calls"
        elif structured is not None:
            stop = "end"
        else:
            stop = _STOP.get(reason, "other")
            if stop == "tool_calls":
                stop = "other"
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        return ModelResponse(
            message=Message(role="assistant", content=structured if structured is not None else "".join(texts),
                            tool_calls=calls),
            stop_reason=stop,
            usage=Usage(input_tokens=int(usage.get("input_tokens") or 0),
                        output_tokens=int(usage.get("output_tokens") or 0)),
            model=str(data.get("model") or model), latency_s=latency_s)
