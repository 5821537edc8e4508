"""compare.differences on a wall-clock env's dates: a date and time within either run's wall-clock span is the
env's clock reading when it ran (a note, not a difference); a date outside both (a virtual clock's, a record's
own) is compared; a change row's virtual_time one side lacks (its env was unarmed) is not a difference. Against a
replay that gave each call its recorded time (its clocks in mode `schedule`) every date is compared."""

from __future__ import annotations

from datetime import UTC, datetime

from agentenv_local.replay.compare import differences

WHY = ("each run read its own (a replay sets it per call only from a recording that holds each call's time): not "
       "counted as a difference")


def at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def view(stamp: str, span: tuple[str, str], virtual: str | None = None) -> dict:
    row = {"after": {"at": stamp}, **({"virtual_time": virtual} if virtual else {})}
    return {"status": "passed", "score": 1.0, "wall_span": [at(span[0]), at(span[1])],
            "tool_calls": {"step s (agent a) turn 1 tool call 1": {"result": {"at": stamp}}},
            "env_changes": {"env deploy change t insert k": row}}


def test_a_date_read_off_the_wall_clock_is_a_note_and_any_other_date_a_difference():
    recorded = view("2026-12-01T10:00:05Z", ("2026-12-01T10:00:00", "2026-12-01T10:00:09"))
    replayed = view("2026-12-01T10:00:01Z", ("2026-12-01T11:00:00", "2026-12-01T11:00:04"), "2026-12-01T10:00:01Z")
    notes: list[str] = []
    assert differences(recorded, replayed, notes) == []
    assert notes == [
        "step s (agent a) turn 1 tool call 1: result.at: dated by the env's wall clock (\"2026-12-01T10:00:05Z\" | "
        "\"2026-12-01T10:00:01Z\"): " + WHY,
        "env deploy change t insert k: after.at: dated by the env's wall clock (\"2026-12-01T10:00:05Z\" | "
        "\"2026-12-01T10:00:01Z\"): " + WHY]
    elsewhere = view("2025-03-28T09:00:00Z", ("2026-12-01T11:00:00", "2026-12-01T11:00:04"))
    found = differences(recorded, elsewhere)
    assert [(d.where, d.what, d.b) for d in found] == [
        ("step s (agent a) turn 1 tool call 1", "result.at", "2025-03-28T09:00:00Z"),
        ("env deploy change t insert k", "after.at", "2025-03-28T09:00:00Z")]
    armed = view("2026-12-01T10:00:05Z", ("2026-12-01T10:00:00", "2026-12-01T10:00:09"), "2026-12-01T10:00:02Z")
    assert [(d.where, d.what) for d in differences(replayed, armed)] == []  # both within a span, both armed
    assert [(d.where, d.what) for d in differences({**replayed, "wall_span": None}, {**armed, "wall_span": None})] \
        == [("step s (agent a) turn 1 tool call 1", "result.at"), ("env deploy change t insert k", "after.at"),
            ("env deploy change t insert k", "virtual_time")]


def test_against_a_replay_that_set_each_calls_time_every_date_is_compared():
    recorded = view("2026-12-01T10:00:05Z", ("2026-12-01T10:00:00", "2026-12-01T10:00:09"))
    replayed = {**view("2026-12-01T10:00:06Z", ("2026-12-01T11:00:00", "2026-12-01T11:00:04"), "2026-12-01T10:00:06Z"),
                "replay_clocks": {"deploy": {"mode": "schedule", "times": 1, "calls": 1}}}
    notes: list[str] = []
    found = differences(recorded, replayed, notes)
    assert [(d.where, d.what, d.a, d.b) for d in found] == [
        ("step s (agent a) turn 1 tool call 1", "result.at", "2026-12-01T10:00:05Z", "2026-12-01T10:00:06Z"),
        ("env deploy change t insert k", "after.at", "2026-12-01T10:00:05Z", "2026-12-01T10:00:06Z")]
    assert notes == []
    exact = {**view("2026-12-01T10:00:05Z", ("2026-12-01T11:00:00", "2026-12-01T11:00:04"), "2026-12-01T10:00:05Z"),
             "replay_clocks": {"deploy": {"mode": "schedule", "times": 1, "calls": 1}}}
    assert differences(recorded, exact, notes) == [] and notes == []  # the virtual_time only it has is no difference
    frozen = {**replayed, "replay_clocks": {"deploy": {"mode": "frozen", "times": None, "calls": 1}}}
    assert differences(recorded, frozen, notes) == [] and len(notes) == 2  # a recording without the times: notes
