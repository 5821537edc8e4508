"""Time triggers on a clock moved by hand: at, after+offset, every (fixed and seeded exponential),
count, until, unless, catch-up, re-arming; and one run on the gateway's real VirtualClock."""

from __future__ import annotations

import asyncio

import pytest
from test_gateway_triggers_fakes import (
    ManualClock,
    kinds,
    make_engine,
    mirror,
    ok,
    run,
    settle,
    status,
)

PING = [{"type": "tool", "tool": "ping", "args": {}}]


def handlers():
    return {"ping": lambda a, r: "pong", "search_emails": lambda a, r: [], "echo": lambda a, r: "ok",
            "reply": lambda a, r: "sent"}


def timed(tid: str, **when) -> dict:
    return {"id": tid, "when": {"type": "time", **when}, "actions": PING}


def test_at_a_duration_from_t0_fires_once_the_clock_passes_it():
    async def main():
        engine, clock, actions = make_engine(handlers())
        engine.register({"triggers": [timed("two_hours", at="PT2H")]})
        await engine.tick()
        assert status(engine, "two_hours")["next_mark"] == "2025-03-10T11:00:00Z"
        clock.advance(7199)
        await settle(engine)
        assert actions.calls == []
        clock.advance(1)
        await settle(engine)
        assert len(actions.calls) == 1
        row = status(engine, "two_hours")
        assert (row["status"], row["fire_count"], row["next_mark"]) == ("fired", 1, None)
        detected = next(e for e in engine.state()["events"] if e["kind"] == "detected")
        assert detected["provoking"] == {"source": "clock"} and detected["first_mark"] == "2025-03-10T11:00:00Z"
        fired = next(e for e in engine.state()["events"] if e["kind"] == "fired")
        assert fired["mark"] == "2025-03-10T11:00:00Z"

    run(main())


def test_a_registered_time_trigger_shows_its_first_mark_at_once():
    """The state read right after `register` shows the first mark, not None until the driver's next tick (a
    snapshot taken just after registering differed from one taken a second later: seen as a rare failure of the
    control-plane test that checks refused writes change nothing)."""
    engine, _clock, _actions = make_engine(handlers())
    engine.register({"triggers": [timed("two_hours", at="PT2H"), timed("noon", at="2025-03-10T12:00:00Z")]})
    assert status(engine, "two_hours")["next_mark"] == "2025-03-10T11:00:00Z"
    assert status(engine, "noon")["next_mark"] == "2025-03-10T12:00:00Z"


def test_at_an_instant_and_a_tool_call_is_a_tick():
    async def main():
        engine, clock, actions = make_engine(handlers())
        engine.register({"triggers": [timed("noon", at="2025-03-10T12:00:00Z")]})
        clock.advance(3 * 3600)
        # no tick: the next tool call (by anyone, even an error) evaluates time triggers
        await engine.on_tool_call("echo", {}, {"isError": True, "content": []}, "nobody")
        await settle(engine)
        assert actions.tool_calls("ping") != []

    run(main())


def test_time_triggers_wait_for_an_armed_clock():
    async def main():
        clock = ManualClock(None)
        engine, _, _actions = make_engine(handlers(), clock=clock)
        engine.register({"triggers": [timed("soon", at="PT1M")]})
        await settle(engine)
        assert status(engine, "soon")["next_mark"] is None
        clock.arm("2025-03-10T09:00:00Z")
        clock.advance(60)
        await settle(engine)
        assert status(engine, "soon")["status"] == "fired"
        assert "virtual_time" not in engine.state()["events"][0]  # 'added' happened while unarmed

    run(main())


def test_every_with_count_and_until():
    async def main():
        engine, clock, _actions = make_engine(handlers())
        engine.register({"triggers": [timed("three", every="PT1H", count=3),
                                      timed("until", every="PT30M", until="PT1H30M")]})
        for _ in range(6):
            clock.advance(3600)
            await settle(engine)
        assert status(engine, "three")["fire_count"] == 3
        assert status(engine, "three")["status"] == "fired"
        assert status(engine, "until")["fire_count"] == 3  # 09:30, 10:00, 10:30
        assert status(engine, "until")["status"] == "fired"

    run(main())


def test_every_recurs_and_reports_its_next_mark():
    async def main():
        engine, clock, _actions = make_engine(handlers())
        engine.register({"triggers": [timed("hourly", every="PT1H")]})
        clock.advance(3600)
        await settle(engine)
        row = status(engine, "hourly")
        assert (row["status"], row["fire_count"], row["next_mark"]) == ("armed", 1, "2025-03-10T11:00:00Z")

    run(main())


def test_catch_up_is_bounded_and_drains_on_later_looks():
    async def main():
        engine, clock, actions = make_engine(handlers())
        engine.register({"triggers": [timed("second", every="PT1S")]})
        clock.advance(1500)
        await settle(engine)  # drain looks again after each burst
        detected = [e for e in engine.state()["events"] if e["kind"] == "detected"]
        assert [(e["due"], e["capped"]) for e in detected] == [(1000, True), (500, False)]
        assert detected[1]["first_mark"] == "2025-03-10T09:16:41Z"
        assert status(engine, "second")["fire_count"] == 1500
        assert len(actions.calls) == 1500

    run(main())


def test_seeded_exponential_marks_are_deterministic():
    async def marks(seed: int, spec_seed: int = 9) -> list[str]:
        engine, clock, _ = make_engine(handlers(), seed=seed)
        engine.register({"triggers": [timed("poisson", every={"dist": "exp", "mean": "PT1H"}, seed=spec_seed)]})
        clock.advance(24 * 3600)
        await settle(engine)
        return [e["mark"] for e in engine.state()["events"] if e["kind"] == "fired"]

    first = run(marks(1))
    assert len(first) > 5
    assert run(marks(1)) == first
    assert run(marks(2)) != first
    assert run(marks(1, spec_seed=10)) != first


def test_after_offset_anchors_on_the_first_fire_of_its_anchor():
    async def main():
        engine, clock, _actions = make_engine(handlers())
        engine.register({"triggers": [mirror("asked"), timed("nudge", after="asked", offset="PT30M")]})
        clock.advance(3600)
        await settle(engine)
        assert status(engine, "nudge")["next_mark"] is None  # the anchor hasn't fired
        await engine.on_tool_call("search_emails", {"query": "q"}, ok([]), "default")
        await settle(engine)
        anchored = next(e for e in engine.state()["events"] if e["kind"] == "anchored")
        assert anchored["anchor"] == "asked" and anchored["mark"] == "2025-03-10T10:30:00Z"
        clock.advance(1800)
        await settle(engine)
        assert status(engine, "nudge")["status"] == "fired"

    run(main())


def test_unless_cancels_a_deadline():
    async def main():
        engine, clock, actions = make_engine(handlers())
        engine.register({"triggers": [
            timed("deadline", at="PT1H", unless={"tool": "reply", "where": {"args.to": {"equals": "boss"}}}),
            timed("follow_on", after="deadline", offset="PT1H"),
        ]})
        await engine.on_tool_call("reply", {"to": "someone"}, ok(), "default")  # the where doesn't hold
        assert status(engine, "deadline")["status"] == "armed"
        clock.advance(1800)
        await engine.on_tool_call("reply", {"to": "boss"}, ok(), "default")
        clock.advance(7200)
        await settle(engine)
        assert actions.tool_calls("ping") == []
        assert status(engine, "deadline")["status"] == "cancelled"
        assert status(engine, "follow_on")["status"] == "cancelled"  # anchored on it: can never fire
        cancelled = [e for e in engine.state()["events"] if e["kind"] == "cancelled"]
        assert cancelled[0]["provoking"] == {"tool": "reply", "role": "default"}
        assert cancelled[1]["anchor"] == "deadline"

    run(main())


def test_a_reply_after_the_deadline_is_too_late():
    async def main():
        engine, clock, _actions = make_engine(handlers())
        engine.register({"triggers": [timed("deadline", at="PT1H", unless={"tool": "reply", "roles": ["agent"]})]})
        await engine.on_tool_call("reply", {}, ok(), "default")  # not a role unless listens to
        clock.advance(3600)
        await engine.on_tool_call("reply", {}, ok(), "agent")  # the clock passed the mark first
        await settle(engine)
        assert status(engine, "deadline")["status"] == "fired"

    run(main())


def test_rearming_the_clock_reanchors_marks():
    async def main():
        engine, clock, _actions = make_engine(handlers())
        engine.register({"triggers": [timed("two_hours", at="PT2H")]})
        await engine.tick()
        clock.arm("2025-06-01T00:00:00Z")
        await engine.tick()
        event = next(e for e in engine.state()["events"] if e["kind"] == "reanchored")
        assert event["dropped_mark"] == "2025-03-10T11:00:00Z" and event["generation"] == 2
        assert status(engine, "two_hours")["next_mark"] == "2025-06-01T02:00:00Z"

    run(main())


def test_a_failing_time_trigger_retires_as_failed():
    async def main():
        engine, clock, actions = make_engine({"ping": lambda a, r: {"isError": True, "content": []}})
        engine.register({"triggers": [timed("hourly", every="PT1H")]})
        clock.advance(3 * 3600)
        await settle(engine)
        row = status(engine, "hourly")
        assert (row["status"], row["failure_count"], row["next_mark"]) == ("failed", 1, None)
        assert len(actions.calls) == 1  # the rest of the backlog was dropped

    run(main())


def test_on_the_gateways_virtual_clock():
    clock_mod = pytest.importorskip("agentenv_local.gateway.clock")

    async def main():
        real = [1000.0]
        clock = clock_mod.VirtualClock(real_time=lambda: real[0])
        clock.arm("2025-03-10T09:00:00Z", mode="frozen")
        engine, _, _actions = make_engine(handlers(), clock=clock)
        engine.register({"triggers": [timed("at", at="PT2H"), {**mirror("late"), "actions": [
            {"type": "tool", "tool": "ping", "args": {}, "delay": "PT30M"}]}]})
        await engine.on_tool_call("search_emails", {"query": "q"}, ok([]), "default")
        clock.advance("PT30M")
        await settle(engine)
        assert status(engine, "late")["status"] == "fired"
        clock.advance("PT90M")
        await settle(engine)
        assert status(engine, "at")["status"] == "fired"
        assert engine.state()["events"][-1]["virtual_time"] == "2025-03-10T11:00:00Z"
        # a wall clock at 3600x: the driver sleeps only until the next mark is due
        clock.arm("2025-03-10T09:00:00Z", 3600)
        engine.register({"triggers": [timed("soon", at="PT1H")]})
        await engine.tick()
        assert engine._driver_sleep(1.0) == pytest.approx(1.0)
        real[0] += 0.5
        assert engine._driver_sleep(1.0) == pytest.approx(0.5)

    run(main())


def test_run_driver_ticks_on_its_own():
    async def main():
        engine, clock, _actions = make_engine(handlers())
        engine.register({"triggers": [timed("soon", at="PT1M")]})
        clock.advance(60)
        driver = asyncio.create_task(engine.run_driver(interval=0.001))
        for _ in range(200):
            await asyncio.sleep(0.001)
            if status(engine, "soon")["status"] == "fired":
                break
        driver.cancel()
        assert status(engine, "soon")["status"] == "fired"
        assert kinds(engine, "soon")[-1] == "fired"

    run(main())
