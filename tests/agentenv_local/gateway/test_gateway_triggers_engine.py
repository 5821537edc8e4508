"""Action and state triggers, actions (tool, permission, nl), verify, barriers, delays and hours."""

from __future__ import annotations

import asyncio

from test_gateway_triggers_fakes import (
    err,
    kinds,
    make_engine,
    mirror,
    ok,
    run,
    settle,
    status,
)

EXECUTOR = {"a2a_url": "http://127.0.0.1:9", "role": "helper"}


def echo_handlers(**extra):
    return {"echo": lambda args, role: args.get("text", ""), "search_emails": lambda a, r: [], **extra}


def test_action_trigger_mirrors_a_call_once():
    async def main():
        trajectory = []
        engine, _, actions = make_engine(echo_handlers(), on_event=trajectory.append)
        engine.register({"triggers": [mirror()]})
        await engine.on_tool_call("search_emails", {"query": "hello world!"}, ok([]), "default")
        await settle(engine)
        assert actions.tool_calls("echo") == [({"text": "hello world!"}, None)]
        await engine.on_tool_call("search_emails", {"query": "again"}, ok([]), "default")
        await settle(engine)
        assert len(actions.tool_calls("echo")) == 1  # a one-shot
        row = status(engine, "mirror")
        assert (row["status"], row["fire_count"], row["failure_count"]) == ("fired", 1, 0)
        assert row["fired_at"] and row["detected_at"]
        assert kinds(engine, "mirror") == ["added", "detected", "action_ok", "fired"]
        ok_event = next(e for e in engine.state()["events"] if e["kind"] == "action_ok")
        assert ok_event["detail"] == {"tool": "echo", "args": {"text": {"redacted": {"type": "str", "len": 12}}}}
        assert ok_event["virtual_time"] == "2025-03-10T09:00:00Z"
        assert {e["event_type"] for e in trajectory} == {"trigger_fired", "internal_tool_call"}
        internal = next(e for e in trajectory if e["event_type"] == "internal_tool_call")
        assert internal["arguments"] == {"text": {"redacted": {"type": "str", "len": 12}}}
        assert internal["ok"] is True and internal["trigger_id"] == "mirror" and len(internal["result_sha256"]) == 16

    run(main())


def test_errors_and_where_predicates_gate_detection():
    async def main():
        engine, _, actions = make_engine(echo_handlers())
        engine.register({"triggers": [mirror(where={"args.query": {"regex": "^invoice"},
                                                    "result.total": {"equals": 1}})]})
        await engine.on_tool_call("search_emails", {"query": "invoice 1"}, err("no"), "default")
        await engine.on_tool_call("search_emails", {"query": "memo"}, ok({"total": 1}), "default")
        await engine.on_tool_call("search_emails", {"query": "invoice 2"}, ok({"total": 2}), "default")
        await engine.on_tool_call("echo", {"query": "invoice 3"}, ok({"total": 1}), "default")
        await settle(engine)
        assert actions.tool_calls("echo") == []
        await engine.on_tool_call("search_emails", {"query": "invoice 4"}, ok({"total": 1}), "default")
        await settle(engine)
        assert actions.tool_calls("echo") == [({"text": "invoice 4"}, None)]

    run(main())


def test_provoking_roles():
    async def main():
        engine, _, actions = make_engine(echo_handlers())
        engine.register({"watch_roles": ["agent"], "executors": {"h": EXECUTOR},
                         "triggers": [mirror("watched", repeat=True),
                                      mirror("listed", roles=["bob"], repeat=True)]})
        for role in ("default", "agent", "helper", "bob"):
            await engine.on_tool_call("search_emails", {"query": role}, ok([]), role)
            await settle(engine)
        assert [a["text"] for a, _ in actions.tool_calls("echo")] == ["agent", "bob"]
        # an executor's own role never provokes unless a trigger lists it
        assert status(engine, "watched")["fire_count"] == 1
        assert status(engine, "listed")["fire_count"] == 1

    run(main())


def test_repeat_triggers_queue_calls_and_drain_them_in_order():
    async def main():
        gate = asyncio.Event()

        async def slow_echo(args, role):
            await gate.wait()
            return args["text"]

        engine, _, actions = make_engine(echo_handlers(echo=slow_echo))
        engine.register({"triggers": [mirror(repeat=True)]})
        for n in range(3):
            await engine.on_tool_call("search_emails", {"query": f"q{n}"}, ok([]), "default")
        await asyncio.sleep(0)
        row = status(engine, "mirror")
        assert (row["status"], row["pending"]) == ("queued", 2)
        gate.set()
        await settle(engine)
        assert [a["text"] for a, _ in actions.tool_calls("echo")] == ["q0", "q1", "q2"]
        row = status(engine, "mirror")
        assert (row["status"], row["fire_count"], row["pending"]) == ("armed", 3, 0)
        detected = [e for e in engine.state()["events"] if e["kind"] == "detected"]
        assert [e.get("queued") for e in detected] == [None, 1, 2]

    run(main())


def test_a_failed_fire_rearms_and_records_the_failure():
    async def main():
        replies = [err("mailbox full"), "fine"]
        engine, _, _actions = make_engine(echo_handlers(echo=lambda a, r: replies.pop(0)))
        engine.register({"triggers": [mirror()]})
        await engine.on_tool_call("search_emails", {"query": "one"}, ok([]), "default")
        await settle(engine)
        row = status(engine, "mirror")
        assert (row["status"], row["failure_count"], row["fire_count"]) == ("armed", 1, 0)
        assert row["last_failure_at"]
        failed = next(e for e in engine.state()["events"] if e["kind"] == "action_failed")
        assert failed["detail"] == "mailbox full" and failed["tool"] == "echo"
        await engine.on_tool_call("search_emails", {"query": "two"}, ok([]), "default")
        await settle(engine)
        assert status(engine, "mirror")["status"] == "fired"
        assert kinds(engine, "mirror") == ["added", "detected", "action_failed", "failed", "detected",
                                           "action_ok", "fired"]

    run(main())


def test_unresolved_placeholder_and_unknown_tool_fail_the_action():
    async def main():
        engine, _, actions = make_engine({"search_emails": lambda a, r: []})
        engine.register({"triggers": [
            {"id": "needs_cc", "when": {"type": "action", "tool": "search_emails"},
             "actions": [{"type": "tool", "tool": "echo", "args": {"cc": "${args.cc}"}}]},
            {"id": "no_tool", "when": {"type": "action", "tool": "search_emails"},
             "actions": [{"type": "tool", "tool": "nope", "args": {}}]},
        ]})
        await engine.on_tool_call("search_emails", {"query": "x"}, ok([]), "default")
        await settle(engine)
        events = {e["trigger_id"]: e for e in engine.state()["events"] if e["kind"] == "action_failed"}
        assert events["needs_cc"]["detail"] == "unresolved placeholder ${args.cc}"
        assert events["no_tool"]["detail"] == "unknown tool 'nope'"
        assert actions.tool_calls("echo") == []
        assert status(engine, "needs_cc")["status"] == "armed"

    run(main())


def test_tool_action_as_role_and_verify_with_it():
    async def main():
        store = []

        def save(args, role):
            store.append((args["text"], role))
            return "saved"

        engine, _, actions = make_engine({"search_emails": lambda a, r: [], "save": save,
                                          "list_saved": lambda a, r: {"items": [{"text": t} for t, _ in store]}})
        engine.register({"triggers": [{
            "id": "t", "when": {"type": "action", "tool": "search_emails"},
            "actions": [{"type": "tool", "tool": "save", "as": " bot ", "args": {"text": "${args.query}"},
                         "verify": {"tool": "list_saved", "args": {}, "extract": "items[*].text",
                                    "predicate": {"equals": "memo"}}}]}]})
        await engine.on_tool_call("search_emails", {"query": "memo"}, ok([]), "default")
        await settle(engine)
        assert store == [("memo", "bot")]
        assert actions.tool_calls("list_saved") == [({}, "bot")]
        assert kinds(engine, "t")[-3:] == ["verify_ok", "action_ok", "fired"]
        assert engine.state()["events"][-2]["detail"]["as"] == "bot"

    run(main())


def test_permission_action():
    async def main():
        engine, _, actions = make_engine(echo_handlers())
        engine.register({"triggers": [{"id": "lock", "when": {"type": "action", "tool": "echo"},
                                       "actions": [{"type": "permission", "action": "disable", "role": "agent",
                                                    "tools": ["echo"]},
                                                   {"type": "permission", "action": "enable", "role": "*",
                                                    "tools": "*"}]}]})
        await engine.on_tool_call("echo", {"text": "hi"}, ok("hi"), "default")
        await settle(engine)
        assert actions.permissions == [("disable", "agent", ["echo"]), ("enable", "*", "*")]
        details = [e["detail"] for e in engine.state()["events"] if e["kind"] == "action_ok"]
        assert details[0] == {"role": "agent", "action": "disable", "tools": ["echo"]}
        assert details[1]["tools"] == ["*"]

    run(main())


def test_barrier_holds_the_provoking_call_until_the_fire_completes():
    async def main():
        async def slow_echo(args, role):
            for _ in range(5):
                await asyncio.sleep(0)
            return "ok"

        engine, _, _actions = make_engine(echo_handlers(echo=slow_echo))
        engine.register({"triggers": [{**mirror("held"), "barrier": {"at": "provoking_call"}}]})
        await engine.on_tool_call("search_emails", {"query": "q"}, ok([]), "default")
        assert status(engine, "held")["status"] == "fired"  # done before the call returned
        assert status(engine, "held")["barrier"] == {"at": "provoking_call"}

        engine2, _, _ = make_engine(echo_handlers(echo=slow_echo))
        engine2.register({"triggers": [mirror("free")]})
        await engine2.on_tool_call("search_emails", {"query": "q"}, ok([]), "default")
        assert status(engine2, "free")["status"] == "firing"  # without a barrier the call does not wait
        await settle(engine2)

    run(main())


def test_barrier_timeout_releases_the_call_and_is_recorded():
    async def main():
        never = asyncio.Event()

        async def stuck(args, role):
            await never.wait()

        trajectory = []
        engine, _, _ = make_engine(echo_handlers(echo=stuck), on_event=trajectory.append)
        engine.register(
            {"triggers": [{**mirror("held"), "barrier": {"at": "provoking_call", "timeout_seconds": 0.02}}]})
        await engine.on_tool_call("search_emails", {"query": "q"}, ok([]), "default")
        assert status(engine, "held")["status"] == "firing"
        timeout = next(e for e in trajectory if e["event_type"] == "trigger_barrier_timeout")
        assert timeout["trigger_ids"] == ["held"] and timeout["timeout_seconds"] == 0.02
        await engine.aclose()

    run(main())


def count_state(n_holder):
    return {"count": lambda a, r: {"n": n_holder[0]}, "add": lambda a, r: n_holder.__setitem__(0, n_holder[0] + 1),
            "peek": lambda a, r: "read", "alert": lambda a, r: "ok"}


def test_state_trigger_re_evaluates_after_writes_only():
    async def main():
        n = [0]
        engine, _, actions = make_engine(count_state(n), read_only={"peek"})
        engine.register({"triggers": [{"id": "three", "when": {"type": "state", "check": {
            "tool": "count", "args": {}, "extract": "n", "predicate": {"equals": 3}}},
            "actions": [{"type": "tool", "tool": "alert", "args": {"level": "high"}}]}]})
        for _ in range(3):
            n[0] += 1
            await engine.on_tool_call("add", {}, ok("added"), "default")
            await settle(engine)
        assert len(actions.tool_calls("count")) == 3
        assert len(actions.tool_calls("alert")) == 1
        await engine.on_tool_call("peek", {}, ok("read"), "default")
        await settle(engine)
        assert len(actions.tool_calls("count")) == 3  # read-only calls skip re-evaluation
        row = status(engine, "three")
        assert (row["status"], row["fire_count"]) == ("fired", 1)
        detected = next(e for e in engine.state()["events"] if e["kind"] == "detected")
        assert detected["provoking"] == {"tool": "add", "role": "default"}

    run(main())


def test_state_check_steps_bind_values_for_later_steps():
    async def main():
        inbox = {"messages": [{"id": "m1", "from": "boss", "subject": "report"},
                              {"id": "m2", "from": "ceo", "subject": "urgent"}]}
        flagged = {"m2": True}
        handlers = {"list": lambda a, r: inbox, "get_flag": lambda a, r: {"flagged": flagged.get(a["id"], False)},
                    "write": lambda a, r: "ok", "alert": lambda a, r: "ok"}
        engine, _, actions = make_engine(handlers)
        engine.register({"triggers": [{"id": "flag", "when": {"type": "state", "check": {"steps": [
            {"tool": "list", "args": {}, "extract": {"path": "messages", "match": {"from": {"equals": "ceo"}},
                                                     "take": "id"}, "bind": "mid"},
            {"tool": "get_flag", "args": {"id": "${mid}"}, "extract": "flagged", "predicate": {"equals": True}},
        ]}}, "actions": [{"type": "tool", "tool": "alert", "args": {}}]}]})
        await engine.on_tool_call("write", {}, ok(), "default")
        await settle(engine)
        assert actions.tool_calls("get_flag") == [({"id": "m2"}, None)]
        assert status(engine, "flag")["status"] == "fired"

    run(main())


def test_state_check_failures():
    async def main():
        handlers = {"list": lambda a, r: {"messages": []}, "broken": lambda a, r: err("down"),
                    "write": lambda a, r: "ok", "alert": lambda a, r: "ok"}
        engine, _, actions = make_engine(handlers)
        engine.register({"triggers": [
            {"id": "empty_bind", "when": {"type": "state", "check": {"steps": [
                {"tool": "list", "args": {}, "extract": "messages", "bind": "m"},
                {"tool": "alert", "args": {"m": "${m}"}, "predicate": {"exists": True}}]}},
             "actions": [{"type": "tool", "tool": "alert", "args": {}}]},
            {"id": "errors", "when": {"type": "state", "check": {"tool": "broken", "args": {},
                                                                 "predicate": {"exists": True}}},
             "actions": [{"type": "tool", "tool": "alert", "args": {}}]},
            {"id": "bad_path", "when": {"type": "state", "check": {"tool": "list", "args": {},
                                                                   "extract": "messages[x]",
                                                                   "predicate": {"exists": True}}},
             "actions": [{"type": "tool", "tool": "alert", "args": {}}]},
        ]})
        for _ in range(2):
            await engine.on_tool_call("write", {}, ok(), "default")
            await settle(engine)
        assert actions.tool_calls("alert") == []
        assert [status(engine, t)["status"] for t in ("empty_bind", "errors", "bad_path")] == ["armed"] * 3
        assert kinds(engine, "bad_path") == ["added", "eval_error", "eval_error"]  # each re-evaluation
        assert status(engine, "bad_path")["failure_count"] == 2
        assert kinds(engine, "errors") == ["added"]

    run(main())


def test_nl_action_with_verify_retries_once():
    async def main():
        done = []
        handlers = {**echo_handlers(), "check_done": lambda a, r: {"done": bool(done)}}
        engine, _, actions = make_engine(handlers)
        # the executor does the work only on the second try
        actions.on_nl = lambda instruction: done.append(1) if "did not pass verification" in instruction else None
        engine.register({"executor": EXECUTOR, "triggers": [{
            "id": "esc", "when": {"type": "action", "tool": "search_emails"},
            "actions": [{"type": "nl", "instruction": "Escalate ${HOME} to finance.",
                         "verify": {"tool": "check_done", "args": {}, "extract": "done",
                                    "predicate": {"equals": True}}}]}]})
        await engine.on_tool_call("search_emails", {"query": "q"}, ok([]), "default")
        await settle(engine)
        assert len(actions.nl) == 2
        executor, first, context = actions.nl[0]
        assert executor["a2a_url"] == "http://127.0.0.1:9" and executor["role"] == "helper"
        assert first == "Escalate ${HOME} to finance." and context == "trigger-esc"
        assert actions.nl[1][1].startswith(first) and "did not pass verification" in actions.nl[1][1]
        assert kinds(engine, "esc") == ["added", "detected", "verify_failed", "verify_ok", "action_ok", "fired"]

    run(main())


def test_nl_action_failures():
    async def main():
        handlers = {**echo_handlers(), "check_done": lambda a, r: {"done": False}}
        engine, _, actions = make_engine(handlers)
        engine.register({"executors": {"ops": EXECUTOR}, "triggers": [
            {"id": "verify", "when": {"type": "action", "tool": "search_emails"},
             "actions": [{"type": "nl", "instruction": "do it", "executor": "ops",
                          "verify": {"tool": "check_done", "args": {}, "extract": "done",
                                     "predicate": {"equals": True}}}]}]})
        await engine.on_tool_call("search_emails", {"query": "q"}, ok([]), "default")
        await settle(engine)
        failed = [e for e in engine.state()["events"] if e["kind"] == "action_failed"]
        assert failed[-1]["detail"] == "verification failed after retry" and failed[-1]["executor"] == "ops"
        actions.nl_replies = [None]
        await engine.on_tool_call("search_emails", {"query": "q"}, ok([]), "default")
        await settle(engine)
        failed = [e for e in engine.state()["events"] if e["kind"] == "action_failed"]
        assert failed[-1]["detail"] == "executor attempt 1 did not complete"
        assert status(engine, "verify")["failure_count"] == 2

    run(main())


def test_executor_hours_defer_nl_actions_in_virtual_time():
    async def main():
        # Saturday 2025-03-08 10:00 UTC = 05:00 in New York
        from test_gateway_triggers_fakes import ManualClock
        clock = ManualClock("2025-03-08T10:00:00Z")
        engine, _, actions = make_engine(echo_handlers(), clock=clock)
        hours = {"start": "09:00", "end": "17:00", "time_zone": "America/New_York",
                 "days": ["mon", "tue", "wed", "thu", "fri"]}
        engine.register({"executor": {**EXECUTOR, "hours": hours}, "triggers": [
            {"id": "later", "when": {"type": "action", "tool": "search_emails"},
             "actions": [{"type": "nl", "instruction": "follow up"}]}]})
        await engine.on_tool_call("search_emails", {"query": "q"}, ok([]), "default")
        await settle(engine)
        assert actions.nl == []
        row = status(engine, "later")
        assert (row["status"], row["waiting"]) == ("firing", True)
        deferred = next(e for e in engine.state()["events"] if e["kind"] == "deferred")
        assert deferred["until"] == "2025-03-10T13:00:00Z"  # Monday 09:00 EDT
        clock.advance(2 * 86400 + 3 * 3600 - 1)
        await settle(engine)
        assert actions.nl == []
        clock.advance(1)
        await settle(engine)
        assert [i for _, i, _ in actions.nl] == ["follow up"]
        assert status(engine, "later")["status"] == "fired"

    run(main())


def test_action_delay_waits_in_virtual_time():
    async def main():
        engine, clock, actions = make_engine(echo_handlers())
        engine.register({"triggers": [{**mirror("late"), "actions": [
            {"type": "tool", "tool": "echo", "args": {"text": "${args.query}"}, "delay": "PT1H"}]}]})
        await engine.on_tool_call("search_emails", {"query": "q"}, ok([]), "default")
        await settle(engine)
        assert actions.tool_calls("echo") == []
        assert status(engine, "late")["waiting"] is True
        delayed = next(e for e in engine.state()["events"] if e["kind"] == "delayed")
        assert delayed["virtual_seconds"] == 3600
        clock.advance(1800)
        await settle(engine)
        assert actions.tool_calls("echo") == []
        clock.advance(1800)
        await settle(engine)
        assert actions.tool_calls("echo") == [({"text": "q"}, None)]
        fired = status(engine, "late")
        assert (fired["status"], fired["waiting"]) == ("fired", False)
        ok_event = next(e for e in engine.state()["events"] if e["kind"] == "action_ok")
        assert ok_event["virtual_time"] == "2025-03-10T10:00:00Z"

    run(main())


def test_delays_of_queued_calls_run_from_their_own_call():
    async def main():
        engine, clock, actions = make_engine(echo_handlers())
        engine.register({"triggers": [{**mirror("late", repeat=True), "actions": [
            {"type": "tool", "tool": "echo", "args": {"text": "${args.query}"}, "delay": "PT1H"}]}]})
        await engine.on_tool_call("search_emails", {"query": "a"}, ok([]), "default")
        clock.advance(600)
        await engine.on_tool_call("search_emails", {"query": "b"}, ok([]), "default")
        clock.advance(3000)
        await settle(engine)
        assert [a["text"] for a, _ in actions.tool_calls("echo")] == ["a"]
        clock.advance(600)
        await settle(engine)
        assert [a["text"] for a, _ in actions.tool_calls("echo")] == ["a", "b"]

    run(main())


def test_seeded_exponential_delay_is_deterministic():
    async def delays(seed: int) -> list[float]:
        engine, clock, _ = make_engine(echo_handlers(), seed=seed)
        engine.register({"triggers": [{**mirror("r", repeat=True), "actions": [
            {"type": "tool", "tool": "echo", "args": {}, "delay": {"dist": "exp", "mean": "PT10M", "seed": 4}}]}]})
        for _ in range(3):
            await engine.on_tool_call("search_emails", {"query": "q"}, ok([]), "default")
            clock.advance(10 ** 6)
            await settle(engine)
        return [e["virtual_seconds"] for e in engine.state()["events"] if e["kind"] == "delayed"]

    first, again, other = run(delays(1)), run(delays(1)), run(delays(2))
    assert first == again and first != other and len(set(first)) == 3


def test_on_event_may_be_async_and_its_failures_do_not_break_firing():
    async def main():
        seen = []

        async def record(event):
            seen.append(event["event_type"])
            raise RuntimeError("store down")

        engine, _, _actions = make_engine(echo_handlers(), on_event=record)
        engine.register({"triggers": [mirror()]})
        await engine.on_tool_call("search_emails", {"query": "q"}, ok([]), "default")
        await settle(engine)
        assert seen == ["trigger_fired", "internal_tool_call"]
        assert status(engine, "mirror")["status"] == "fired"

    run(main())


def test_remove_stops_a_fire_in_progress():
    async def main():
        engine, clock, actions = make_engine(echo_handlers())
        engine.register({"triggers": [{**mirror("late"), "actions": [
            {"type": "tool", "tool": "echo", "args": {}, "delay": "PT1H"}]}]})
        await engine.on_tool_call("search_emails", {"query": "q"}, ok([]), "default")
        await settle(engine)
        engine.remove({"ids": ["late"]})
        clock.advance(7200)
        await settle(engine)
        assert actions.tool_calls("echo") == []
        assert kinds(engine)[-1] == "removed"

    run(main())


def test_on_change_and_executor_attribution():
    async def main():
        changes = []
        engine, _, actions = make_engine(echo_handlers(), on_change=lambda: changes.append(1))
        seen_causes = []
        actions.on_nl = lambda instruction: seen_causes.append(engine.caused_by("helper"))
        engine.register({"executor": EXECUTOR, "triggers": [
            {"id": "ask", "when": {"type": "action", "tool": "search_emails"},
             "actions": [{"type": "nl", "instruction": "reply to the customer"}]}]})
        assert changes
        await engine.on_tool_call("search_emails", {"query": "q"}, ok([]), "default")
        await settle(engine)
        assert seen_causes == [[{"trigger_id": "ask", "action_index": 0, "fire": 1}]]
        assert engine.caused_by("helper") == []
        assert engine.statuses() == {"ask": "fired"}

    run(main())
