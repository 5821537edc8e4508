"""OpenAI Chat Completions on the wire: strict request checks, error bodies, and streaming chunks."""

from __future__ import annotations

from typing import Any

from agentenv_local.testing.sse import pieces, sse_event
from agentenv_local.testing.wire_checks import OPENAI_NAME, check_min_int, check_sampling, check_schema, check_tools

_OPENAI_TOP = {"model", "messages", "tools", "tool_choice", "max_tokens", "max_completion_tokens", "temperature",
               "top_p", "response_format", "stream", "stream_options", "n", "stop", "seed", "user",
               "parallel_tool_calls", "frequency_penalty", "presence_penalty", "logprobs", "top_logprobs",
               "metadata", "logit_bias", "store", "reasoning_effort", "prompt_cache_key", "safety_identifier",
               "service_tier", "verbosity", "modalities", "prediction", "web_search_options", "prompt_cache_retention"}
_OPENAI_MSG_KEYS = {"system": {"role", "content", "name"}, "developer": {"role", "content", "name"},
                    "user": {"role", "content", "name"},
                    "assistant": {"role", "content", "tool_calls", "name", "refusal"},
                    "tool": {"role", "content", "tool_call_id", "name"}}  # LiteLLM names the tool


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


def _check_tool(tool: Any, where: str, problems: list[str], names: list[str]) -> None:
    if (not isinstance(tool, dict) or tool.get("type") != "function"
            or not isinstance(tool.get("function"), dict)):
        problems.append(f"{where}: must be {{\"type\": \"function\", \"function\": {{...}}}}")
        return
    if set(tool) - {"type", "function"}:
        problems.append(f"{where}: unexpected keys {sorted(set(tool) - {'type', 'function'})}")
    fn = tool["function"]
    extra = set(fn) - {"name", "description", "parameters", "strict"}
    if extra:
        problems.append(f"{where}.function: unexpected keys {sorted(extra)}")
    name = fn.get("name")
    if not isinstance(name, str) or not OPENAI_NAME.match(name):
        problems.append(f"{where}.function.name: must match ^[a-zA-Z0-9_-]{{1,64}}$, got {name!r}")
    else:
        names.append(name)
    if "description" in fn and not isinstance(fn["description"], str):
        problems.append(f"{where}.function.description: must be a string")
    if "parameters" in fn:
        check_schema(fn["parameters"], f"{where}.function.parameters", problems)


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
    if "stream" in body and not isinstance(body["stream"], bool) and body["stream"] is not None:
        problems.append(f"stream: must be a boolean, got {body['stream']!r}")
    so = body.get("stream_options")
    if so is not None:
        if not body.get("stream"):
            problems.append("stream_options: The 'stream_options' parameter is only allowed when 'stream' is enabled.")
        elif not isinstance(so, dict) or set(so) - {"include_usage", "include_obfuscation"}:
            problems.append("stream_options: must be an object with include_usage (a boolean)")
    if body.get("n") not in (None, 1):
        problems.append("n: only n=1 is supported")
    for key in ("max_tokens", "max_completion_tokens"):
        check_min_int(body.get(key), key, 1, problems)
    check_sampling(body, problems, temp_max=2)
    names = check_tools(body, problems, _check_tool, where="tools[{}]", unique="function names must be unique")
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
                if not isinstance(js.get("name"), str) or not OPENAI_NAME.match(js.get("name") or ""):
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



def openai_error(status: int, message: str, kind: str | None, code: str | None = None) -> dict:
    default = {400: "invalid_request_error", 401: "invalid_request_error", 404: "invalid_request_error",
               429: "rate_limit_error"}.get(status, "server_error")
    return {"error": {"message": message, "type": kind or default, "param": None, "code": code}}



def openai_stream(completion: dict, *, include_usage: bool) -> list[bytes]:
    """The `data:` chunks of a streamed Chat Completion, built from the complete `completion` body:
    a role chunk, content deltas, tool-call deltas (id and name first, then the arguments in pieces),
    a chunk with the finish reason, the usage chunk when `stream_options.include_usage`, then `[DONE]`."""
    choice = completion["choices"][0]
    message = choice["message"]
    base = {"id": completion["id"], "object": "chat.completion.chunk", "created": completion["created"],
            "model": completion["model"]}

    def chunk(delta: dict, finish: str | None = None) -> bytes:
        body = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}
        if include_usage:
            body["usage"] = None
        return sse_event(body)

    out = [chunk({"role": "assistant", "content": ""})]
    if message.get("content"):
        out += [chunk({"content": p}) for p in pieces(message["content"])]
    for index, call in enumerate(message.get("tool_calls") or []):
        fn = call["function"]
        out.append(chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                          "function": {"name": fn["name"], "arguments": ""}}]}))
        out += [chunk({"tool_calls": [{"index": index, "function": {"arguments": p}}]})
                for p in pieces(fn["arguments"])]
    out.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        out.append(sse_event({**base, "choices": [], "usage": completion["usage"]}))
    out.append(sse_event("[DONE]"))
    return out
