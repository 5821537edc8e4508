"""Reading MCP tool results (dicts or the mcp types) and echoing action arguments without payloads."""

from __future__ import annotations

import json
import re
from typing import Any

# Trajectory-safe echo of a tool action's arguments: identifier and metadata keys pass through,
# every other value becomes the shape of what it was.
_ECHO_KEYS = frozenset({"action", "createdTime", "fileName", "kind", "mimeType", "modifiedTime", "name", "role",
                        "title", "type"})
_ECHO_ID = re.compile(r"(?:^id|Id|_id)$")
_ECHO_VALUE_MAX = 200


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def result_is_error(result: Any) -> bool:
    return bool(_get(result, "isError", False))


def result_text(result: Any) -> str:
    parts = []
    for item in _get(result, "content", None) or []:
        if _get(item, "type") == "text":
            parts.append(_get(item, "text", "") or "")
    return "\n".join(parts)


def _parse_json(text: str) -> tuple[bool, Any]:
    if not text:
        return False, None
    try:
        return True, json.loads(text)
    except (ValueError, TypeError):
        return False, None


def result_data(result: Any) -> Any:
    """What a check step's ``extract`` path reads: the text content parsed as JSON, else the
    structured content, else None."""
    ok, data = _parse_json(result_text(result))
    return data if ok else _get(result, "structuredContent", None)


def call_value(result: Any) -> Any:
    """What ``result.*`` reads on a provoking call: the text content parsed as JSON, the raw text
    when it isn't JSON, the structured content when there is no text."""
    text = result_text(result)
    ok, data = _parse_json(text)
    if ok:
        return data
    if text:
        return text
    return _get(result, "structuredContent", None)


def _shape(value: Any) -> dict:
    shape: dict[str, Any] = {"type": type(value).__name__}
    if isinstance(value, (str, bytes, list, dict)):
        shape["len"] = len(value)
    return {"redacted": shape}


def echo_args(value: Any, key: str | None = None) -> Any:
    """``value`` with every payload replaced by its shape (``{"redacted": {"type": "str", "len": 12}}``);
    identifier and metadata keys (``id``, ``*_id``, ``name``, ``title``, ...) pass through so a
    reader can see which object an action touched. Structure and argument names are kept."""
    if isinstance(value, dict):
        return {k: echo_args(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [echo_args(v, key) for v in value]
    echoable = key is not None and (key in _ECHO_KEYS or _ECHO_ID.search(key) is not None)
    if echoable and isinstance(value, (str, int, float, bool, type(None))):
        if isinstance(value, str) and len(value) > _ECHO_VALUE_MAX:
            return _shape(value)
        return value
    return _shape(value)
