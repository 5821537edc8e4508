"""A small JSON path: `$.items[0].name`, `items.0.name`, `$["odd key"]`. Enough to point at one value of a
response; no wildcards or filters (a `regex` check, or a SQL check on the state, covers the rest)."""

from __future__ import annotations

import json
import re
from typing import Any

_TOKEN = re.compile(r"""\.?(?P<name>[A-Za-z_][A-Za-z0-9_-]*)|\[(?P<index>-?\d+)\]|\[(?P<quoted>"(?:[^"\\]|\\.)*")\]"""
                    r"""|\.(?P<digits>\d+)""")

MISSING = object()


class JsonPathError(ValueError):
    pass


def parse(path: str) -> list[str | int]:
    """The keys and indexes of `path`; JsonPathError saying where it stops making sense."""
    text = path.strip()
    if text.startswith("$"):
        text = text[1:]
    steps: list[str | int] = []
    at = 0
    while at < len(text):
        m = _TOKEN.match(text, at)
        if not m or m.end() == at:
            raise JsonPathError(f"{path!r} is not a JSON path at {text[at:]!r} (write $.key, $.list[0], $[\"a key\"])")
        if m.group("name") is not None:
            steps.append(m.group("name"))
        elif m.group("index") is not None:
            steps.append(int(m.group("index")))
        elif m.group("digits") is not None:
            steps.append(int(m.group("digits")))
        else:
            steps.append(json.loads(m.group("quoted")))
        at = m.end()
    return steps


def find(document: Any, steps: list[str | int]) -> Any:
    """The value at `steps`, or MISSING."""
    node = document
    for step in steps:
        if isinstance(step, int) and isinstance(node, list) and -len(node) <= step < len(node):
            node = node[step]
        elif isinstance(step, str) and isinstance(node, dict) and step in node:
            node = node[step]
        elif isinstance(step, int) and isinstance(node, dict) and str(step) in node:
            node = node[str(step)]
        else:
            return MISSING
    return node
