"""Predicates, dotted paths and ``extract`` for trigger specs.

A predicate is an object with exactly one of ``regex`` (searched in the value's text; JSON for a
non-string), ``equals`` (JSON equality) or ``exists`` (a boolean: is the value there and non-empty).

A path is dotted keys, each optionally followed by indices: ``result.items[0].id``. ``[*]`` fans out
over a list: a predicate on ``result.items[*].status`` holds when it holds for any element (and
``exists: false`` when no element has a non-empty value); read as a value (a template, a bind, an
extract), a fanned-out path is the list of what it reached.
"""

from __future__ import annotations

import json
import re
from typing import Any

PREDICATE_KEYS = ("regex", "equals", "exists")
CTX_ROOTS = ("args", "result")

_SEGMENT = re.compile(r"(\w+)((?:\[(?:\d+|\*)\])*)")
_INDEX = re.compile(r"\[(\d+|\*)\]")


class PathError(ValueError):
    """A path whose syntax the engine can't read."""


class Many(list):
    """The values a ``[*]`` path reached; a predicate holds on it when it holds on any of them."""


def parse_path(path: str) -> list[tuple[str, list[int | None]]]:
    """``"a.b[0][*]"`` -> ``[("a", []), ("b", [0, None])]`` (None is ``[*]``)."""
    if not isinstance(path, str) or not path:
        raise PathError(f"invalid path {path!r}")
    parsed = []
    for segment in path.split("."):
        m = _SEGMENT.fullmatch(segment)
        if m is None:
            raise PathError(f"invalid path segment {segment!r}")
        indices = [None if i == "*" else int(i) for i in _INDEX.findall(m.group(2))]
        parsed.append((m.group(1), indices))
    return parsed


def path_error(path: str) -> str | None:
    """Why ``path`` can't be read (the offending segment), or None when it can."""
    for segment in path.split("."):
        if _SEGMENT.fullmatch(segment) is None:
            return f"invalid path segment {segment!r} in {path!r}"
    return None


def resolve(data: Any, path: str) -> Any:
    """The value at ``path`` in ``data`` (None when absent); a :class:`Many` when the path fans out."""
    values = [data]
    fanned = False
    for key, indices in parse_path(path):
        nxt = []
        for value in values:
            if isinstance(value, dict) and key in value:
                nxt.append(value[key])
        values = nxt
        for index in indices:
            nxt = []
            for value in values:
                if not isinstance(value, list):
                    continue
                if index is None:
                    nxt.extend(value)
                elif index < len(value):
                    nxt.append(value[index])
            if index is None:
                fanned = True
            values = nxt
    if fanned:
        return Many(values)
    return values[0] if values else None


def as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def is_empty(value: Any) -> bool:
    return value is None or value == "" or value == []


def _holds_one(pred: dict, value: Any) -> bool:
    if "regex" in pred:
        return re.search(pred["regex"], as_text(value)) is not None
    if "equals" in pred:
        return value == pred["equals"]
    return (not is_empty(value)) == pred["exists"]


def holds(pred: dict, value: Any) -> bool:
    """Whether ``pred`` holds for ``value`` (any element of a :class:`Many`)."""
    if isinstance(value, Many):
        if "exists" in pred:
            present = any(not is_empty(v) for v in value)
            return present == pred["exists"]
        return any(_holds_one(pred, v) for v in value)
    return _holds_one(pred, value)


def predicate_error(pred: Any) -> str | None:
    """Why ``pred`` is not a predicate, or None."""
    if not isinstance(pred, dict) or sum(k in pred for k in PREDICATE_KEYS) != 1:
        return f"predicate must have exactly one of {PREDICATE_KEYS}"
    if "regex" in pred:
        if not isinstance(pred["regex"], str):
            return "invalid regex: a regex must be a string"
        try:
            re.compile(pred["regex"])
        except re.error as exc:
            return f"invalid regex: {exc}"
    if "exists" in pred and not isinstance(pred["exists"], bool):
        return "exists must be a boolean"
    return None


def ctx_root(name: str) -> tuple[str | None, str]:
    """``("args", "x.y")`` for ``args.x.y``; ``(None, "")`` for anything not rooted at args/result."""
    head, _, rest = name.partition(".")
    head_key = _SEGMENT.fullmatch(head)
    if head_key is not None and head_key.group(1) in CTX_ROOTS and not head_key.group(2):
        return head, rest
    return None, ""


def where_value(ctx: dict, field: str) -> Any:
    """What a ``where`` key reads: ``args.<path>`` / ``result.<path>``; a bare key is a top-level argument."""
    root, path = ctx_root(field)
    if root is not None:
        base = ctx.get(root)
        if not path:
            return base
        return resolve(base, path) if isinstance(base, dict) else None
    args = ctx.get("args")
    return args.get(field) if isinstance(args, dict) else None


def where_holds(where: dict, ctx: dict) -> bool:
    return all(holds(pred, where_value(ctx, field)) for field, pred in where.items())


def extract(spec: Any, data: Any, raw_text: str) -> Any:
    """A check step's value: the raw text without ``extract``; the value at a path; or, for
    ``{path, match, take}``, the first element of the list at ``path`` whose ``match`` predicates
    hold (``take`` picks one of its fields)."""
    if spec is None:
        return raw_text
    if isinstance(spec, str):
        return resolve(data, spec)
    items = resolve(data, spec["path"])
    if not isinstance(items, list):
        return None
    match = spec.get("match") or {}
    for item in items:
        if not isinstance(item, dict):
            continue
        if all(holds(pred, resolve(item, field) if "." in field or "[" in field else item.get(field))
               for field, pred in match.items()):
            take = spec.get("take")
            return resolve(item, take) if take else item
    return None
