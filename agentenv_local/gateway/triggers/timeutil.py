"""Time helpers for the trigger engine: durations, RFC3339 marks, and executor working hours.

Durations and RFC3339 parsing are the gateway's own (``agentenv_local.gateway.durations`` and
``agentenv_local.gateway.clock``), imported lazily so that importing the trigger engine stays cheap.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_MAX_TIME = datetime.max.replace(tzinfo=UTC)
_MIN_TIME = datetime.min.replace(tzinfo=UTC)

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
HHMM = re.compile(r"([01]\d|2[0-3]):([0-5]\d)")
UTC_OFFSET = re.compile(r"([+-])([01]\d|2[0-3]):([0-5]\d)")


def duration_seconds(value: Any) -> float:
    """Seconds in an ISO-8601 duration (``PT2H`` -> 7200.0); ``ValueError`` with the reason otherwise."""
    from agentenv_local.gateway.durations import parse_duration

    return parse_duration(value)


def parse_instant(value: Any) -> datetime:
    """An RFC3339 timestamp as an aware UTC datetime; ``ValueError`` with the reason otherwise."""
    from agentenv_local.gateway.clock import parse_rfc3339

    return parse_rfc3339(value)


def iso(moment: datetime) -> str:
    """RFC3339 in UTC with a ``Z`` (a fraction only when there is one)."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def wall_now() -> datetime:
    return datetime.now(UTC)


def shift(moment: datetime, seconds: float) -> datetime:
    """``moment + seconds``, held at datetime's min/max instead of raising."""
    try:
        return moment + timedelta(seconds=seconds)
    except OverflowError:
        return _MAX_TIME if seconds > 0 else _MIN_TIME


def mark_spec(value: Any) -> tuple[str, Any]:
    """``("rel", seconds)`` for a duration counted from the clock's t0 (a string starting with
    ``P``), else ``("abs", datetime)`` for an RFC3339 instant. ``ValueError`` when it is neither."""
    if isinstance(value, str) and value.startswith("P"):
        return "rel", duration_seconds(value)
    return "abs", parse_instant(value)


def resolve_mark(value: Any, t0: datetime) -> datetime:
    kind, parsed = mark_spec(value)
    return parsed if kind == "abs" else shift(t0, parsed)


# -- executor working hours ------------------------------------------------------------------------


def zone_named(name: Any) -> ZoneInfo | None:
    if not isinstance(name, str) or not name:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None


def hours_zone(hours: dict) -> tzinfo:
    if "time_zone" in hours:
        zone = zone_named(hours["time_zone"])
        assert zone is not None
        return zone
    match = UTC_OFFSET.fullmatch(hours["utc_offset"])
    assert match is not None  # normalize_executor checked the offset at registration
    sign, hh, mm = match.groups()
    offset = timedelta(hours=int(hh), minutes=int(mm))
    return timezone(offset if sign == "+" else -offset)


def _minutes(hhmm: str) -> int:
    hh, mm = hhmm.split(":")
    return int(hh) * 60 + int(mm)


def next_opening(now: datetime, hours: dict) -> datetime | None:
    """None when ``now`` falls inside the working hours, else the instant they next open.

    A window opens on each listed day at ``start`` local time and lasts until ``end``, running past
    midnight when ``end`` is earlier than ``start`` (a window that opens on a listed day may close on
    an unlisted one). Local times are turned into instants with the zone's rules for that day, so a
    window keeps its local hours across a daylight-saving change.
    """
    zone = hours_zone(hours)
    start = _minutes(hours["start"])
    length = timedelta(minutes=(_minutes(hours["end"]) - start) % (24 * 60))
    today: date = now.astimezone(zone).date()
    # Yesterday's window may still be open; a listed day comes within a week.
    for ahead in range(-1, 9):
        day = today + timedelta(days=ahead)
        if DAYS[day.weekday()] not in hours["days"]:
            continue
        opens_local = datetime.combine(day, time(start // 60, start % 60), zone)
        opens = opens_local.astimezone(UTC)
        closes = (opens_local + length).astimezone(UTC)
        if closes <= opens:
            continue
        if opens <= now < closes:
            return None
        if opens > now:
            return opens
    return None  # unreachable with at least one listed day
