"""GET /triggers/state's shape, the capped event log, and to_dict/from_dict across a restart."""

from __future__ import annotations

import json

import pytest
from test_gateway_triggers_fakes import (
    ManualClock,
    RecordingActions,
    kinds,
    make_engine,
    mirror,
    ok,
    run,
    settle,
    status,
)

from agentenv_local.gateway.triggers import TriggerEngine, TriggerError


def handlers():
    return {"echo": lambda a, r: a.get("text", ""), "search_emails": lambda a, r: [], "ping": lambda a, r: "pong"}


def test_state_shape():
    async def main():
        engine, _, _ = make_engine(handlers())
        engine.register({"triggers": [
            {**mirror("m", where={"args.query": {"regex": "x"}}, roles=["agent"], repeat=True),
             "barrier": {"at": "provoking_call", "timeout_seconds": 5}},
            {"id": "t", "when": {"type": "time", "every": {"dist": "exp", "mean": "PT1H"}, "seed": 3, "count": 2},
             "actions": [{"type": "tool", "tool": "ping", "args": {}}]},
        ]})
        await engine.tick()
        state = engine.state()
        assert set(state) == {"config", "triggers", "events", "events_dropped"}
        assert state["config"] == {"watch_roles": ["default"], "executor_configured": False, "executors": []}
        m, t = state["triggers"]
        assert set(m) == {"id", "type", "when", "status", "detected_at", "fired_at", "fire_count", "failure_count",
                          "last_failure_at", "barrier", "pending", "waiting", "next_mark"}
        assert m == {"id": "m", "type": "action",
                     "when": {"type": "action", "tool": "search_emails", "roles": ["agent"], "repeat": True},
                     "status": "armed", "detected_at": None, "fired_at": None, "fire_count": 0,
                     "failure_count": 0, "last_failure_at": None,
                     "barrier": {"at": "provoking_call", "timeout_seconds": 5},
                     "pending": 0, "waiting": False, "next_mark": None}
        assert t["when"] == {"type": "time", "every": {"dist": "exp", "mean": "PT1H"}, "count": 2, "seed": 3}
        assert t["next_mark"].startswith("2025-03-1")
        event = state["events"][0]
        assert {"seq", "ts", "at", "virtual_time", "kind", "trigger_id"} <= set(event)
        assert (event["seq"], event["kind"], event["trigger_id"]) == (1, "added", "m")
        assert state["events_dropped"] == 0
        json.dumps(state)

    run(main())


def test_event_log_keeps_the_first_1000_and_the_last_9000():
    engine, _, _ = make_engine()
    for n in range(5500):
        engine.register({"triggers": [mirror(f"t{n}")]})
        engine.remove({"ids": [f"t{n}"]})
    state = engine.state()
    events = state["events"]
    assert len(events) == 10000 and state["events_dropped"] == 1000
    assert events[0]["seq"] == 1 and events[999]["seq"] == 1000
    assert events[1000]["seq"] == 2001 and events[-1]["seq"] == 11000


def restart(engine: TriggerEngine, clock, actions=None) -> TriggerEngine:
    data = json.loads(json.dumps(engine.to_dict()))  # what the store keeps
    return TriggerEngine.from_dict(data, clock, actions or RecordingActions(handlers()))


def test_a_delayed_action_resumes_its_remaining_delay_after_a_restart():
    async def before(engine, clock):
        engine.register({"watch_roles": ["agent"], "triggers": [
            {**mirror("late", repeat=True), "actions": [
                {"type": "tool", "tool": "echo", "args": {"text": "${args.query}"}, "delay": "PT1H"}]}]})
        await engine.on_tool_call("search_emails", {"query": "first"}, ok([]), "agent")
        clock.advance(1200)
        await engine.on_tool_call("search_emails", {"query": "second"}, ok([]), "agent")
        await settle(engine)
        await engine.aclose()

    engine, clock, actions = make_engine(handlers())
    run(before(engine, clock))
    assert actions.tool_calls("echo") == []
    saved = engine.state()

    async def after():
        actions2 = RecordingActions(handlers())
        clock.advance(5 * 3600)  # the hub was down a while: that time doesn't count towards the delay
        restored = restart(engine, clock, actions2)
        row = status(restored, "late")
        assert (row["status"], row["pending"]) == ("queued", 1)
        assert restored.state()["events"] == saved["events"]
        assert restored.state()["config"]["watch_roles"] == ["agent"]
        await settle(restored)
        assert status(restored, "late")["waiting"] is True
        clock.advance(2399)
        await settle(restored)
        assert actions2.tool_calls("echo") == []
        clock.advance(1)
        await settle(restored)
        assert [a["text"] for a, _ in actions2.tool_calls("echo")] == ["first"]
        clock.advance(1200)  # the second call's hour ran from its own call, 20 minutes later
        await settle(restored)
        assert [a["text"] for a, _ in actions2.tool_calls("echo")] == ["first", "second"]
        row = status(restored, "late")
        assert (row["status"], row["fire_count"]) == ("armed", 2)
        assert kinds(restored, "late").count("delayed") == 2  # not drawn or announced again

    run(after())


def test_time_triggers_continue_their_sequence_across_a_restart():
    spec = {"id": "poisson", "when": {"type": "time", "every": {"dist": "exp", "mean": "PT1H"}, "seed": 5},
            "actions": [{"type": "tool", "tool": "ping", "args": {}}]}

    async def straight() -> list[str]:
        engine, clock, _ = make_engine(handlers())
        engine.register({"triggers": [spec]})
        for _ in range(2):
            clock.advance(12 * 3600)
            await settle(engine)
        return [e["mark"] for e in engine.state()["events"] if e["kind"] == "fired"]

    async def interrupted() -> list[str]:
        engine, clock, _ = make_engine(handlers())
        engine.register({"triggers": [spec]})
        clock.advance(12 * 3600)
        await settle(engine)
        await engine.aclose()
        restored = restart(engine, clock)
        clock.advance(12 * 3600)
        await settle(restored)
        return [e["mark"] for e in restored.state()["events"] if e["kind"] == "fired"]

    marks = run(straight())
    assert len(marks) > 10
    assert run(interrupted()) == marks


def test_restored_engines_keep_ids_config_and_one_shot_outcomes():
    async def main():
        engine, clock, _ = make_engine(handlers(), seed=3)
        spec = {k: v for k, v in mirror().items() if k != "id"}
        first = engine.register({"executors": {"ops": {"a2a_url": "http://x", "role": "ops"}},
                                 "triggers": [spec]})["added"][0]
        await engine.on_tool_call("search_emails", {"query": "q"}, ok([]), "default")
        await settle(engine)
        restored = restart(engine, clock)
        assert status(restored, first)["status"] == "fired"
        second = restored.register({"triggers": [spec]})["added"][0]
        assert second != first  # the id sequence goes on
        assert restored.state()["config"]["executors"] == ["ops"]
        await restored.on_tool_call("search_emails", {"query": "q"}, ok([]), "default")
        await settle(restored)
        assert status(restored, first)["fire_count"] == 1

    run(main())


def test_a_bad_stored_state_is_refused():
    with pytest.raises(TriggerError) as info:
        TriggerEngine.from_dict({"version": 99}, ManualClock(), RecordingActions())
    assert info.value.status == 500 and "unknown version 99" in info.value.message


EXP_DELAY = {**mirror("exp", repeat=True), "actions": [
    {"type": "tool", "tool": "echo", "args": {}, "delay": {"dist": "exp", "mean": "PT10M", "seed": 4}}]}


def delays(engine: TriggerEngine) -> list[float]:
    return [e["virtual_seconds"] for e in engine.state()["events"] if e["kind"] == "delayed"]


def test_an_exponential_delay_draws_on_across_a_restart():
    async def straight() -> list[float]:
        engine, clock, _ = make_engine(handlers())
        engine.register({"triggers": [EXP_DELAY]})
        for _ in range(3):
            await engine.on_tool_call("search_emails", {"query": "q"}, ok([]), "default")
            clock.advance(10 ** 6)
            await settle(engine)
        return delays(engine)

    async def interrupted() -> list[float]:
        engine, clock, _ = make_engine(handlers())
        engine.register({"triggers": [EXP_DELAY]})
        await engine.on_tool_call("search_emails", {"query": "q"}, ok([]), "default")
        clock.advance(10 ** 6)
        await settle(engine)
        await engine.aclose()
        restored = restart(engine, clock)
        for _ in range(2):
            await restored.on_tool_call("search_emails", {"query": "q"}, ok([]), "default")
            clock.advance(10 ** 6)
            await settle(restored)
        return delays(restored)

    drawn = run(straight())
    assert len(drawn) == 3 and len(set(drawn)) == 3
    assert run(interrupted()) == drawn  # the generator's state was stored, not re-seeded


def test_a_stored_delay_generator_without_state_is_refused():
    engine, clock, _ = make_engine(handlers())
    engine.register({"triggers": [EXP_DELAY]})
    data = json.loads(json.dumps(engine.to_dict()))
    assert list(data["triggers"][0]["delay_rngs"]) == ["0"]
    data["triggers"][0]["delay_rngs"]["0"] = None
    with pytest.raises(TriggerError) as info:
        TriggerEngine.from_dict(data, clock, RecordingActions(handlers()))
    assert info.value.status == 500 and "can't restore the trigger engine" in info.value.message
