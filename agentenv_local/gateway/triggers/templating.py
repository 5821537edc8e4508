"""``${...}`` placeholders in tool-action and check-step arguments.

- ``${args.<path>}`` / ``${result.<path>}`` read the provoking call (action triggers only);
  ``${args}`` / ``${result}`` are the whole arguments / parsed result.
- ``${name}`` reads a value an earlier check step bound with ``bind``.
- A string that is exactly one ``${args.*}`` / ``${result.*}`` placeholder becomes the raw value (a
  number stays a number); a bound name is sent as text (JSON for an object or list), as the
  reference does. A placeholder inside longer text is replaced by the value's text.
- ``${x?}`` is optional: unresolved, a whole-value placeholder drops its key (or list element), so
  the target tool applies its own default; inside text it becomes "".
- An unresolved required ``${args.*}`` / ``${result.*}`` fails the action (:class:`TemplateError`):
  the tool never receives the literal placeholder. An unresolved bare name stays as written.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .predicates import ctx_root, path_error, resolve

VAR = re.compile(r"\$\{([\w.\[\]*]+\??)\}")
# Anything placeholder-shaped, to find the ones VAR would not resolve (and would send verbatim).
LOOSE = re.compile(r"\$\{[^{}]*\}?")

_DROP = object()


class TemplateError(LookupError):
    """A required ``${args.*}`` / ``${result.*}`` placeholder had no value in the provoking call."""


def _lookup(name: str, bindings: dict, ctx: dict | None) -> tuple[bool, Any]:
    name = name.rstrip("?")
    if name in bindings:
        return True, bindings[name]
    root, path = ctx_root(name)
    if root is None or ctx is None:
        return False, None
    base = ctx.get(root)
    if not path:
        return base is not None, base
    value = resolve(base, path) if isinstance(base, dict) else None
    return value is not None, value


def _resolve(name: str, literal: str, bindings: dict, ctx: dict | None) -> tuple[bool, Any]:
    found, value = _lookup(name, bindings, ctx)
    if not found and not name.endswith("?") and ctx_root(name)[0] is not None:
        raise TemplateError(f"unresolved placeholder {literal}")
    return found, value


def render(value: Any, bindings: dict | None = None, ctx: dict | None = None) -> Any:
    """``value`` with its placeholders substituted, recursively through objects and lists."""
    bindings = bindings or {}

    def sub(item: Any) -> Any:
        if isinstance(item, dict):
            out = {}
            for key, inner in item.items():
                rendered = sub(inner)
                if rendered is not _DROP:
                    out[key] = rendered
            return out
        if isinstance(item, list):
            return [r for r in (sub(inner) for inner in item) if r is not _DROP]
        if not isinstance(item, str):
            return item
        whole = VAR.fullmatch(item)
        if whole is not None:
            name = whole.group(1)
            found, resolved = _resolve(name, item, bindings, ctx)
            if not found:
                return _DROP if name.endswith("?") else item
            if name.rstrip("?") in bindings:
                # A bound value is sent as text, the way the reference sends it.
                return resolved if isinstance(resolved, str) else (
                    json.dumps(resolved, default=str) if isinstance(resolved, (dict, list)) else str(resolved))
            return list(resolved) if isinstance(resolved, list) else resolved

        def replace(m: re.Match) -> str:
            found, resolved = _resolve(m.group(1), m.group(0), bindings, ctx)
            if not found:
                return "" if m.group(1).endswith("?") else m.group(0)
            return resolved if isinstance(resolved, str) else json.dumps(resolved, default=str)

        return VAR.sub(replace, item)

    out = sub(value)
    return value if out is _DROP else out


def _strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for inner in value.values() for s in _strings(inner)]
    if isinstance(value, list):
        return [s for inner in value for s in _strings(inner)]
    return [value] if isinstance(value, str) else []


def placeholder_error(value: Any, roots: tuple[str, ...]) -> str | None:
    """Why the placeholders in ``value`` can't work on a trigger whose provoking call carries
    ``roots`` (``("args", "result")`` on action triggers, none elsewhere), or None."""
    strings = _strings(value)
    for text in strings:
        for token in LOOSE.findall(text):
            if VAR.fullmatch(token) is None:
                return (f"{token!r} is not a placeholder the engine can resolve; "
                        "expected ${args.<path>}, ${result.<path>} or ${<check binding>}")
    for text in strings:
        for raw in VAR.findall(text):
            name = raw.rstrip("?")
            root, path = ctx_root(name)
            if root is None:
                if re.fullmatch(r"\w+", name) is None:
                    return f"placeholder ${{{name}}} must be a check binding name or an args./result. path"
            elif not roots:
                return (f"${{{name}}} needs a provoking tool call; only action triggers carry args/result "
                        "(website triggers carry args)")
            elif root not in roots:
                return f"${{{name}}} reads a result; a website request carries args, not a result"
            elif path:
                problem = path_error(path)
                if problem:
                    return problem
            elif "." in name:
                return f"placeholder ${{{name}}} has an empty path"
    return None


def reaches_for_call(text: str) -> str | None:
    """The first placeholder-shaped token in ``text`` that reads the provoking call (whitespace
    aside), for nl instructions, which are never templated; None when there is none."""
    for token in LOOSE.findall(text):
        compact = re.sub(r"\s+", "", token)
        if any(compact.startswith("${" + root + ".") for root in ("args", "result")):
            return token
    return None
