"""JSON helpers shared by the stores: compact dumps that keep non-ASCII readable."""

from __future__ import annotations

import json
from typing import Any


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)
