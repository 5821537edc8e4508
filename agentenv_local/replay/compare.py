"""The differences between two run views (record.run_view): where, what (the path inside), each side's value."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

SECTIONS = ("status", "score", "tool_calls", "env_calls", "triggers", "env_state", "env_changes", "criteria")
# compared only when both runs hold it: a run recorded without it (the envs' changelogs at the episode's end,
# which only replays capture) is not a difference
BOTH_OR_NEITHER = ("env_changes",)


@dataclass(frozen=True)
class Difference:
    where: str  # e.g. "step chat (agent solver) turn 2 tool call 2"
    what: str   # the path inside it, e.g. "result.deal.stage"
    a: Any
    b: Any

    @property
    def key(self) -> tuple[str, str]:
        return (self.where, self.what)

    def text(self, a_label: str, b_label: str) -> str:
        """One line: where (and what, inside it), then each side's value, cut short."""
        head = self.where if self.what == "value" else f"{self.where}: {self.what}"
        return f"{head}: {a_label} {_short(self.a)} | {b_label} {_short(self.b)}"

    def to_json(self) -> dict[str, Any]:
        return {"where": self.where, "what": self.what, "a": self.a, "b": self.b}


_MISSING = "(absent)"


def _short(value: Any) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= 120 else text[:117] + "..."


def _diff(a: Any, b: Any, path: str, out: list[tuple[str, Any, Any]]) -> None:
    """Where `a` and `b` differ: objects key by key and lists of one length item by item; anything else (a value,
    a type change, lists of other lengths) at the path where it differs, as one difference."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in [*a, *(k for k in b if k not in a)]:
            _diff(a.get(key, _MISSING), b.get(key, _MISSING), f"{path}.{key}" if path else str(key), out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            _diff(x, y, f"{path}.{index}" if path else str(index), out)
    elif a != b:
        out.append((path or "value", a, b))


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[Difference]:
    """What differs between two views, in section order (status, score, tool calls, env calls, triggers,
    env state, env changelogs, criteria), each keyed entry compared down to where it differs."""
    found: list[Difference] = []
    for section in SECTIONS:
        left, right = a.get(section), b.get(section)
        if section in BOTH_OR_NEITHER and (not left or not right):
            continue
        if not isinstance(left, dict) or not isinstance(right, dict):
            if left != right:
                found.append(Difference(section, "value", left, right))
            continue
        for where in [*left, *(k for k in right if k not in left)]:
            if where not in left or where not in right:
                found.append(Difference(where, "value", left.get(where, _MISSING), right.get(where, _MISSING)))
                continue
            leaves: list[tuple[str, Any, Any]] = []
            _diff(left[where], right[where], "", leaves)
            found.extend(Difference(where, what, va, vb) for what, va, vb in leaves)
    return found
