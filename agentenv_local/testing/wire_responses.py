"""The OpenAI Responses API on the wire (`POST /v1/responses`, what codex speaks): strict request checks,
the response object, its streamed events, and a view of the conversation for responders.

The checks follow the real API: known top-level fields only, `input` a string or a list of items
(messages, function calls and their outputs, reasoning), every `function_call_output` answering a
`function_call` before it and every function call answered before the next message, function tools
with a name and a JSON schema.
"""

from __future__ import annotations

from typing import Any

from agentenv_local.testing.sse import pieces, sse_event
from agentenv_local.testing.wire_checks import OPENAI_NAME, check_min_int, check_sampling, check_schema, check_tools

_TOP = {"model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls", "stream", "store",
        "reasoning", "include", "prompt_cache_key", "text", "max_output_tokens", "temperature", "top_p",
        "previous_response_id", "metadata", "service_tier", "truncation", "user", "background", "max_tool_calls",
        "top_logprobs", "safety_identifier", "stream_options", "prompt", "conversation", "client_metadata"}
_ROLES = ("user", "assistant", "system", "developer")
_PART_TYPES = {"user": ("input_text", "input_image", "input_file"), "system": ("input_text",),
               "developer": ("input_text",), "assistant": ("output_text", "refusal")}
# Tool types other than function that the API knows (codex offers some of them).
_BUILTIN_TOOLS = ("custom", "local_shell", "web_search", "web_search_preview", "file_search", "code_interpreter",
                  "image_generation", "mcp", "computer_use_preview")


def _check_item(item: Any, where: str, problems: list[str], calls: dict[str, str], answered: set[str]) -> None:
    if not isinstance(item, dict):
        problems.append(f"{where}: must be an object")
        return
    kind = item.get("type", "message" if "role" in item else None)
    if kind == "message":
        role = item.get("role")
        if role not in _ROLES:
            problems.append(f"{where}.role: must be one of {', '.join(_ROLES)}, got {role!r}")
            return
        pending = sorted(set(calls) - answered)
        if pending:
            problems.append(f"{where}: No tool output found for function call {', '.join(pending)}.")
            answered.update(pending)  # say it once
        content = item.get("content")
        if isinstance(content, str):
            return
        if not isinstance(content, list):
            problems.append(f"{where}.content: must be a string or a list of content parts")
            return
        for j, part in enumerate(content):
            ptype = part.get("type") if isinstance(part, dict) else None
            if ptype not in _PART_TYPES[role]:
                problems.append(f"{where}.content[{j}].type: {ptype!r} is not allowed for role {role!r} "
                                f"(expected {' or '.join(_PART_TYPES[role])})")
            elif ptype in ("input_text", "output_text") and not isinstance(part.get("text"), str):
                problems.append(f"{where}.content[{j}].text: must be a string")
    elif kind in ("function_call", "custom_tool_call"):
        call_id = item.get("call_id")
        if not isinstance(call_id, str) or not call_id:
            problems.append(f"{where}.call_id: a non-empty string is required")
            return
        if not isinstance(item.get("name"), str) or not item.get("name"):
            problems.append(f"{where}.name: required")
        field_ = "arguments" if kind == "function_call" else "input"
        if not isinstance(item.get(field_), str):
            problems.append(f"{where}.{field_}: must be a string")
        calls[call_id] = where
    elif kind in ("function_call_output", "custom_tool_call_output"):
        call_id = item.get("call_id")
        if call_id not in calls:
            problems.append(f"{where}: No tool call found for function call output with call_id {call_id!r}.")
        else:
            answered.add(call_id)
        output = item.get("output")
        if not isinstance(output, (str, list)):
            problems.append(f"{where}.output: must be a string or a list of content parts")
    elif kind == "reasoning":
        if not isinstance(item.get("summary"), list):
            problems.append(f"{where}.summary: required (a list)")
    elif kind in ("local_shell_call", "local_shell_call_output", "item_reference", "web_search_call"):
        return
    else:
        problems.append(f"{where}.type: unknown input item type {kind!r}")


def _check_tool(tool: Any, where: str, problems: list[str], names: list[str]) -> None:
    kind = tool.get("type") if isinstance(tool, dict) else None
    if not isinstance(tool, dict):
        problems.append(f"{where}: must be an object")
    elif kind == "function":
        extra = set(tool) - {"type", "name", "description", "parameters", "strict"}
        if extra:
            problems.append(f"{where}: unexpected keys {sorted(extra)}")
        name = tool.get("name")
        if not isinstance(name, str) or not OPENAI_NAME.match(name):
            problems.append(f"{where}.name: must match ^[a-zA-Z0-9_-]{{1,64}}$, got {name!r}")
        else:
            names.append(name)
        if "parameters" in tool and tool["parameters"] is not None:
            check_schema(tool["parameters"], f"{where}.parameters", problems)
    elif kind == "namespace":  # a named group of function tools (codex groups its sub-agent tools so)
        if not isinstance(tool.get("name"), str) or not isinstance(tool.get("tools"), list):
            problems.append(f"{where}: a namespace needs a name and a list of tools")
            return
        for j, inner in enumerate(tool["tools"]):
            if not isinstance(inner, dict) or inner.get("type") != "function":
                problems.append(f"{where}.tools[{j}]: a namespace holds function tools only")
            else:
                _check_tool(inner, f"{where}.tools[{j}]", problems, names)
    elif kind in _BUILTIN_TOOLS:
        if kind == "custom":
            if isinstance(tool.get("name"), str):
                names.append(tool["name"])
            else:
                problems.append(f"{where}.name: required")
    else:
        problems.append(f"{where}.type: unknown tool type {kind!r}")


def validate_responses(body: Any) -> list[str]:
    """Problems with a Responses API request (empty when it is valid)."""
    if not isinstance(body, dict):
        return ["the request body must be a JSON object"]
    problems: list[str] = [f"Unknown parameter: '{key}'." for key in body if key not in _TOP]
    if not isinstance(body.get("model"), str) or not body.get("model"):
        problems.append("model: a non-empty string is required")
    for key in ("stream", "store", "parallel_tool_calls", "background"):
        if key in body and body[key] is not None and not isinstance(body[key], bool):
            problems.append(f"{key}: must be a boolean, got {body[key]!r}")
    if body.get("instructions") is not None and not isinstance(body["instructions"], str):
        problems.append("instructions: must be a string")
    check_min_int(body.get("max_output_tokens"), "max_output_tokens", 16, problems)
    check_sampling(body, problems, temp_max=2)
    if body.get("include") is not None and not (isinstance(body["include"], list)
                                                and all(isinstance(x, str) for x in body["include"])):
        problems.append("include: must be a list of strings")
    names = check_tools(body, problems, _check_tool, where="tools[{}]", unique="tool names must be unique")
    choice = body.get("tool_choice")
    if choice is not None and not (choice in ("none", "auto", "required") or (
            isinstance(choice, dict) and (choice.get("type") != "function" or choice.get("name") in names))):
        problems.append("tool_choice: must be none, auto, required or name an offered function")
    reasoning = body.get("reasoning")
    if reasoning is not None and not (isinstance(reasoning, dict) and reasoning.get("effort") in (
            None, "none", "minimal", "low", "medium", "high", "xhigh")):
        problems.append("reasoning.effort: must be none, minimal, low, medium, high or xhigh")
    inp = body.get("input")
    if isinstance(inp, str):
        return problems
    if not isinstance(inp, list) or (not inp and not body.get("previous_response_id")):
        problems.append("input: a string or a non-empty list of input items is required")
        return problems
    calls: dict[str, str] = {}
    answered: set[str] = set()
    for i, item in enumerate(inp):
        _check_item(item, f"input[{i}]", problems, calls, answered)
    return problems


# --- the view responders read -----------------------------------------------------------------------


def _items(body: dict) -> list[dict]:
    inp = body.get("input")
    if isinstance(inp, str):
        return [{"type": "message", "role": "user", "content": inp}]
    return [i for i in inp or [] if isinstance(i, dict)]


def _part_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if isinstance(p, dict))


def tools(body: dict) -> list[dict]:
    """Offered function (and custom) tools as {name, description, input_schema}. A tool inside a namespace
    is named `NAMESPACE.TOOL` (a dot no function name may hold): a reply calling that name answers a
    function_call with `namespace` and `name` apart, as the API does (codex puts each MCP server's tools in
    a namespace `mcp__SERVER`)."""
    out = []
    for t in body.get("tools") or []:
        if not isinstance(t, dict):
            continue
        if t.get("type") in ("function", "custom"):
            out.append({"name": t.get("name"), "description": t.get("description", ""),
                        "input_schema": t.get("parameters") or {"type": "object", "properties": {}}})
        elif t.get("type") == "namespace":
            out += [{**inner, "name": f"{t.get('name')}.{inner['name']}"}
                    for inner in tools({"tools": t.get("tools")})]
    return out


def messages(body: dict) -> list[dict]:
    """The input as chat-like messages: role/content, tool calls as assistant `tool_calls`, outputs as `tool`."""
    out: list[dict] = []
    for item in _items(body):
        kind = item.get("type", "message")
        if kind == "message":
            out.append({"role": item.get("role"), "content": _part_text(item.get("content"))})
        elif kind in ("function_call", "custom_tool_call"):
            name = f"{item['namespace']}.{item.get('name')}" if item.get("namespace") else item.get("name")
            out.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": item.get("call_id"), "name": name,
                 "arguments": item.get("arguments", item.get("input"))}]})
        elif kind in ("function_call_output", "custom_tool_call_output"):
            out.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": _part_text(item.get("output"))})
    return out


def tool_results(body: dict) -> list[dict]:
    return [{"tool_call_id": m["tool_call_id"], "content": m["content"], "is_error": False}
            for m in messages(body) if m["role"] == "tool"]


# --- answers --------------------------------------------------------------------------------------


def response_object(*, response_id: str, model: str | None, created: int, text: str | None,
                    calls: list[tuple[str, str, str]], usage: tuple[int, int], message_id: str,
                    incomplete: bool = False) -> dict:
    """A completed Response: an assistant message (when there is text), then one function_call item per
    (call_id, name, arguments JSON) in `calls`."""
    output: list[dict] = []
    if text:
        output.append({"type": "message", "id": message_id, "status": "completed", "role": "assistant",
                       "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]})
    for call_id, name, arguments in calls:
        namespace, _, plain = name.rpartition(".")  # `NAMESPACE.TOOL`: a tool offered inside a namespace
        item = {"type": "function_call", "id": "fc_" + call_id.removeprefix("call_"), "call_id": call_id,
                "name": plain, "arguments": arguments, "status": "completed"}
        output.append({**item, "namespace": namespace} if namespace else item)
    inp, outp = usage
    return {"id": response_id, "object": "response", "created_at": created,
            "status": "incomplete" if incomplete else "completed", "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
            "model": model, "output": output, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "usage": {"input_tokens": inp, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": outp,
                      "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": inp + outp}}


def responses_stream(response: dict) -> list[bytes]:
    """The SSE events of a streamed Response: response.created / in_progress, per output item
    output_item.added, its deltas (output_text.delta or function_call_arguments.delta) and *.done
    events, output_item.done, then response.completed (or response.incomplete)."""
    seq = 0
    out: list[bytes] = []

    def emit(kind: str, **fields: Any) -> None:
        nonlocal seq
        out.append(sse_event({"type": kind, "sequence_number": seq, **fields}, kind))
        seq += 1

    pending = {**response, "status": "in_progress", "output": [], "usage": None}
    emit("response.created", response=pending)
    emit("response.in_progress", response=pending)
    for index, item in enumerate(response["output"]):
        if item["type"] == "message":
            part = item["content"][0]
            emit("response.output_item.added", output_index=index,
                 item={**item, "status": "in_progress", "content": []})
            emit("response.content_part.added", item_id=item["id"], output_index=index, content_index=0,
                 part={**part, "text": ""})
            for p in pieces(part["text"]):
                emit("response.output_text.delta", item_id=item["id"], output_index=index, content_index=0,
                     delta=p, logprobs=[])
            emit("response.output_text.done", item_id=item["id"], output_index=index, content_index=0,
                 text=part["text"], logprobs=[])
            emit("response.content_part.done", item_id=item["id"], output_index=index, content_index=0, part=part)
        else:
            emit("response.output_item.added", output_index=index,
                 item={**item, "status": "in_progress", "arguments": ""})
            for p in pieces(item["arguments"]):
                emit("response.function_call_arguments.delta", item_id=item["id"], output_index=index, delta=p)
            emit("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                 arguments=item["arguments"])
        emit("response.output_item.done", output_index=index, item=item)
    emit("response.incomplete" if response["status"] == "incomplete" else "response.completed", response=response)
    return out


def responses_error(status: int, message: str, kind: str | None, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": kind or ("invalid_request_error" if status < 500 else "server_error"),
                      "param": None, "code": code}}


__all__ = ["messages", "response_object", "responses_error", "responses_stream", "tool_results", "tools",
           "validate_responses"]
