"""Anthropic Messages on the wire: strict request checks, error bodies, and SSE streaming events."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

from agentenv_local.testing.sse import pieces, sse_event
from agentenv_local.testing.wire_checks import (
    ANTHROPIC_NAME,
    check_min_int,
    check_sampling,
    check_schema,
    check_tools,
)

ANTHROPIC_VERSIONS = ("2023-06-01", "2023-01-01")


# Fields the API takes only with an `anthropic-beta` header (Claude Code sends them with its betas).
_BETA_TOP = {"context_management", "container", "mcp_servers", "output_config"}
_BETA_TOOL_KEYS = {"defer_loading", "input_examples", "allowed_callers", "strict"}
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
        elif kind in ("thinking", "redacted_thinking"):
            if role != "assistant":
                problems.append(f"{bw}: {kind} blocks are only allowed in assistant messages")
            need = ("thinking", "signature") if kind == "thinking" else ("data",)
            for key in need:
                if not isinstance(b.get(key), str):
                    problems.append(f"{bw}.{key}: Field required")
            extra = set(b) - {"type", *need}
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


def _check_tool(t: Any, where: str, problems: list[str], names: list[str], *, betas: bool) -> None:
    if not isinstance(t, dict):
        problems.append(f"{where}: must be an object")
        return
    known = {"name", "description", "input_schema", "cache_control", "type", "eager_input_streaming"}
    extra = set(t) - known - (_BETA_TOOL_KEYS if betas else set())
    if extra:
        problems.append(f"{where}.{min(extra)}: Extra inputs are not permitted")
    if t.get("type") not in (None, "custom"):
        problems.append(f"{where}.type: unsupported tool type {t.get('type')!r}")
    name = t.get("name")
    if not isinstance(name, str) or not ANTHROPIC_NAME.match(name):
        problems.append(f"{where}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'")
    else:
        names.append(name)
    if "description" in t and not isinstance(t["description"], str):
        problems.append(f"{where}.description: must be a string")
    if "input_schema" not in t:
        problems.append(f"{where}.input_schema: Field required")
    else:
        check_schema(t["input_schema"], f"{where}.input_schema", problems)


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
    betas = bool((headers or {}).get("anthropic-beta"))
    for key in body:
        if key not in _ANTHROPIC_TOP and not (betas and key in _BETA_TOP):
            problems.append(f"{key}: Extra inputs are not permitted")
    if not isinstance(body.get("model"), str) or not body.get("model"):
        problems.append("model: Field required")
    mt = body.get("max_tokens")
    if mt is None:
        problems.append("max_tokens: Field required")
    check_min_int(mt, "max_tokens", 1, problems)
    if "stream" in body and not isinstance(body["stream"], bool):
        problems.append(f"stream: Input should be a valid boolean, got {body['stream']!r}")
    thinking = body.get("thinking")
    if thinking is not None:
        kind = thinking.get("type") if isinstance(thinking, dict) else None
        if kind == "enabled":
            budget = thinking.get("budget_tokens")
            if not isinstance(budget, int) or isinstance(budget, bool) or budget < 1024:
                problems.append("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
            elif isinstance(mt, int) and budget >= mt:
                problems.append("thinking.budget_tokens: `max_tokens` must be greater than `thinking.budget_tokens`")
        elif kind not in ("disabled", "adaptive"):
            problems.append(f"thinking.type: must be enabled, disabled or adaptive, got {kind!r}")
    check_sampling(body, problems, temp_max=1)
    if body.get("top_k") is not None and (not isinstance(body["top_k"], int) or body["top_k"] < 0):
        problems.append("top_k: must be an integer >= 0")
    system = body.get("system")
    if system is not None and not isinstance(system, str) and not (
            isinstance(system, list) and all(isinstance(b, dict) and b.get("type") == "text"
                                             and isinstance(b.get("text"), str) and b["text"] for b in system)):
        problems.append("system: must be a string or a list of non-empty text blocks")
    names = check_tools(body, problems, functools.partial(_check_tool, betas=betas), where="tools.{}",
                        unique="Tool names must be unique.")
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



def anthropic_error(status: int, message: str, kind: str | None) -> dict:
    default = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
               529: "overloaded_error"}.get(status, "api_error")
    return {"type": "error", "error": {"type": kind or default, "message": message}}



def anthropic_stream(message: dict) -> list[bytes]:
    """The SSE events of a streamed Messages answer, built from the complete `message` body:
    message_start, then per content block content_block_start / *_delta / content_block_stop, then
    message_delta (stop reason, output tokens) and message_stop."""
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None,
             "usage": {"input_tokens": message["usage"]["input_tokens"], "output_tokens": 1}}
    out = [sse_event({"type": "message_start", "message": start}, "message_start"),
           sse_event({"type": "ping"}, "ping")]
    for index, block in enumerate(message["content"]):
        kind = block["type"]
        if kind == "text":
            empty: dict = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in pieces(block["text"])]
        elif kind == "thinking":
            empty = {"type": "thinking", "thinking": ""}
            deltas = [{"type": "thinking_delta", "thinking": p} for p in pieces(block["thinking"])]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        else:  # tool_use: the input arrives as JSON text in pieces
            empty = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": p}
                      for p in pieces(json.dumps(block["input"]))]
        out.append(sse_event({"type": "content_block_start", "index": index, "content_block": empty},
                             "content_block_start"))
        out += [sse_event({"type": "content_block_delta", "index": index, "delta": d}, "content_block_delta")
                for d in deltas]
        out.append(sse_event({"type": "content_block_stop", "index": index}, "content_block_stop"))
    out.append(sse_event({"type": "message_delta",
                          "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                          "usage": {"output_tokens": message["usage"]["output_tokens"]}}, "message_delta"))
    out.append(sse_event({"type": "message_stop"}, "message_stop"))
    return out
