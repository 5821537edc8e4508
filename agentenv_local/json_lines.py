"""One JSON object per line, as the hub's socket and the hub <-> worker link carry them (hub/wire.py,
executors/link.py): bytes travel as {"__b64__": "..."}, objects with `to_wire()` (a Query, RunOptions) as its
dict, sets and tuples as lists."""

from __future__ import annotations

import base64
import json
from typing import Any


def _default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return {"__b64__": base64.b64encode(value).decode("ascii")}
    if hasattr(value, "to_wire"):
        return value.to_wire()
    if isinstance(value, (set, tuple)):
        return list(value)
    return str(value)


def _hook(obj: dict) -> Any:
    if len(obj) == 1 and "__b64__" in obj:
        return base64.b64decode(obj["__b64__"])
    return obj


def encode(message: dict) -> bytes:
    return json.dumps(message, default=_default, separators=(",", ":")).encode() + b"\n"


def decode(line: bytes) -> dict:
    return json.loads(line, object_hook=_hook)
