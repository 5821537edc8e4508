"""The virtual clock (agentenv_local.gateway.clock) and ISO-8601 durations (gateway.durations).

Every clock here runs on a fake real-time source, so nothing waits and nothing depends on the
machine's speed. Messages are asserted verbatim where the reference gateway fixes them.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from agentenv_local.gateway.clock import (
    GET_TIME_TOOL,
    MAX_RATE,
    ClockError,
    VirtualClock,
    format_rfc3339,
    monotonic_wall,
    parse_rfc3339,
)
from agentenv_local.gateway.durations import (
    DurationError,
    parse_duration,
    parse_timedelta,
)

SHAPE = "expected YYYY-MM-DDThh:mm:ss[.fff](Z|+hh:mm)"


class FakeTime:
    """A real-time source the test moves by hand."""

    def __init__(self, start: float = 1000.0):
        self.now = start

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def real() -> FakeTime:
    return FakeTime()


@pytest.fixture
def clock(real: FakeTime) -> VirtualClock:
    return VirtualClock(real)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def error_of(fn, *args, **kwargs) -> ClockError:
    with pytest.raises(ClockError) as info:
        fn(*args, **kwargs)
    return info.value


# -- unarmed --------------------------------------------------------------------------------------


def test_unarmed_clock_refuses_reads_with_404(clock: VirtualClock):
    for read in (clock.now, clock.time_response):
        err = error_of(read)
        assert (err.status, err.message) == (404, "clock not armed")
        assert err.to_wire() == {"ok": False, "error": "clock not armed"}
    assert clock.now_or_none() is None
    assert clock.virtual_timestamp() is None
    assert clock.armed is False and clock.mode is None and clock.t0 is None
    assert clock.state() == {"armed": False, "generation": 0}
    assert clock.set_time_response() == {"armed": False}
    assert clock.tick_tool_call() is None
    assert error_of(clock.advance, 60).status == 404
    err = error_of(clock.get_time_tool)
    assert err.message == "time service unavailable"


# -- wall mode ------------------------------------------------------------------------------------


def test_wall_clock_at_3600x_reads_11_after_two_real_seconds(clock: VirtualClock, real: FakeTime):
    body = clock.arm("2025-03-10T09:00:00Z", 3600)
    assert body == {"armed": True, "t0": "2025-03-10T09:00:00Z", "virtual_seconds_per_real_second": 3600.0,
                    "virtual_time": "2025-03-10T09:00:00Z"}
    real.sleep(2)
    assert clock.now() == at("2025-03-10T11:00:00Z")
    assert clock.now().tzinfo is not None and clock.now().utcoffset() == timedelta(0)
    assert clock.time_response() == {"virtual_time": "2025-03-10T11:00:00Z"}
    assert clock.virtual_timestamp() == "2025-03-10T11:00:00Z"
    assert clock.state() == {"armed": True, "t0": "2025-03-10T09:00:00Z",
                             "virtual_seconds_per_real_second": 3600.0,
                             "virtual_time": "2025-03-10T11:00:00Z", "mode": "wall", "step_seconds": None,
                             "generation": 1}
    assert clock.set_time_response() == {"armed": True, "t0": "2025-03-10T09:00:00Z",
                                         "virtual_seconds_per_real_second": 3600.0,
                                         "virtual_time": "2025-03-10T11:00:00Z"}


def test_reads_never_move_the_clock(clock: VirtualClock, real: FakeTime):
    clock.arm("2025-03-10T09:00:00Z", 60)
    real.sleep(1.5)
    readings = {clock.now() for _ in range(50)} | {clock.now_or_none()}
    clock.state(), clock.time_response(), clock.to_dict(), clock.get_time_tool("Europe/Paris"), clock.elapsed()
    readings.add(clock.now())
    assert readings == {at("2025-03-10T09:01:30Z")}


def test_default_rate_is_one_and_fractions_print_only_when_present(clock: VirtualClock, real: FakeTime):
    clock.arm("2025-03-10T09:00:00Z")
    assert clock.rate == 1.0
    real.sleep(0.5)
    # /clock/time and event stamps keep the fraction (as the reference prints them); get_time does not.
    assert clock.time_response() == {"virtual_time": "2025-03-10T09:00:00.500000Z"}
    assert clock.get_time_tool() == {"current_time": "2025-03-10T09:00:00Z"}
    clock.arm("2025-03-10T09:00:00Z", None)
    assert clock.rate == 1.0


def test_rate_zero_holds_a_wall_clock_still(clock: VirtualClock, real: FakeTime):
    clock.arm("2025-03-10T09:00:00Z", 0)
    real.sleep(10_000)
    assert clock.now() == at("2025-03-10T09:00:00Z")
    assert clock.mode == "wall"
    assert clock.state()["virtual_seconds_per_real_second"] == 0.0


def test_max_rate_is_a_virtual_day_per_real_second(clock: VirtualClock, real: FakeTime):
    clock.arm("2025-03-10T00:00:00Z", MAX_RATE)
    real.sleep(1)
    assert clock.now() == at("2025-03-11T00:00:00Z")


def test_offsets_are_converted_to_utc(clock: VirtualClock):
    body = clock.arm("2025-03-10T09:00:00+05:30", 0)
    assert body["t0"] == "2025-03-10T03:30:00Z"
    assert clock.arm("2025-03-10T05:00:00-04:00", 0)["t0"] == "2025-03-10T09:00:00Z"


@pytest.mark.parametrize("text, expected", [
    ("2025-03-10T09:00:00Z", "2025-03-10T09:00:00Z"),
    ("2025-03-10t09:00:00z", "2025-03-10T09:00:00Z"),
    ("2025-03-10 09:00:00Z", "2025-03-10T09:00:00Z"),
    ("2025-03-10T09:00:00.5Z", "2025-03-10T09:00:00.500000Z"),
    ("2025-03-10T09:00:00.1234567Z", "2025-03-10T09:00:00.123456Z"),
    ("2025-03-10T09:00:00+00:00", "2025-03-10T09:00:00Z"),
    ("2025-03-10T00:30:00+01:00", "2025-03-09T23:30:00Z"),
    ("2024-02-29T23:59:59-00:00", "2024-02-29T23:59:59Z"),
])
def test_rfc3339_accepted_forms(text: str, expected: str):
    assert format_rfc3339(parse_rfc3339(text)) == expected


# -- bad input -------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "2025-03-10",
    "2025-03-10T09:00Z",             # seconds are mandatory
    "2025-03-10T09:00:00",           # so is the offset
    "2025-03-10T09:00:00+0500",
    "2025-03-10T09:00:00+05",
    "20250310T090000Z",
    "2025-W11-1T09:00:00Z",
    " 2025-03-10T09:00:00Z",
    "2025-03-10T09:00:00Z ",
    "2025-03-10T09:00:00.Z",
    "2025-3-10T09:00:00Z",
    "\u0662\u0660\u0662\u0665-03-10T09:00:00Z",  # non-ASCII digits
    "",
    "now",
])
def test_malformed_virtual_time_gets_the_reference_message(clock: VirtualClock, text: str):
    err = error_of(clock.arm, text, 3600)
    assert err.status == 400
    assert err.message == f"invalid RFC3339 virtual_time {text!r}: {SHAPE}"
    assert err.to_wire() == {"ok": False, "error": err.message}


def test_the_brief_example_message_verbatim(clock: VirtualClock):
    assert error_of(clock.arm, "2025-03-10").message == (
        "invalid RFC3339 virtual_time '2025-03-10': expected YYYY-MM-DDThh:mm:ss[.fff](Z|+hh:mm)")


@pytest.mark.parametrize("text, reason", [
    ("2025-13-10T09:00:00Z", "month must be in 1..12"),
    ("2025-02-30T09:00:00Z", "day is out of range for month"),
    ("2025-03-10T24:00:00Z", "hour must be in 0..23"),
    ("2025-03-10T09:60:00Z", "minute must be in 0..59"),
    ("2025-03-10T09:00:60Z", "second must be in 0..59"),
    ("0000-01-01T00:00:00Z", "year 0 is out of range"),
    ("2025-03-10T09:00:00+24:00", "the UTC offset must be between -23:59 and +23:59"),
    ("2025-03-10T09:00:00+05:60", "the UTC offset must be between -23:59 and +23:59"),
    ("0001-01-01T00:00:00+01:00", "out of representable range"),
    ("9999-12-31T23:00:00-05:00", "out of representable range"),
])
def test_impossible_virtual_time_says_why(clock: VirtualClock, text: str, reason: str):
    err = error_of(clock.arm, text)
    assert (err.status, err.message) == (400, f"invalid RFC3339 virtual_time {text!r}: {reason}")


@pytest.mark.parametrize("value, name", [(None, "NoneType"), (1741597200, "int"), (["2025"], "list")])
def test_virtual_time_must_be_a_string(clock: VirtualClock, value, name):
    err = error_of(clock.arm, value)
    assert (err.status, err.message) == (400, f"virtual_time must be an RFC3339 string, got {name}")


@pytest.mark.parametrize("rate, message", [
    (-1, "rate must be non-negative"),
    (-0.001, "rate must be non-negative"),
    (86401, "rate 86401 exceeds max 86400 (1 real s = 1 virtual day)"),
    (1e9, "rate 1e+09 exceeds max 86400 (1 real s = 1 virtual day)"),
    ("fast", "rate must be a number, got str"),
    ("3600", "rate must be a number, got str"),
    (True, "rate must be a number, got bool"),
    (float("nan"), "rate must be a finite number, got nan"),
    (float("inf"), "rate must be a finite number, got inf"),
])
def test_rate_outside_0_to_86400_is_refused(clock: VirtualClock, rate, message):
    err = error_of(clock.arm, "2025-03-10T09:00:00Z", rate)
    assert (err.status, err.message) == (400, message)
    assert not clock.armed


def test_overflow_near_datetime_max_is_refused(clock: VirtualClock):
    err = error_of(clock.arm, "9999-12-31T00:00:00Z", 3600)
    assert (err.status, err.message) == (
        400, "virtual_time '9999-12-31T00:00:00Z' at rate 3600 would overflow datetime near the max")
    assert error_of(clock.arm, "9999-12-30T23:00:00Z", 2).status == 400
    clock.arm("9999-12-31T00:00:00Z", 0)  # a still clock cannot overflow
    assert clock.now() == at("9999-12-31T00:00:00Z")


def test_a_clock_that_outlives_the_horizon_saturates_instead_of_failing(clock: VirtualClock, real: FakeTime):
    clock.arm("9999-12-30T00:00:00Z", 1)
    real.sleep(10 * 86400)
    assert clock.now() == datetime.max.replace(tzinfo=UTC)
    assert clock.time_response() == {"virtual_time": "9999-12-31T23:59:59.999999Z"}


def test_a_refused_arm_changes_nothing(clock: VirtualClock, real: FakeTime):
    clock.arm("2025-03-10T09:00:00Z", 60)
    for bad in (("2025-03-10",), ("2025-03-11T00:00:00Z", -1), ("2025-03-11T00:00:00Z", 1, "warp")):
        error_of(clock.arm, *bad)
    assert clock.generation == 1 and clock.mode == "wall"
    real.sleep(1)
    assert clock.now() == at("2025-03-10T09:01:00Z")


@pytest.mark.parametrize("kwargs, message", [
    ({"mode": "warp"}, "mode must be one of 'wall', 'frozen', 'stepped', 'schedule', got 'warp'"),
    ({"mode": None}, "mode must be one of 'wall', 'frozen', 'stepped', 'schedule', got None"),
    ({"mode": "frozen", "virtual_seconds_per_real_second": 5},
     "virtual_seconds_per_real_second applies only to mode 'wall': a frozen clock moves only when advanced"),
    ({"mode": "stepped", "virtual_seconds_per_real_second": 60, "step_seconds": 1},
     "virtual_seconds_per_real_second applies only to mode 'wall': a stepped clock moves only when advanced"),
    ({"mode": "stepped"}, ("mode 'stepped' needs step_seconds: the virtual seconds each tool call moves the "
                           "clock (0 to move it only by advancing)")),
    ({"mode": "stepped", "step_seconds": -1}, "step_seconds must be non-negative"),
    ({"mode": "stepped", "step_seconds": "1"}, "step_seconds must be a number, got str"),
    ({"mode": "stepped", "step_seconds": float("nan")}, "step_seconds must be a finite number, got nan"),
    ({"step_seconds": 5}, "step_seconds applies only to mode 'stepped', not 'wall'"),
    ({"mode": "frozen", "step_seconds": 5}, "step_seconds applies only to mode 'stepped', not 'frozen'"),
])
def test_mode_arguments_are_checked(clock: VirtualClock, kwargs: dict, message: str):
    err = error_of(clock.arm, "2025-03-10T09:00:00Z", **kwargs)
    assert (err.status, err.message) == (400, message)


# -- frozen and stepped ----------------------------------------------------------------------------


def test_frozen_clock_moves_only_when_advanced(clock: VirtualClock, real: FakeTime):
    body = clock.arm("2025-03-10T09:00:00Z", mode="frozen")
    assert body["virtual_seconds_per_real_second"] == 0.0
    real.sleep(3600)
    assert clock.now() == at("2025-03-10T09:00:00Z")
    assert clock.tick_tool_call() == at("2025-03-10T09:00:00Z")  # tool calls do not move it
    assert clock.advance(90) == at("2025-03-10T09:01:30Z")
    assert clock.advance("PT1H") == at("2025-03-10T10:01:30Z")
    assert clock.advance(0.25) == at("2025-03-10T10:01:30.250000Z")
    real.sleep(3600)
    assert clock.now() == at("2025-03-10T10:01:30.250000Z")
    assert clock.state() == {"armed": True, "t0": "2025-03-10T09:00:00Z", "virtual_seconds_per_real_second": 0.0,
                             "virtual_time": "2025-03-10T10:01:30.250000Z", "mode": "frozen",
                             "step_seconds": None, "generation": 1}
    assert clock.generation == 1  # advancing is not a re-anchor


def test_stepped_clock_moves_by_its_step_per_tool_call(clock: VirtualClock, real: FakeTime):
    clock.arm("2025-03-10T09:00:00Z", mode="stepped", step_seconds=30)
    real.sleep(500)
    assert clock.now() == at("2025-03-10T09:00:00Z")
    assert clock.tick_tool_call() == at("2025-03-10T09:00:30Z")
    assert clock.tick_tool_call() == at("2025-03-10T09:01:00Z")
    for _ in range(10):
        clock.now(), clock.get_time_tool(), clock.state()  # reads are not tool calls
    assert clock.now() == at("2025-03-10T09:01:00Z")
    assert clock.advance(3600) == at("2025-03-10T10:01:00Z")
    assert clock.tick_tool_call() == at("2025-03-10T10:01:30Z")
    state = clock.state()
    assert (state["mode"], state["step_seconds"], state["virtual_seconds_per_real_second"]) == ("stepped", 30.0, 0.0)


def test_stepped_clock_with_step_zero_moves_only_when_advanced(clock: VirtualClock):
    clock.arm("2025-03-10T09:00:00Z", mode="stepped", step_seconds=0)
    clock.tick_tool_call()
    assert clock.now() == at("2025-03-10T09:00:00Z")
    assert clock.advance(60) == at("2025-03-10T09:01:00Z")


def test_wall_clock_ignores_tool_calls_but_can_be_advanced(clock: VirtualClock, real: FakeTime):
    clock.arm("2025-03-10T09:00:00Z", 60)
    clock.tick_tool_call()
    assert clock.now() == at("2025-03-10T09:00:00Z")
    clock.advance(3600)
    real.sleep(1)
    assert clock.now() == at("2025-03-10T10:01:00Z")


def test_stepped_ticks_from_many_threads_are_never_lost(clock: VirtualClock):
    clock.arm("2025-03-10T00:00:00Z", mode="stepped", step_seconds=1)

    def work():
        for _ in range(250):
            clock.tick_tool_call()

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert clock.now() == at("2025-03-10T00:33:20Z")  # 2000 s


@pytest.mark.parametrize("amount, message", [
    (-1, "seconds must be non-negative"),
    ("soon", "invalid ISO-8601 duration 'soon': unit letters must be upper case (P, W, D, T, H, M, S)"),
    ("P1M", ("invalid ISO-8601 duration 'P1M': years and months are not supported (they are not a fixed "
             "span); use weeks or days")),
    (None, "seconds must be a number, got NoneType"),
    (float("inf"), "seconds must be a finite number, got inf"),
])
def test_bad_advance_is_refused(clock: VirtualClock, amount, message):
    clock.arm("2025-03-10T09:00:00Z", mode="frozen")
    err = error_of(clock.advance, amount)
    assert (err.status, err.message) == (400, message)
    assert clock.now() == at("2025-03-10T09:00:00Z")


def test_advance_past_the_largest_time_is_refused(clock: VirtualClock):
    clock.arm("9999-12-31T00:00:00Z", mode="frozen")
    err = error_of(clock.advance, 2 * 86400)
    assert err.message == "advancing by 172800s would move the clock past the largest time it can show"
    assert clock.now() == at("9999-12-31T00:00:00Z")


# -- re-arming, clearing, generation, elapsed -------------------------------------------------------


def test_every_arm_and_clear_bumps_generation_and_clear_is_idempotent(clock: VirtualClock, real: FakeTime):
    assert clock.generation == 0
    clock.arm("2025-03-10T09:00:00Z", 3600)
    assert clock.generation == 1
    real.sleep(1)
    body = clock.arm("2025-06-01T00:00:00Z", 1, mode="wall")
    assert clock.generation == 2
    assert body["t0"] == "2025-06-01T00:00:00Z" and body["virtual_time"] == "2025-06-01T00:00:00Z"
    assert clock.clear() == {"ok": True, "armed": False}
    assert clock.generation == 3
    assert clock.clear() == {"ok": True, "armed": False}
    assert clock.generation == 4
    assert error_of(clock.now).status == 404
    assert clock.state() == {"armed": False, "generation": 4}
    clock.arm("2025-03-10T09:00:00Z", mode="frozen")
    assert clock.generation == 5 and clock.now() == at("2025-03-10T09:00:00Z")


def test_elapsed_counts_virtual_time_lived(clock: VirtualClock, real: FakeTime):
    real.sleep(10)  # unarmed: real time at rate 1
    assert clock.elapsed() == 10
    clock.arm("2025-03-10T09:00:00Z", 60)
    real.sleep(2)
    assert clock.elapsed() == 130
    clock.arm("2025-03-10T10:00:00Z", mode="frozen")  # 09:02 -> 10:00 forward: 58 min lived
    assert clock.elapsed() == 130 + 58 * 60
    real.sleep(100)
    assert clock.elapsed() == 130 + 58 * 60  # frozen
    clock.advance(20)
    assert clock.elapsed() == 130 + 58 * 60 + 20
    before = clock.elapsed()
    clock.arm("2025-01-01T00:00:00Z", mode="stepped", step_seconds=5)  # back: adds nothing
    assert clock.elapsed() == before
    clock.tick_tool_call()
    assert clock.elapsed() == before + 5
    clock.clear()
    real.sleep(3)
    assert clock.elapsed() == before + 8


def test_real_time_going_backwards_never_moves_the_clock_back(clock: VirtualClock, real: FakeTime):
    clock.arm("2025-03-10T09:00:00Z", 1)
    real.sleep(10)
    clock.tick_tool_call()
    clock.advance(0)  # re-anchors at +10 s
    real.sleep(-5)
    assert clock.now() == at("2025-03-10T09:00:10Z")


# -- arm_from_body (the PUT /clock/set-time body) ----------------------------------------------------


def test_set_time_body(clock: VirtualClock, real: FakeTime):
    assert clock.arm_from_body({"virtual_time": "2025-03-10T09:00:00Z", "virtual_seconds_per_real_second": 3600,
                                "extra": "ignored"})["virtual_seconds_per_real_second"] == 3600.0
    clock.arm_from_body({"virtual_time": "2025-03-10T09:00:00Z", "mode": "stepped", "step_seconds": 60})
    assert clock.tick_tool_call() == at("2025-03-10T09:01:00Z")
    assert clock.arm_from_body({"virtual_time": "2025-03-10T09:00:00Z"})["virtual_seconds_per_real_second"] == 1.0
    assert error_of(clock.arm_from_body, ["2025-03-10T09:00:00Z"]).message == "request body must be a JSON object"
    assert error_of(clock.arm_from_body, {}).message == "virtual_time must be an RFC3339 string, got NoneType"
    assert error_of(clock.arm_from_body, {"virtual_time": "2025-03-10T09:00:00Z",
                                          "virtual_seconds_per_real_second": -3}).message == "rate must be non-negative"


# -- get_time ---------------------------------------------------------------------------------------


def test_get_time_in_new_york_after_dst_is_minus_four(clock: VirtualClock, real: FakeTime):
    clock.arm("2025-03-10T09:00:00Z", 3600)
    real.sleep(2)
    assert clock.get_time_tool("America/New_York") == {
        "current_time": "2025-03-10T11:00:00Z", "time_zone": "America/New_York",
        "local_time": "2025-03-10T07:00:00-04:00"}


def test_get_time_in_new_york_in_january_is_minus_five(clock: VirtualClock):
    clock.arm("2025-01-15T12:00:00Z", 0)
    assert clock.get_time_tool("America/New_York")["local_time"] == "2025-01-15T07:00:00-05:00"
    assert clock.get_time_tool("Asia/Kolkata")["local_time"] == "2025-01-15T17:30:00+05:30"
    assert clock.get_time_tool("UTC")["local_time"] == "2025-01-15T12:00:00+00:00"


def test_get_time_without_zone_is_utc_at_second_precision(clock: VirtualClock, real: FakeTime):
    clock.arm("2025-03-10T09:00:00.75Z", 1)
    real.sleep(0.5)
    assert clock.get_time_tool() == {"current_time": "2025-03-10T09:00:01Z"}
    assert clock.get_time_tool(None) == {"current_time": "2025-03-10T09:00:01Z"}


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "America", "", "../etc/passwd", "/etc/localtime", "utc"])
def test_get_time_with_an_unknown_zone_is_a_tool_error_naming_it(clock: VirtualClock, zone: str):
    clock.arm("2025-03-10T09:00:00Z", 0)
    err = error_of(clock.get_time_tool, zone)
    assert err.message == f"unknown time zone {zone!r}: pass an IANA time zone name such as 'America/New_York'"
    assert err.status == 400


def test_get_time_zone_must_be_a_string(clock: VirtualClock):
    clock.arm("2025-03-10T09:00:00Z", 0)
    assert error_of(clock.get_time_tool, 5).message == "time_zone must be a string naming an IANA time zone, got int"


def test_get_time_tool_metadata():
    assert GET_TIME_TOOL["name"] == "get_time"
    assert GET_TIME_TOOL["annotations"] == {"readOnlyHint": True}
    schema = GET_TIME_TOOL["inputSchema"]
    assert schema["type"] == "object"
    assert schema["properties"]["time_zone"]["type"] == "string"
    assert "required" not in schema
    json.dumps(GET_TIME_TOOL)  # wire-ready
    text = GET_TIME_TOOL["description"].lower()
    assert "clock" in text and "do not read it" in text and "every date" in text and "utc" in text
    for word in ("simulat", "virtual", "fake", "synthetic", "not real"):
        assert word not in text


# -- persistence ------------------------------------------------------------------------------------


def roundtrip(clock: VirtualClock, real: FakeTime) -> VirtualClock:
    return VirtualClock.from_dict(json.loads(json.dumps(clock.to_dict())), real)


def test_wall_clock_restored_later_keeps_running_from_where_wall_time_says(clock: VirtualClock, real: FakeTime):
    clock.arm("2025-03-10T09:00:00Z", 3600)
    real.sleep(2)
    saved = json.loads(json.dumps(clock.to_dict()))
    assert "2025" in saved["t0"]
    real.sleep(3)  # the hub was down for three real seconds
    restored = VirtualClock.from_dict(saved, real)
    assert restored.now() == at("2025-03-10T14:00:00Z")
    assert restored.state() == {**clock.state(), "virtual_time": "2025-03-10T14:00:00Z"}
    assert restored.generation == 1
    assert restored.elapsed() == clock.elapsed()
    restored.arm("2025-03-10T09:00:00Z", 1)
    assert restored.generation == 2


def test_frozen_and_stepped_clocks_restore_exactly(clock: VirtualClock, real: FakeTime):
    clock.arm("2025-03-10T09:00:00Z", mode="frozen")
    clock.advance(12.5)
    real.sleep(86400)
    restored = roundtrip(clock, real)
    assert restored.now() == at("2025-03-10T09:00:12.500000Z")
    assert restored.state() == clock.state()

    stepped = VirtualClock(real)
    stepped.arm("2025-03-10T09:00:00Z", mode="stepped", step_seconds=60)
    stepped.tick_tool_call()
    real.sleep(1000)
    again = roundtrip(stepped, real)
    assert again.state() == stepped.state()
    assert again.tick_tool_call() == at("2025-03-10T09:02:00Z")


def test_unarmed_clock_restores_unarmed_with_its_generation(clock: VirtualClock, real: FakeTime):
    clock.arm("2025-03-10T09:00:00Z")
    clock.clear()
    restored = roundtrip(clock, real)
    assert restored.armed is False and restored.generation == 2
    assert restored.state() == {"armed": False, "generation": 2}


def test_restore_with_real_time_behind_the_save_holds_the_clock(clock: VirtualClock, real: FakeTime):
    clock.arm("2025-03-10T09:00:00Z", 60)
    real.sleep(1)
    saved = clock.to_dict()
    restored = VirtualClock.from_dict(saved, FakeTime(0.0))
    assert restored.now() == at("2025-03-10T09:01:00Z")


@pytest.mark.parametrize("mutate", [
    lambda d: d.update(version=99),
    lambda d: d.pop("anchor_real"),
    lambda d: d.update(armed="yes"),
    lambda d: d.update(mode="warp"),
    lambda d: d.update(anchor_virtual="yesterday"),
    lambda d: d.update(rate=-1),
    lambda d: d.update(generation=-1),
    lambda d: d.update(lived=float("nan")),
])
def test_corrupt_stored_state_is_refused(clock: VirtualClock, real: FakeTime, mutate):
    clock.arm("2025-03-10T09:00:00Z", 60)
    data = clock.to_dict()
    mutate(data)
    err = error_of(VirtualClock.from_dict, data, real)
    assert err.status == 500
    assert err.message.startswith("can't restore the virtual clock from its stored state: ")


def test_default_real_time_source_is_epoch_based_and_monotonic():
    source = monotonic_wall()
    first = source()
    assert abs(first - time.time()) < 5
    assert source() >= first
    clock = VirtualClock()
    clock.arm("2025-03-10T09:00:00Z", 0)
    assert clock.now() == at("2025-03-10T09:00:00Z")
    restored = VirtualClock.from_dict(clock.to_dict())  # a new default source resumes it
    assert restored.now() == at("2025-03-10T09:00:00Z")


# -- durations --------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, seconds", [
    ("PT2H30M", 9000.0),
    ("P1D", 86400.0),
    ("PT0.5S", 0.5),
    ("PT30M", 1800.0),
    ("PT24H", 86400.0),
    ("P1DT6H", 108000.0),
    ("P1W", 604800.0),
    ("P2W3D", 2 * 604800.0 + 3 * 86400.0),
    ("PT90S", 90.0),
    ("PT1H0.25S", 3600.25),
    ("P0D", 0.0),
    ("PT0S", 0.0),
    ("P1DT2H3M4.5S", 86400 + 7200 + 180 + 4.5),
    ("P1DT", 86400.0),  # accepted as the reference accepts it
])
def test_parse_duration(text: str, seconds: float):
    assert parse_duration(text) == pytest.approx(seconds)
    assert parse_timedelta(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text, reason", [
    ("P", "it names no amount; expected e.g. 'PT24H', 'P1DT6H', 'PT30M'"),
    ("PT", "it names no amount; expected e.g. 'PT24H', 'P1DT6H', 'PT30M'"),
    ("", "a duration starts with 'P'; expected e.g. 'PT24H', 'P1DT6H', 'PT30M'"),
    ("2H", "a duration starts with 'P'; expected e.g. 'PT24H', 'P1DT6H', 'PT30M'"),
    ("pt1h", "unit letters must be upper case (P, W, D, T, H, M, S)"),
    ("PT1h", "unit letters must be upper case (P, W, D, T, H, M, S)"),
    ("P1Y", "years and months are not supported (they are not a fixed span); use weeks or days"),
    ("P1M", "years and months are not supported (they are not a fixed span); use weeks or days"),
    ("P1Y2M3D", "years and months are not supported (they are not a fixed span); use weeks or days"),
    ("P2H", "hours, minutes and seconds go after 'T' (e.g. 'PT2H', 'P1DT30M')"),
    ("P30S", "hours, minutes and seconds go after 'T' (e.g. 'PT2H', 'P1DT30M')"),
    ("PT1.5H", "only the seconds may have a fraction (e.g. 'PT0.5S', 'PT90M' rather than 'PT1.5H')"),
    ("P1.5D", "only the seconds may have a fraction (e.g. 'PT0.5S', 'PT90M' rather than 'PT1.5H')"),
    ("PT0,5S", "write a fraction with '.', not ','"),
    ("-PT1H", "a duration cannot carry a sign"),
    ("+PT1H", "a duration cannot carry a sign"),
    (" PT1H", "remove the surrounding whitespace"),
    ("PT1H\n", "remove the surrounding whitespace"),
    ("PT5S3M", "expected e.g. 'PT24H', 'P1DT6H', 'PT30M'"),
    ("PT1H1H", "expected e.g. 'PT24H', 'P1DT6H', 'PT30M'"),
    ("PT.5S", "a fraction needs digits on both sides of the '.' (e.g. 'PT0.5S')"),
    ("PT5.S", "a fraction needs digits on both sides of the '.' (e.g. 'PT0.5S')"),
    ("P9999999999W", "out of representable range"),
])
def test_bad_duration_says_what_is_wrong(text: str, reason: str):
    with pytest.raises(DurationError) as info:
        parse_duration(text)
    assert info.value.message == f"invalid ISO-8601 duration {text!r}: {reason}"
    assert info.value.status == 400
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("value, name", [(5, "int"), (None, "NoneType"), (1.5, "float")])
def test_duration_must_be_a_string(value, name):
    with pytest.raises(DurationError) as info:
        parse_duration(value)
    assert info.value.message == f"duration must be an ISO-8601 string, got {name}"
