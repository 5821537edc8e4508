"""The differences between two run views (record.run_view): where, what (the path inside), each side's value."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

SECTIONS = ("status", "score", "tool_calls", "env_calls", "triggers", "env_state", "env_changes", "env_end_state",
            "criteria")
# compared only when both runs hold it: a run recorded without it (the envs' changelogs and `/state` at the
# episode's end, which runs capture since they were added) is not a difference
BOTH_OR_NEITHER = ("env_changes", "env_end_state")


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


def _wall_clock_stamp(what: str, a: Any, b: Any) -> bool:
    """A change row's `virtual_time` that only one run has: the other's env was on the wall clock (unarmed, its
    rows carry no virtual time), as a recorded run's is where the replay freezes the clock to date writes alike;
    what the env wrote with that time is compared in the row itself."""
    return what == "virtual_time" and _MISSING in (a, b)


_STAMP = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?")
_SLACK_S = 1.0  # a stamp cut to the second, read just before a run's recorded start or after its end


def _stamp(value: Any) -> float | None:
    """`value` as epoch seconds when it is an ISO-8601 date and time (UTC when it names no zone), else None."""
    if not isinstance(value, str) or not _STAMP.fullmatch(value):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def wall_clock_reading(a: Any, b: Any, spans: list[tuple[float, float]]) -> bool:
    """Whether two differing values are each a date and time within the wall-clock span of one of the runs
    compared (`spans`: each run's start to end): an env on the wall clock dated something when it ran. Between
    two runs that each read their own clock (or a recording and a replay that froze the clock, the recording
    holding no time per call) it is the time, not the env's behaviour, that differs."""
    moments = [_stamp(a), _stamp(b)]
    return all(m is not None and any(lo - _SLACK_S <= m <= hi + _SLACK_S for lo, hi in spans) for m in moments)


def scheduled(view: dict[str, Any]) -> bool:
    """Whether the view is of a replay that set its envs' clocks to each recorded call's time (mode `schedule`)."""
    clocks = view.get("replay_clocks") or {}
    return bool(clocks) and all(c.get("mode") == "schedule" for c in clocks.values())


def differences(a: dict[str, Any], b: dict[str, Any], notes: list[str] | None = None) -> list[Difference]:
    """What differs between two views, in section order (status, score, tool calls, env calls, triggers,
    env state, env changelogs, env `/state`, criteria), each keyed entry compared down to where it differs.
    A wall-clock reading on both sides (wall_clock_reading) is not a difference: it goes to `notes`, if given;
    unless one side is a replay that gave each call its recorded time (scheduled): every date is compared."""
    spans = [] if scheduled(a) or scheduled(b) else [
        (float(v["wall_span"][0]), float(v["wall_span"][1])) for v in (a, b)
        if isinstance(v.get("wall_span"), (list, tuple)) and len(v["wall_span"]) == 2]
    found: list[Difference] = []
    for section in SECTIONS:
        left, right = a.get(section), b.get(section)
        if section in BOTH_OR_NEITHER and (left is None or right is None):
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
            for what, va, vb in leaves:
                if section == "env_changes" and _wall_clock_stamp(what, va, vb):
                    continue
                if spans and wall_clock_reading(va, vb, spans):
                    if notes is not None:
                        notes.append(f"{where}: {what}: dated by the env's wall clock ({_short(va)} | {_short(vb)}): "
                                     "each run read its own (a replay sets it per call only from a recording that "
                                     "holds each call's time): not counted as a difference")
                    continue
                found.append(Difference(where, what, va, vb))
    return found
