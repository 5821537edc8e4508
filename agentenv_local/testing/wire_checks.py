"""Request checks the model wire formats share (sampling ranges, token limits, tool lists, tool JSON schemas)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

OPENAI_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}\Z")
ANTHROPIC_NAME = re.compile(r"^[A-Za-z0-9_-]{1,128}\Z")


def is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_sampling(body: dict, problems: list[str], *, temp_max: float) -> None:
    if "temperature" in body and body["temperature"] is not None:
        t = body["temperature"]
        if not is_num(t) or not 0 <= t <= temp_max:
            problems.append(f"temperature: must be a number from 0 to {temp_max:g}, got {t!r}")
    top_p = body.get("top_p")
    if top_p is not None and (not is_num(top_p) or not 0 <= top_p <= 1):
        problems.append(f"top_p: must be a number from 0 to 1, got {body['top_p']!r}")


def check_schema(schema: Any, where: str, problems: list[str]) -> None:
    if not isinstance(schema, dict):
        problems.append(f"{where}: must be a JSON Schema object")
    elif schema.get("type") != "object":
        problems.append(f"{where}: the schema must have \"type\": \"object\", got {schema.get('type')!r}")
    elif "properties" in schema and not isinstance(schema["properties"], dict):
        problems.append(f"{where}.properties: must be an object")
    elif "required" in schema and not (isinstance(schema["required"], list)
                                       and all(isinstance(r, str) for r in schema["required"])):
        problems.append(f"{where}.required: must be a list of strings")


def check_min_int(value: Any, key: str, minimum: int, problems: list[str]) -> None:
    """A token limit: an integer (not a bool) of at least `minimum`; None is for the caller to judge."""
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < minimum):
        problems.append(f"{key}: must be an integer >= {minimum}, got {value!r}")


ToolCheck = Callable[[Any, str, list[str], list[str]], None]


def check_tools(body: dict, problems: list[str], check_tool: ToolCheck, *, where: str, unique: str) -> list[str]:
    """body["tools"] when given: a list whose items check_tool(tool, where.format(i), problems, names) checks
    (adding each valid name to names), the names unique (else `tools: <unique>`). Returns the names."""
    names: list[str] = []
    tools = body.get("tools")
    if tools is None:
        return names
    if not isinstance(tools, list):
        problems.append("tools: must be a list")
        tools = []
    for i, tool in enumerate(tools):
        check_tool(tool, where.format(i), problems, names)
    if len(set(names)) != len(names):
        problems.append(f"tools: {unique}")
    return names


def count_tokens(text: str) -> int:
    """A rough token count (4 characters a token): enough for usage figures."""
    return max(1, len(text) // 4) if text else 0
