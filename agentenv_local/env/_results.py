"""Turning what a tool returns (or raises) into an MCP `tools/call` result, in wire form (a JSON dict).

- a `str` → one text block, `structuredContent: {"result": text}` (the reference's echo:
  `{"content":[{"type":"text","text":"hi"}],"structuredContent":{"result":"hi"},"isError":false}`);
- a dict, a pydantic model or a dataclass → its JSON as text, the object as `structuredContent`;
- a list, number or bool → its JSON as text, `structuredContent: {"result": value}`;
- None → no content;
- an mcp `CallToolResult` or content block(s) → sent as they are;
- `structured_output=False` on the tool → never `structuredContent`.

Nothing here imports mcp: mcp objects are recognised by shape and dumped to their wire form.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from .errors import EnvError

_CONTENT_TYPES = frozenset({"text", "image", "audio", "resource", "resource_link"})


def _is_mcp_model(value: Any, name: str | None = None) -> bool:
    cls = type(value)
    return isinstance(value, BaseModel) and cls.__module__.startswith(("mcp", "mcp_types")) and (
        name is None or cls.__name__ == name)


def _dump_mcp(value: BaseModel) -> dict:
    return value.model_dump(mode="json", by_alias=True, exclude_none=True)


def _is_content_block(value: Any) -> bool:
    return _is_mcp_model(value) and getattr(value, "type", None) in _CONTENT_TYPES


def is_call_tool_result(value: Any) -> bool:
    """An mcp `CallToolResult`, or a dict already in its wire form (`content` list + `isError`)."""
    if _is_mcp_model(value, "CallToolResult"):
        return True
    return isinstance(value, dict) and isinstance(value.get("content"), list) and "isError" in value


def call_result_wire(value: Any) -> dict:
    """An mcp `CallToolResult` (or its wire dict) as a wire dict."""
    if isinstance(value, BaseModel):
        out = _dump_mcp(value)
    else:
        out = dict(value)
    out.setdefault("content", [])
    out["isError"] = bool(out.get("isError", False))
    return out


def text_result(text: str, *, is_error: bool = False, structured: Any = None) -> dict:
    out: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if structured is not None:
        out["structuredContent"] = structured
    out["isError"] = is_error
    return out


def error_result(error: EnvError) -> dict:
    return text_result(f"{error.code}: {error.message}", is_error=True, structured=error.fields())


def failure_result(tool: str, exc: BaseException) -> dict:
    return text_result(f"Error executing tool {tool}: {exc}", is_error=True)


def to_call_result(value: Any, *, structured_output: bool | None = None) -> dict:
    """What a tool returned, as a `tools/call` result in wire form."""
    if is_call_tool_result(value):
        return call_result_wire(value)
    if _is_content_block(value):
        return {"content": [_dump_mcp(value)], "isError": False}
    if isinstance(value, (list, tuple)) and value and all(_is_content_block(v) for v in value):
        return {"content": [_dump_mcp(v) for v in value], "isError": False}
    if value is None:
        return {"content": [], "isError": False}
    if isinstance(value, str):
        text, data = value, value
    else:
        data = to_jsonable_python(value, fallback=str, by_alias=True)
        text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    out: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if structured_output is not False:
        out["structuredContent"] = data if isinstance(data, dict) else {"result": data}
    out["isError"] = False
    return out


def jsonable(value: Any) -> Any:
    """A handler's return value as plain JSON data (None -> {})."""
    if value is None:
        return {}
    return to_jsonable_python(value, fallback=str, by_alias=True)
