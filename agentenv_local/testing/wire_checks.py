"""Request checks both chat wire formats share (sampling ranges, tool JSON schemas)."""

from __future__ import annotations

import re
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


def count_tokens(text: str) -> int:
    """A rough token count (4 characters a token): enough for usage figures."""
    return max(1, len(text) // 4) if text else 0
