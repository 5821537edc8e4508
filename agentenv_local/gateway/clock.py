"""The gateway's virtual clock (``urn:agentenv:clock/v1``).

Off until armed. Four modes:

- ``wall`` (the reference's model): virtual now = t0 + real time elapsed since arming x rate, with the
  rate in 0..86400 virtual seconds per real second (0 holds the clock still). It runs on its own.
- ``frozen``: never moves unless :meth:`VirtualClock.advance` moves it or it is armed again.
- ``stepped``: moves only by :meth:`VirtualClock.advance`, or by ``step_seconds`` each time
  :meth:`VirtualClock.tick_tool_call` is called (the gateway calls it once per proxied tool call), so
  a run with a scripted agent sees the same times every time.
- ``schedule`` (what ``agentenv replay`` arms): armed with a list of times, one per tool call; each
  :meth:`VirtualClock.tick_tool_call` moves the clock to the next one, so every call of a replayed
  episode is stamped with the time its recorded call had. When the list runs out the clock holds its
  last time and counts the calls past it (``schedule_overrun`` in the state).

Reads never move the clock. Real time comes from an injectable source (``real_time``), the way
Textual injects its clock, so tests drive the clock with a fake. The bodies and messages of the REST
calls (``PUT /clock/set-time``, ``POST /clock/clear``, ``GET /clock/time``, ``GET /clock/state``) and
of the ``get_time`` tool are the reference gateway's, so its clients work unchanged.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .durations import DurationError, parse_duration
from .errors import GatewayError

__all__ = [
    "CLOCK_EXTENSION_URI",
    "GET_TIME_TOOL",
    "GET_TIME_TOOL_NAME",
    "MAX_RATE",
    "MODES",
    "RFC3339_SHAPE",
    "ClockError",
    "VirtualClock",
    "format_rfc3339",
    "monotonic_wall",
    "parse_rfc3339",
    "wall_timestamp",
]

CLOCK_EXTENSION_URI = "urn:agentenv:clock/v1"
MODES = ("wall", "frozen", "stepped", "schedule")
MAX_SCHEDULE = 100_000  # times a schedule may hold (a replayed episode's tool calls)
MAX_RATE = 86400.0  # one real second = one virtual day
RFC3339_SHAPE = "YYYY-MM-DDThh:mm:ss[.fff](Z|+hh:mm)"
NOT_ARMED = "clock not armed"

# An arm whose t0 would run past datetime's max within one real day at its rate is refused up front;
# a clock that lives longer than that saturates at the max instead of failing reads.
_OVERFLOW_HORIZON_S = 86400.0
_MAX_TIME = datetime.max.replace(tzinfo=UTC)
_MIN_TIME = datetime.min.replace(tzinfo=UTC)
_STATE_VERSION = 1


class ClockError(GatewayError):
    """A clock request that cannot be served; ``status`` is the HTTP status the gateway answers with."""


# -- time sources and RFC3339 ---------------------------------------------------------------------


class _MonotonicWall:
    """Epoch seconds that never go backwards within the process: the wall time at creation plus
    monotonic time since. Epoch-based so a stored clock can be resumed by another process."""

    __slots__ = ("_epoch", "_start")

    def __init__(self) -> None:
        self._epoch = time.time()
        self._start = time.monotonic()

    def __call__(self) -> float:
        return self._epoch + (time.monotonic() - self._start)


def monotonic_wall() -> Callable[[], float]:
    """The default real-time source of a :class:`VirtualClock`."""
    return _MonotonicWall()


_RFC3339 = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})"
    r"[Tt ]"
    r"(?P<hour>\d{2}):(?P<minute>\d{2}):(?P<second>\d{2})"  # seconds are mandatory
    r"(?:\.(?P<fraction>\d+))?"
    r"(?:(?P<utc>[Zz])|(?P<sign>[+-])(?P<off_h>\d{2}):(?P<off_m>\d{2}))",
    re.ASCII,
)


def parse_rfc3339(text: object, field: str = "virtual_time") -> datetime:
    """An RFC3339 timestamp as an aware UTC datetime, or :class:`ClockError` (400).

    Strict: seconds are mandatory, the offset is ``Z`` or ``±hh:mm``, the fraction is optional.
    ``field`` names the value in messages.
    """
    if not isinstance(text, str):
        raise ClockError(f"{field} must be an RFC3339 string, got {type(text).__name__}")
    m = _RFC3339.fullmatch(text)
    if m is None:
        raise ClockError(f"invalid RFC3339 {field} {text!r}: expected {RFC3339_SHAPE}")
    year, month, day = (int(p) for p in m["date"].split("-"))
    micro = int((m["fraction"] or "0")[:6].ljust(6, "0"))
    try:
        local = datetime(year, month, day, int(m["hour"]), int(m["minute"]), int(m["second"]), micro)
    except ValueError as exc:
        raise ClockError(f"invalid RFC3339 {field} {text!r}: {exc}") from None
    if m["utc"]:
        offset = timedelta(0)
    else:
        hours, minutes = int(m["off_h"]), int(m["off_m"])
        if hours > 23 or minutes > 59:
            raise ClockError(f"invalid RFC3339 {field} {text!r}: the UTC offset must be between -23:59 and +23:59")
        offset = timedelta(hours=hours, minutes=minutes) * (-1 if m["sign"] == "-" else 1)
    try:
        return local.replace(tzinfo=timezone(offset)).astimezone(UTC)
    except OverflowError:
        raise ClockError(f"invalid RFC3339 {field} {text!r}: out of representable range") from None


def wall_timestamp() -> str:
    """Wall-clock now as the trajectory's ``timestamp_utc`` writes it (``2025-03-10T09:00:00.123456+00:00``)."""
    return datetime.now(UTC).isoformat()


def format_rfc3339(moment: datetime, *, seconds: bool = False) -> str:
    """``2025-03-10T09:00:00Z`` (a fraction only when there is one; none with ``seconds=True``)."""
    moment = moment.astimezone(UTC)
    if seconds:
        moment = moment.replace(microsecond=0)
    return moment.isoformat().replace("+00:00", "Z")


def _shift(moment: datetime, seconds: float) -> datetime:
    """``moment + seconds``, held at datetime's min/max rather than raising."""
    try:
        return moment + timedelta(seconds=seconds)
    except OverflowError:
        return _MAX_TIME if seconds > 0 else _MIN_TIME


def _number(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ClockError(f"{name} must be a number, got {type(value).__name__}")
    if not math.isfinite(value):
        raise ClockError(f"{name} must be a finite number, got {value}")
    if value < 0:
        raise ClockError(f"{name} must be non-negative")
    return float(value)


def _parse_rate(value: object) -> float:
    rate = _number(value, "rate")
    if rate > MAX_RATE:
        raise ClockError(f"rate {rate:g} exceeds max {MAX_RATE:g} (1 real s = 1 virtual day)")
    return rate


def _zone(name: object) -> ZoneInfo:
    if not isinstance(name, str):
        raise ClockError(f"time_zone must be a string naming an IANA time zone, got {type(name).__name__}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ClockError(
            f"unknown time zone {name!r}: pass an IANA time zone name such as 'America/New_York'") from None


def _parse_schedule(schedule: object, mode: str) -> list[datetime]:
    """``schedule`` as times when ``mode`` is ``schedule`` (where it is required), else [] (where it must be
    absent); :class:`ClockError` 400 naming the entry that is not a time."""
    if mode != "schedule":
        if schedule is not None:
            raise ClockError(f"schedule applies only to mode 'schedule', not {mode!r}")
        return []
    if not isinstance(schedule, list):
        raise ClockError("mode 'schedule' needs schedule: a list of RFC3339 times, the Nth given to the Nth tool "
                         f"call, got {type(schedule).__name__}")
    if len(schedule) > MAX_SCHEDULE:
        raise ClockError(f"schedule holds {len(schedule)} times, more than {MAX_SCHEDULE}")
    return [parse_rfc3339(t, f"schedule[{i}]") for i, t in enumerate(schedule)]


# -- the get_time tool ------------------------------------------------------------------------------

GET_TIME_TOOL_NAME = "get_time"

_GET_TIME_DESCRIPTION = (
    "Returns the current date and time in this environment. The clock of the computer you run on "
    "does not show this environment's time, so do not read it, and do not assume what today's date "
    "is: call this tool and take from its answer every date and time you pass to another tool, and "
    'every relative date you work out ("today", "tomorrow", "next Monday", "overdue", "in the last '
    '30 days"). current_time is in UTC, like the dates and times the other tools here take. If you '
    "know your user's IANA time zone, pass it as time_zone to also get local_time, the same moment in "
    "that zone, for speaking to your user in their own terms; it does not change the dates you pass "
    "to tools. Time goes on while you work: read it again before each change you make instead of "
    "reusing an earlier answer. In a query string, write the date this tool gives you rather than "
    "NOW() or CURRENT_DATE."
)

GET_TIME_TOOL: dict[str, Any] = {
    "name": GET_TIME_TOOL_NAME,
    "description": _GET_TIME_DESCRIPTION,
    "inputSchema": {
        "type": "object",
        "properties": {
            "time_zone": {
                "type": "string",
                "description": 'An IANA time zone name, such as "America/New_York" or "Europe/Paris". The '
                               "answer then also has time_zone and local_time (the same moment with that "
                               "zone's UTC offset).",
            },
        },
        "additionalProperties": False,
    },
    "annotations": {"readOnlyHint": True},
}


# -- the clock --------------------------------------------------------------------------------------


class VirtualClock:
    """The gateway's virtual clock. Thread-safe; every read is pure.

    ``real_time`` returns real seconds (default: epoch seconds that never go backwards in this
    process, so a stored clock resumes correctly in another process).
    """

    def __init__(self, real_time: Callable[[], float] | None = None):
        self._real_time = real_time or monotonic_wall()
        self._lock = threading.Lock()
        self._armed = False
        self._mode = "wall"
        self._rate = 1.0  # virtual seconds per real second; 0 in frozen and stepped modes
        self._step: float | None = None
        self._t0: datetime | None = None
        self._schedule: list[datetime] = []  # schedule mode: the time of each tool call, in order
        self._next = 0  # the index of the schedule's time the next tool call gets
        self._overrun = 0  # tool calls made after the schedule ran out (they got its last time)
        self._generation = 0
        # Virtual time is the anchor's plus the real time since it at the rate; elapsed() likewise.
        self._anchor_real = self._real_time()
        self._anchor_virtual: datetime | None = None
        self._lived = 0.0

    # -- reading (all pure) --

    def _real(self) -> float:
        # Never behind the anchor: a source that steps back (a wall clock reset) holds the clock still.
        return max(self._real_time(), self._anchor_real)

    def _virtual_at(self, real: float) -> datetime | None:
        if not self._armed or self._anchor_virtual is None:
            return None
        if self._rate == 0:
            return self._anchor_virtual
        return _shift(self._anchor_virtual, (real - self._anchor_real) * self._rate)

    def _lived_at(self, real: float) -> float:
        speed = self._rate if self._armed else 1.0
        return self._lived + (real - self._anchor_real) * speed

    def _rebase(self, real: float) -> None:
        """Move the anchor to ``real`` without changing what the clock reads."""
        self._anchor_virtual = self._virtual_at(real)
        self._lived = self._lived_at(real)
        self._anchor_real = real

    @property
    def armed(self) -> bool:
        return self._armed

    @property
    def mode(self) -> str | None:
        """``wall``, ``frozen`` or ``stepped`` while armed; None when not."""
        return self._mode if self._armed else None

    @property
    def rate(self) -> float:
        """Virtual seconds per real second: 0 for a frozen or stepped clock, 1 when unarmed."""
        return self._rate if self._armed else 1.0

    @property
    def step_seconds(self) -> float | None:
        return self._step if self._armed else None

    @property
    def schedule_left(self) -> int | None:
        """Schedule mode: the times not yet given to a tool call (None in other modes)."""
        with self._lock:
            return len(self._schedule) - self._next if self._armed and self._mode == "schedule" else None

    @property
    def schedule_overrun(self) -> int | None:
        """Schedule mode: the tool calls made after the schedule ran out (None in other modes)."""
        with self._lock:
            return self._overrun if self._armed and self._mode == "schedule" else None

    @property
    def generation(self) -> int:
        """Bumped by every arm and every clear: a consumer keeping times derived from the clock (a
        trigger's next mark) drops them when it changes."""
        return self._generation

    @property
    def t0(self) -> datetime | None:
        """The virtual time the clock was armed at (None when unarmed)."""
        with self._lock:
            return self._t0 if self._armed else None

    def now_or_none(self) -> datetime | None:
        with self._lock:
            return self._virtual_at(self._real())

    def now(self) -> datetime:
        """Virtual now, an aware UTC datetime. :class:`ClockError` 404 when the clock is not armed."""
        current = self.now_or_none()
        if current is None:
            raise ClockError(NOT_ARMED, 404)
        return current

    def virtual_timestamp(self) -> str | None:
        """Virtual now as RFC3339 for stamping events (``virtual_time``), or None when unarmed."""
        current = self.now_or_none()
        return None if current is None else format_rfc3339(current)

    def elapsed(self) -> float:
        """Virtual seconds that have gone by since the clock was created: real time at the rate while
        armed (1 while unarmed), every advance and step, and the jump of a re-arm forward (one back
        adds nothing). Never decreases; delays measured with it follow the clock."""
        with self._lock:
            return self._lived_at(self._real())

    def time_response(self) -> dict:
        """The body of ``GET /clock/time``: ``{"virtual_time": ...}``; :class:`ClockError` 404 when unarmed."""
        return {"virtual_time": format_rfc3339(self.now())}

    def set_time_response(self) -> dict:
        """The body ``PUT /clock/set-time`` answers with."""
        with self._lock:
            return self._public_state(self._real())

    def state(self) -> dict:
        """The body of ``GET /clock/state`` (the gateway adds ``env_get_time_url`` while armed): the
        reference's keys plus ``mode``, ``step_seconds`` and ``generation``."""
        with self._lock:
            body = self._public_state(self._real())
            if self._armed:
                body.update(mode=self._mode, step_seconds=self._step)
            if self._armed and self._mode == "schedule":
                body.update(schedule_left=len(self._schedule) - self._next, schedule_overrun=self._overrun)
            body["generation"] = self._generation
            return body

    def _public_state(self, real: float) -> dict:
        if not self._armed or self._t0 is None:
            return {"armed": False}
        current = self._virtual_at(real)
        assert current is not None
        return {"armed": True, "t0": format_rfc3339(self._t0), "virtual_seconds_per_real_second": self._rate,
                "virtual_time": format_rfc3339(current)}

    # -- changing --

    def arm(self, virtual_time: str, virtual_seconds_per_real_second: float | None = 1.0, mode: str = "wall",
            step_seconds: float | None = None, schedule: list[str] | None = None) -> dict:
        """Arm (or re-arm) the clock at ``virtual_time``; answers :meth:`set_time_response`.

        ``virtual_seconds_per_real_second`` (0..86400, default 1) applies to ``wall`` mode only;
        ``step_seconds`` (virtual seconds per tool call) to ``stepped`` mode only, where it is required;
        ``schedule`` (RFC3339 times, the Nth given to the Nth tool call) to ``schedule`` mode only, where
        it is required. Bumps :attr:`generation`. Bad input raises :class:`ClockError` (400).
        """
        if mode not in MODES:
            raise ClockError(f"mode must be one of 'wall', 'frozen', 'stepped', 'schedule', got {mode!r}")
        times = _parse_schedule(schedule, mode)
        t0 = parse_rfc3339(virtual_time)
        rate_in = 1.0 if virtual_seconds_per_real_second is None else virtual_seconds_per_real_second
        rate = _parse_rate(rate_in)
        if mode != "wall":
            if rate not in (0.0, 1.0):
                raise ClockError(f"virtual_seconds_per_real_second applies only to mode 'wall': a {mode} "
                                 f"clock moves only when advanced")
            rate = 0.0
        step: float | None = None
        if mode == "stepped":
            if step_seconds is None:
                raise ClockError("mode 'stepped' needs step_seconds: the virtual seconds each tool call moves "
                                 "the clock (0 to move it only by advancing)")
            step = _number(step_seconds, "step_seconds")
        elif step_seconds is not None:
            raise ClockError(f"step_seconds applies only to mode 'stepped', not {mode!r}")
        if t0 > _MAX_TIME - timedelta(seconds=_OVERFLOW_HORIZON_S * rate):
            raise ClockError(f"virtual_time {virtual_time!r} at rate {rate:g} would overflow datetime near the max")
        with self._lock:
            real = self._real()
            self._rebase(real)
            if self._armed and self._anchor_virtual is not None and t0 > self._anchor_virtual:
                self._lived += (t0 - self._anchor_virtual).total_seconds()  # a jump forward is time lived
            self._armed = True
            self._mode, self._rate, self._step, self._t0 = mode, rate, step, t0
            self._schedule, self._next, self._overrun = times, 0, 0
            self._anchor_virtual = t0
            self._generation += 1
            return self._public_state(real)

    def arm_from_body(self, body: object) -> dict:
        """:meth:`arm` from a ``PUT /clock/set-time`` body: ``{virtual_time,
        virtual_seconds_per_real_second?, mode?, step_seconds?, schedule?}`` (other keys are ignored)."""
        if not isinstance(body, Mapping):
            raise ClockError("request body must be a JSON object")
        mode = body.get("mode")
        return self.arm(body.get("virtual_time"), body.get("virtual_seconds_per_real_second"),  # type: ignore[arg-type]  # arm() checks each value itself
                        mode="wall" if mode is None else mode, step_seconds=body.get("step_seconds"),
                        schedule=body.get("schedule"))

    def clear(self) -> dict:
        """Disarm (idempotent; bumps :attr:`generation`). Answers the ``POST /clock/clear`` body."""
        with self._lock:
            self._rebase(self._real())
            self._armed = False
            self._mode, self._rate, self._step, self._t0 = "wall", 1.0, None, None
            self._schedule, self._next, self._overrun = [], 0, 0
            self._anchor_virtual = None
            self._generation += 1
        return {"ok": True, "armed": False}

    def advance(self, seconds: float | str) -> datetime:
        """Move the clock forward by ``seconds`` (a number or an ISO-8601 duration such as ``"PT1H"``)
        in any mode; answers the new virtual now. 404 when unarmed, 400 for a bad amount."""
        if isinstance(seconds, str):
            try:
                amount = parse_duration(seconds)
            except DurationError as exc:
                raise ClockError(exc.message) from None
        else:
            amount = _number(seconds, "seconds")
        with self._lock:
            real = self._real()
            current = self._virtual_at(real)
            if current is None:
                raise ClockError(NOT_ARMED, 404)
            try:
                moved = current + timedelta(seconds=amount)
            except OverflowError:
                raise ClockError(f"advancing by {amount:g}s would move the clock past the largest time it can "
                                 f"show") from None
            self._rebase(real)
            self._anchor_virtual = moved
            self._lived += amount
            return moved

    def tick_tool_call(self) -> datetime | None:
        """Called by the gateway once per proxied tool call: a stepped clock moves by ``step_seconds``; a
        schedule clock moves to its next time (holding the last one, counted, once they have all been
        given); other modes are untouched. Answers virtual now (None when unarmed). Never raises."""
        with self._lock:
            real = self._real()
            if self._armed and self._mode == "schedule":
                self._rebase(real)
                assert self._anchor_virtual is not None
                if self._next < len(self._schedule):
                    moved = self._schedule[self._next]
                    self._next += 1
                    self._lived += max(0.0, (moved - self._anchor_virtual).total_seconds())
                    self._anchor_virtual = moved
                else:
                    self._overrun += 1
            elif self._armed and self._mode == "stepped" and self._step:
                self._rebase(real)
                assert self._anchor_virtual is not None
                self._anchor_virtual = _shift(self._anchor_virtual, self._step)
                self._lived += self._step
            return self._virtual_at(real)

    # -- the get_time tool --

    def get_time_tool(self, time_zone: str | None = None) -> dict:
        """The ``get_time`` tool's answer: ``{"current_time": "...Z"}`` at second precision, plus
        ``time_zone`` and ``local_time`` (ISO 8601 with the zone's offset) when a zone is given.
        :class:`ClockError` for an unknown zone or an unarmed clock (a tool error)."""
        current = self.now_or_none()
        if current is None:
            raise ClockError("time service unavailable", 404)
        current = current.replace(microsecond=0)
        reading = {"current_time": format_rfc3339(current)}
        if time_zone is None:
            return reading
        zone = _zone(time_zone)
        try:
            local = current.astimezone(zone)
        except OverflowError:
            raise ClockError(f"the current time {reading['current_time']} can't be shown in time zone "
                             f"{time_zone!r}: its local date is out of range") from None
        return {**reading, "time_zone": time_zone, "local_time": local.isoformat()}

    # -- persistence --

    def to_dict(self) -> dict:
        """JSON-ready state for the store; :meth:`from_dict` restores it (a wall clock keeps running
        through the time it was down; a frozen or stepped one reads exactly what it read)."""
        with self._lock:
            real = self._real()
            virtual = self._virtual_at(real)
            return {
                "version": _STATE_VERSION,
                "armed": self._armed,
                "mode": self._mode,
                "rate": self._rate,
                "step_seconds": self._step,
                "t0": None if self._t0 is None else format_rfc3339(self._t0),
                **({"schedule": [format_rfc3339(t) for t in self._schedule], "schedule_next": self._next,
                    "schedule_overrun": self._overrun} if self._mode == "schedule" else {}),
                "generation": self._generation,
                "anchor_real": real,
                "anchor_virtual": None if virtual is None else format_rfc3339(virtual),
                "lived": self._lived_at(real),
            }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], real_time: Callable[[], float] | None = None) -> VirtualClock:
        """A clock from :meth:`to_dict`'s output. ``real_time`` must be in the same time base as the
        saving clock's (the default source is: epoch seconds)."""
        clock = cls(real_time)
        try:
            if data.get("version") != _STATE_VERSION:
                raise ValueError(f"unknown version {data.get('version')!r}")
            armed = data["armed"]
            if not isinstance(armed, bool):
                raise TypeError("'armed' must be true or false")
            generation = data["generation"]
            if isinstance(generation, bool) or not isinstance(generation, int) or generation < 0:
                raise ValueError("'generation' must be a non-negative integer")
            anchor_real = float(data["anchor_real"])
            lived = float(data["lived"])
            if not (math.isfinite(anchor_real) and math.isfinite(lived)):
                raise ValueError("'anchor_real' and 'lived' must be finite")
            clock._generation = generation
            clock._anchor_real = min(anchor_real, clock._real_time())
            clock._lived = lived
            if armed:
                mode = data["mode"]
                if mode not in MODES:
                    raise ValueError(f"unknown mode {mode!r}")
                rate = _parse_rate(data["rate"])
                step = data.get("step_seconds")
                clock._step = None if step is None else _number(step, "step_seconds")
                clock._mode, clock._rate = mode, (rate if mode == "wall" else 0.0)
                clock._t0 = parse_rfc3339(data["t0"], "t0")
                if mode == "schedule":
                    clock._schedule = _parse_schedule(data.get("schedule"), mode)
                    clock._next = min(int(data.get("schedule_next", 0)), len(clock._schedule))
                    clock._overrun = int(data.get("schedule_overrun", 0))
                clock._anchor_virtual = parse_rfc3339(data["anchor_virtual"], "anchor_virtual")
                clock._armed = True
        except (KeyError, TypeError, ValueError) as exc:  # ClockError is a ValueError
            detail = exc.message if isinstance(exc, ClockError) else str(exc)
            raise ClockError(f"can't restore the virtual clock from its stored state: {detail}", 500) from None
        return clock

    def __repr__(self) -> str:
        if not self._armed:
            return f"<VirtualClock unarmed generation={self._generation}>"
        return (f"<VirtualClock {self._mode} now={self.virtual_timestamp()} rate={self._rate:g} "
                f"step={self._step} generation={self._generation}>")
