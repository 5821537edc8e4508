"""ISO-8601 durations (``PT2H30M``, ``P1D``, ``PT0.5S``) as seconds, for the clock and triggers.

The grammar is the one the reference's gateway accepts, so a trigger spec written for it parses
here: ``P[nW][nD][T[nH][nM][n[.f]S]]``. Weeks, days, hours and minutes are whole numbers; only the
seconds may carry a fraction. Years and months are refused on purpose: they are not a fixed span.
Input is strict (no whitespace, no sign, upper case only) and every refusal says what was wrong.
"""

from __future__ import annotations

import re
from datetime import timedelta

__all__ = ["DurationError", "parse_duration", "parse_timedelta"]

_EXAMPLES = "expected e.g. 'PT24H', 'P1DT6H', 'PT30M'"

_GRAMMAR = re.compile(
    r"P"
    r"(?:(?P<weeks>\d+)W)?"
    r"(?:(?P<days>\d+)D)?"
    r"(?:T"
    r"(?:(?P<hours>\d+)H)?"
    r"(?:(?P<minutes>\d+)M)?"
    r"(?:(?P<seconds>\d+(?:\.\d+)?)S)?"
    r")?",
    re.ASCII,
)

_UNIT_SECONDS = {"weeks": 604800, "days": 86400, "hours": 3600, "minutes": 60}
_MAX_SECONDS = timedelta.max.total_seconds()


class DurationError(ValueError):
    """A duration string that is not a valid ISO-8601 duration (an HTTP 400 where it arrives)."""

    status = 400

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def _why(text: str) -> str:
    """The most useful reason a string that failed the grammar is not a duration."""
    if text != text.strip():
        return "remove the surrounding whitespace"
    if text.startswith(("-", "+")):
        return "a duration cannot carry a sign"
    if any(c.isalpha() and c.islower() for c in text):
        return "unit letters must be upper case (P, W, D, T, H, M, S)"
    if not text.startswith("P"):
        return f"a duration starts with 'P'; {_EXAMPLES}"
    date_part = text[1:].partition("T")[0]
    if "Y" in date_part or "M" in date_part:
        return "years and months are not supported (they are not a fixed span); use weeks or days"
    if any(u in date_part for u in "HS"):
        return "hours, minutes and seconds go after 'T' (e.g. 'PT2H', 'P1DT30M')"
    if "," in text:
        return "write a fraction with '.', not ','"
    if re.search(r"(?<![0-9])\.|\.(?![0-9])", text):
        return "a fraction needs digits on both sides of the '.' (e.g. 'PT0.5S')"
    if "." in text:
        return "only the seconds may have a fraction (e.g. 'PT0.5S', 'PT90M' rather than 'PT1.5H')"
    return _EXAMPLES


def parse_duration(text: object) -> float:
    """Seconds in an ISO-8601 duration: ``parse_duration("PT2H30M") == 9000.0``.

    Raises :class:`DurationError` naming the problem for anything else.
    """
    if not isinstance(text, str):
        raise DurationError(f"duration must be an ISO-8601 string, got {type(text).__name__}")
    match = _GRAMMAR.fullmatch(text)
    if match is None:
        raise DurationError(f"invalid ISO-8601 duration {text!r}: {_why(text)}")
    parts = match.groupdict()
    if all(v is None for v in parts.values()):
        raise DurationError(f"invalid ISO-8601 duration {text!r}: it names no amount; {_EXAMPLES}")
    total = float(parts["seconds"] or 0)
    for unit, factor in _UNIT_SECONDS.items():
        if parts[unit] is not None:
            total += int(parts[unit]) * factor
    if total > _MAX_SECONDS:
        raise DurationError(f"invalid ISO-8601 duration {text!r}: out of representable range")
    return total


def parse_timedelta(text: object) -> timedelta:
    """:func:`parse_duration` as a ``timedelta``."""
    return timedelta(seconds=parse_duration(text))
