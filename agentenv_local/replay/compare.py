"""The differences between two run views (record.run_view), leaf by leaf: where, what, each side's value."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SECTIONS = ("status", "score", "tool_calls", "env_calls", "triggers", "criteria")


@dataclass(frozen=True)
class Difference:
    where: str  # e.g. "step chat (agent solver) turn 2 tool call 2"
    what: str   # the leaf path inside it, e.g. "result.deal.stage"
    a: Any
    b: Any

    @property
    def key(self) -> tuple[str, str]:
        return (self.where, self.what)

    def to_json(self) -> dict[str, Any]:
        return {"where": self.where, "what": self.what, "a": self.a, "b": self.b}


_MISSING = "(absent)"


def _leaves(value: Any, path: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_leaves(item, f"{path}.{key}" if path else str(key)))
        return out
    if isinstance(value, list) and value:
        out = {}
        for index, item in enumerate(value):
            out.update(_leaves(item, f"{path}.{index}" if path else str(index)))
        return out
    return {path or "value": value}


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[Difference]:
    """What differs between two views, in section order (status, score, tool calls, env calls, triggers,
    criteria), each keyed entry compared leaf by leaf."""
    found: list[Difference] = []
    for section in SECTIONS:
        left, right = a.get(section), b.get(section)
        if not isinstance(left, dict) or not isinstance(right, dict):
            if left != right:
                found.append(Difference(section, "value", left, right))
            continue
        for where in [*left, *(k for k in right if k not in left)]:
            if where not in left or where not in right:
                found.append(Difference(where, "call" if "call" in where else "value",
                                        "present" if where in left else _MISSING,
                                        "present" if where in right else _MISSING))
                continue
            la, lb = _leaves(left[where]), _leaves(right[where])
            for leaf in [*la, *(k for k in lb if k not in la)]:
                va, vb = la.get(leaf, _MISSING), lb.get(leaf, _MISSING)
                if va != vb:
                    found.append(Difference(where, leaf, va, vb))
    return found
