"""The Gemini API on the wire (`POST /v1beta/models/MODEL:generateContent`, `:streamGenerateContent?alt=sse`,
`:countTokens`; what Gemini CLI speaks): strict request checks, the response, its streamed chunks, error
bodies, and a view of the conversation for responders.

The checks follow the real API: known top-level and generationConfig fields only, `contents` a non-empty
list of `user`/`model` turns made of known parts, every functionResponse turn right after the model turn
whose functionCalls it answers (one response per call), function declarations with a name and one schema.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agentenv_local.testing.sse import pieces, sse_event
from agentenv_local.testing.wire_checks import check_schema

PATH = re.compile(r"^/(v1beta|v1)/models/(?P<model>[^/:]+)"
                  r":(?P<method>generateContent|streamGenerateContent|countTokens)\Z")
_TOP = {"contents", "systemInstruction", "tools", "toolConfig", "generationConfig", "safetySettings", "cachedContent",
        "labels"}
_GEN = {"temperature", "topP", "topK", "maxOutputTokens", "candidateCount", "stopSequences", "responseMimeType",
        "responseSchema", "responseJsonSchema", "thinkingConfig", "seed", "presencePenalty", "frequencyPenalty",
        "responseModalities", "responseLogprobs", "logprobs", "mediaResolution", "speechConfig"}
_PART_KEYS = {"text", "functionCall", "functionResponse", "inlineData", "fileData", "executableCode",
              "codeExecutionResult"}
_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
           429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}


def gemini_error(status: int, message: str, kind: str | None = None, code: str | None = None) -> dict:
    return {"error": {"code": status, "message": message, "status": kind if kind and kind.isupper()
                      else _STATUS.get(status, "UNKNOWN")}}


def _check_parts(parts: Any, where: str, problems: list[str]) -> list[dict]:
    if not isinstance(parts, list) or not parts:
        problems.append(f"{where}.parts: must contain at least one part")
        return []
    out = []
    for j, part in enumerate(parts):
        pw = f"{where}.parts[{j}]"
        if not isinstance(part, dict):
            problems.append(f"{pw}: must be an object")
            continue
        data = set(part) & _PART_KEYS
        if len(data) != 1:
            problems.append(f"{pw}: a part holds exactly one of {', '.join(sorted(_PART_KEYS))}")
            continue
        extra = set(part) - _PART_KEYS - {"thought", "thoughtSignature", "videoMetadata"}
        if extra:
            problems.append(f"{pw}: Unknown name \"{min(extra)}\": Cannot find field.")
        call = part.get("functionCall")
        if call is not None and not (isinstance(call, dict) and isinstance(call.get("name"), str)
                                     and isinstance(call.get("args", {}), dict)):
            problems.append(f"{pw}.functionCall: needs a name and object args")
        response = part.get("functionResponse")
        if response is not None and not (isinstance(response, dict) and isinstance(response.get("name"), str)
                                         and isinstance(response.get("response"), dict)):
            problems.append(f"{pw}.functionResponse: needs a name and an object response")
        if "text" in part and not isinstance(part["text"], str):
            problems.append(f"{pw}.text: must be a string")
        out.append(part)
    return out


def validate_gemini(body: Any, *, count_only: bool = False) -> list[str]:
    """Problems with a generateContent (or countTokens) request (empty when it is valid)."""
    if not isinstance(body, dict):
        return ["the request body must be a JSON object"]
    if count_only and "generateContentRequest" in body:
        body = body["generateContentRequest"]
        if not isinstance(body, dict):
            return ["generateContentRequest: must be an object"]
    problems = [f"Invalid JSON payload received. Unknown name \"{key}\": Cannot find field."
                for key in body if key not in _TOP and not (key == "model" and count_only)]
    gen = body.get("generationConfig")
    if gen is not None:
        if not isinstance(gen, dict):
            problems.append("generationConfig: must be an object")
        else:
            problems += [f"Invalid JSON payload received. Unknown name \"{k}\" at 'generation_config': Cannot find "
                         "field." for k in gen if k not in _GEN]
            t = gen.get("temperature")
            if t is not None and not (isinstance(t, (int, float)) and 0 <= t <= 2):
                problems.append(f"generationConfig.temperature: must be from 0 to 2, got {t!r}")
            if gen.get("candidateCount") not in (None, 1):
                problems.append("generationConfig.candidateCount: only 1 is supported")
    system = body.get("systemInstruction")
    if system is not None:
        _check_parts(system.get("parts") if isinstance(system, dict) else None, "systemInstruction", problems)
    names: list[str] = []
    for i, tool in enumerate(body.get("tools") or []):
        if not isinstance(tool, dict):
            problems.append(f"tools[{i}]: must be an object")
            continue
        for j, fd in enumerate(tool.get("functionDeclarations") or []):
            where = f"tools[{i}].functionDeclarations[{j}]"
            name = fd.get("name") if isinstance(fd, dict) else None
            if not isinstance(name, str) or not re.match(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,127}\Z", name):
                problems.append(f"{where}.name: must start with a letter or underscore, up to 128 of [a-zA-Z0-9_.:-]")
                continue
            names.append(name)
            if "parameters" in fd and "parametersJsonSchema" in fd:
                problems.append(f"{where}: give parameters or parametersJsonSchema, not both")
            schema = fd.get("parametersJsonSchema", fd.get("parameters"))
            if schema is not None:
                check_schema(schema if schema.get("type") != "OBJECT" else {**schema, "type": "object"},
                             f"{where}.parameters", problems)
    if len(set(names)) != len(names):
        problems.append("tools: duplicate function declaration names")
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        problems.append("contents: must not be empty")
        return problems
    pending: list[str] = []  # names of the function calls of the model turn right before
    for i, content in enumerate(contents):
        where = f"contents[{i}]"
        if not isinstance(content, dict) or content.get("role", "user") not in ("user", "model", "function"):
            problems.append(f"{where}.role: must be user or model")
            continue
        parts = _check_parts(content.get("parts"), where, problems)
        responses = [p["functionResponse"].get("name") for p in parts if isinstance(p.get("functionResponse"), dict)]
        if responses and sorted(map(str, responses)) != sorted(pending):
            problems.append(f"{where}: Please ensure that the number of function response parts is equal to the "
                            "number of function call parts of the function call turn.")
        elif pending and not responses:
            problems.append(f"{where}: Please ensure that function call turn comes immediately after a user turn or "
                            "after a function response turn.")
        pending = [p["functionCall"]["name"] for p in parts
                   if content.get("role") == "model" and isinstance(p.get("functionCall"), dict)]
    return problems


# --- the view responders read -----------------------------------------------------------------------


def tools(body: dict) -> list[dict]:
    out = []
    for tool in body.get("tools") or []:
        for fd in (tool.get("functionDeclarations") or []) if isinstance(tool, dict) else []:
            out.append({"name": fd.get("name"), "description": fd.get("description", ""),
                        "input_schema": fd.get("parametersJsonSchema") or fd.get("parameters")
                        or {"type": "object", "properties": {}}})
    return out


def messages(body: dict) -> list[dict]:
    """The contents as chat-like messages: text turns, function calls as assistant `tool_calls`, function
    responses as `tool` messages (their id is the call's id, else the function name)."""
    out: list[dict] = []
    for content in body.get("contents") or []:
        role = "assistant" if content.get("role") == "model" else "user"
        text = "".join(p.get("text", "") for p in content.get("parts") or [] if not p.get("thought"))
        calls = [p["functionCall"] for p in content.get("parts") or [] if "functionCall" in p]
        results = [p["functionResponse"] for p in content.get("parts") or [] if "functionResponse" in p]
        if calls:
            out.append({"role": "assistant", "content": text or None,
                        "tool_calls": [{"id": c.get("id") or c.get("name"), "name": c.get("name"),
                                        "arguments": c.get("args", {})} for c in calls]})
        elif results:
            out += [{"role": "tool", "tool_call_id": r.get("id") or r.get("name"), "content": _result_text(r)}
                    for r in results]
        else:
            out.append({"role": role, "content": text})
    return out


def _result_text(result: dict) -> str:
    response = result.get("response") or {}
    for key in ("output", "content", "result"):
        if isinstance(response.get(key), str):
            return response[key]
    return json.dumps(response)


def tool_results(body: dict) -> list[dict]:
    return [{"tool_call_id": m["tool_call_id"], "content": m["content"], "is_error": False}
            for m in messages(body) if m["role"] == "tool"]


def system(body: dict) -> str:
    return "".join(p.get("text", "") for p in (body.get("systemInstruction") or {}).get("parts") or [])


# --- answers --------------------------------------------------------------------------------------


def response_body(*, model: str, response_id: str, text: str | None, calls: list[tuple[str, Any]],
                  usage: tuple[int, int], truncated: bool = False) -> dict:
    parts: list[dict] = [{"text": text}] if text else []
    parts += [{"functionCall": {"name": name, "args": args}} for name, args in calls]
    inp, outp = usage
    return {"candidates": [{"content": {"role": "model", "parts": parts or [{"text": ""}]},
                            "finishReason": "MAX_TOKENS" if truncated else "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": inp, "candidatesTokenCount": outp, "totalTokenCount": inp + outp},
            "modelVersion": model, "responseId": response_id}


def gemini_stream(response: dict) -> list[bytes]:
    """`data:` chunks (no event names, as with alt=sse): the text in pieces, each function call whole in
    its own chunk, the finish reason and usage on the last chunk."""
    candidate = response["candidates"][0]
    parts = candidate["content"]["parts"]
    chunks: list[list[dict]] = []
    for part in parts:
        if "text" in part:
            chunks += [[{"text": p}] for p in pieces(part["text"])]
        else:
            chunks.append([part])
    out = []
    for n, chunk_parts in enumerate(chunks):
        last = n == len(chunks) - 1
        body: dict = {"candidates": [{"content": {"role": "model", "parts": chunk_parts}, "index": 0}],
                      "modelVersion": response["modelVersion"], "responseId": response["responseId"]}
        if last:
            body["candidates"][0]["finishReason"] = candidate["finishReason"]
            body["usageMetadata"] = response["usageMetadata"]
        out.append(sse_event(body))
    return out
