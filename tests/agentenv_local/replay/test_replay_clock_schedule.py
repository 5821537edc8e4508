"""How a replay sets a wall-clock env's clock from the record: a `sync_env_clock` step in mode `schedule` holding
the time of each call the recorded gateway proxied to that env (its `tool_call` events' stamps, by deploy step;
refused calls and other envs' calls not counted); a recording lacking a call's time freezes the clock instead, with
a note saying why; a replay that made more calls than the recording timed is noted. (The replays themselves, exact
to the date: test_replay_accounts_payable.py; the clock mode over a real gateway: tests/agentenv_local/gateway/
test_gateway_clock_schedule.py.)"""

from __future__ import annotations

from agentenv_local.replay.record import replay_clocks
from agentenv_local.replay.replay import schedule_notes
from agentenv_local.replay.task import replay_steps

STEPS = [{"id": "deploy", "type": "deploy_env", "env_id": "@local/p/ap"},
         {"id": "other", "type": "deploy_env", "env_id": "@local/p/mail"},
         {"id": "check", "type": "env_outcome_verifier", "env_id": "@local/p/ap", "depends_on": ["deploy"]}]
RUN = {"run_id": "r", "started_at": 1796165826.0,
       "context": {"deployed_envs": [{"instance_id": "i-ap", "step_id": "deploy"},
                                     {"instance_id": "i-mail", "step_id": "other"}]}}


def call(instance: str, stamp: str | None, kind: str = "env.tool_call") -> dict:
    body = {"event_type": kind.removeprefix("env."), "instance_id": instance, "tool_call": {"function_name": "t"}}
    return {"kind": kind, "body": {**body, **({"timestamp_utc": stamp} if stamp else {})}}


def clock_steps(steps: list[dict]) -> dict[str, dict]:
    return {s["id"]: s for s in steps if s["type"] == "sync_env_clock"}


def test_each_env_is_armed_with_its_own_calls_times_in_order():
    events = [call("i-ap", "2026-12-01T22:57:06.9+00:00"), call("i-mail", "2026-12-01T22:57:07+00:00"),
              call("i-ap", None, "env.tool_call_denied"), call("i-ap", "2026-12-01T22:57:08.25+00:00")]
    steps, notes = replay_steps(STEPS, RUN, events, None, {})
    clocks = clock_steps(steps)
    assert clocks["replay-clock-deploy"] == {
        "id": "replay-clock-deploy", "type": "sync_env_clock", "env_id": "@local/p/ap", "depends_on": ["deploy"],
        "virtual_time": "2026-12-01T22:57:06.9+00:00", "mode": "schedule",
        "schedule": ["2026-12-01T22:57:06.9+00:00", "2026-12-01T22:57:08.25+00:00"]}
    assert clocks["replay-clock-other"]["schedule"] == ["2026-12-01T22:57:07+00:00"]
    check = next(s for s in steps if s["id"] == "check")
    assert check["depends_on"] == ["deploy", "replay-clock-deploy"] and notes == []


def test_a_recording_without_each_calls_time_freezes_the_clock_and_says_why():
    events = [call("i-ap", "2026-12-01T22:57:06.9+00:00"), call("i-ap", None)]
    steps, notes = replay_steps(STEPS, RUN, events, None, {})
    clocks = clock_steps(steps)
    assert clocks["replay-clock-deploy"]["mode"] == "frozen" and "schedule" not in clocks["replay-clock-deploy"]
    assert clocks["replay-clock-deploy"]["virtual_time"] == "2026-12-01T22:57:06.9+00:00"
    assert notes == ["env deploy: the recording holds no time for 1 of its 2 calls, so its clock is frozen at "
                     "2026-12-01T22:57:06.9+00:00, not set per call: a date it wrote otherwise is a note, not a "
                     "difference"]
    # an env the recording never called: frozen at the run's start, nothing it dated to note
    assert clocks["replay-clock-other"] == {
        "id": "replay-clock-other", "type": "sync_env_clock", "env_id": "@local/p/mail", "depends_on": ["other"],
        "virtual_time": "2026-12-01T22:57:06Z", "mode": "frozen"}


def test_a_replay_that_outran_its_schedule_is_noted_once():
    replay = {**RUN, "context": {**RUN["context"], "metadata": {"clock_configurations": [
        {"step_id": "replay-clock-deploy", "mode": "schedule", "schedule_length": 1},
        {"step_id": "replay-clock-other", "mode": "schedule", "schedule_length": 1}]}}}
    events = [call("i-ap", "2026-12-01T22:57:06+00:00"), call("i-ap", "2026-12-01T22:57:06+00:00"),
              call("i-ap", "2026-12-01T22:57:06+00:00"), call("i-mail", "2026-12-01T22:57:06+00:00")]
    view = {"replay_clocks": replay_clocks(replay, events)}
    assert view["replay_clocks"] == {"deploy": {"mode": "schedule", "times": 1, "calls": 3},
                                     "other": {"mode": "schedule", "times": 1, "calls": 1}}
    assert schedule_notes([view, view]) == [
        "env deploy: the replay made 3 calls to it, the recording 1: from call 2 on, each was given the recording's "
        "last time (the env's clock held it)"]
    assert replay_clocks(RUN, events) == {}  # not a replay
