"""`agentenv replay` and `agentenv runs diff` on real runs of examples/support (offline, the real CLI).

One project records the episode (and an eval of 2 runs); a changed env (crm's update_deal_stage refuses
closed_won unless the note names the order form) is stored as office v2 by running the changed bundle once.
"""

from __future__ import annotations

import json
import shutil

import pytest
from kits.replay import ROOT, agentenv, newest_run, ok, project_with

BUNDLE = ROOT / "examples" / "support"
RULE_BEFORE = '''        deal = self._deal(deal_id)
        if stage == deal["stage"]:'''
RULE_AFTER = '''        deal = self._deal(deal_id)
        if stage == "closed_won" and "order form" not in (note or ""):
            raise EnvError("note_required", f"{deal_id}: closing a deal won needs a note naming the order form")
        if stage == deal["stage"]:'''
UPDATE = "step chat (agent solver) turn 2 tool call 2"  # the solver's update_deal_stage
# What the changed rule changes, and nothing else: that tool result (as the agent and the env saw it), the
# deal's state the outcome verifier read, the env's changelog at the episode's end (neither the deal's update nor
# the activity it logs) and its head in the gateway's /state, the outcome criterion, the verifier's and the run's
# score, the status.
EXPECTED = {
    ("status", "value"), ("score", "value"),
    (UPDATE, "result"), (UPDATE, "is_error"),
    ("env deploy change deals update deal-101", "value"), ("env deploy change activities insert act-5", "value"),
    ("env deploy state", "changelog_id"),
    ("env call 4 (update_deal_stage, role agent)", "result"),
    ("env call 4 (update_deal_stage, role agent)", "is_error"),
    ("env call 5 (list_deals, role default)", "result.2.stage"),
    ("verifier outcome score", "value"),
    ("verifier outcome criterion deal_won", "result"), ("verifier outcome criterion deal_won", "score"),
}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> dict:
    """A project with a recorded support episode (run `a`) and an eval `regress` of 2 runs of the same task."""
    project = project_with(tmp_path_factory.mktemp("replay"), BUNDLE, "support")
    ok(agentenv(project, "run", "support"))
    run_a = newest_run(project)
    task_id = json.loads(ok(agentenv(project, "runs", "show", run_a, "--json")))["task_id"]
    (project / "regress.toml").write_text(f"tasks = [{json.dumps(task_id)}]\n")
    ok(agentenv(project, "eval", "create", "regress.toml", "--id", "regress"))
    ok(agentenv(project, "eval", "run", "--id", "regress", "--k", "2"))
    return {"project": project, "a": run_a}


@pytest.fixture(scope="module")
def changed(recorded) -> str:
    """The bundle with crm's new rule, stored by running it once (office v2, crm v2): that run's id."""
    project = recorded["project"]
    server = project / "support" / "envs" / "crm" / "server.py"
    text = server.read_text()
    assert RULE_BEFORE in text
    server.write_text(text.replace(RULE_BEFORE, RULE_AFTER))
    out = agentenv(project, "run", "support")
    assert out.returncode == 1 and "note_required" in out.stdout + out.stderr, out.stdout + out.stderr
    return newest_run(project)


def test_an_unchanged_env_replays_with_no_difference_20_times_out_of_20(recorded):
    out = agentenv(recorded["project"], "replay", recorded["a"], "--times", "20", "--json")
    report = json.loads(ok(out))
    assert report["run_id"] == recorded["a"] and len(set(report["replay_run_ids"])) == 20
    # no difference from the recording, and none among the 20 replays either (randomness would be a note)
    assert report["differences"] == [] and report["notes"] == []
    text = ok(agentenv(recorded["project"], "replay", recorded["a"]))
    assert text.strip().endswith("No differences.")


def test_a_changed_tool_rule_shows_exactly_its_differences(recorded, changed):
    out = agentenv(recorded["project"], "replay", recorded["a"], "--env-version", "office=2", "--json")
    report = json.loads(ok(out, 1))
    assert {(d["where"], d["what"]) for d in report["differences"]} == EXPECTED
    assert len(report["differences"]) == len(EXPECTED)
    found = {(d["where"], d["what"]): d for d in report["differences"]}
    assert found[(UPDATE, "result")]["b"].startswith("note_required")
    assert found[("env call 5 (list_deals, role default)", "result.2.stage")]["a"] == "closed_won"
    assert found[("env call 5 (list_deals, role default)", "result.2.stage")]["b"] == "negotiation"
    assert (found[("status", "value")]["a"], found[("status", "value")]["b"]) == ("passed", "failed")
    assert len(report["replay_run_ids"]) == 2  # differences: replayed twice, to tell randomness from a change
    text = ok(agentenv(recorded["project"], "replay", recorded["a"], "--env-version", "2"), 1)
    assert f"{UPDATE}: is_error: recorded false | replayed true" in text
    assert text.strip().endswith(f"{len(EXPECTED)} difference(s).")


def test_an_env_version_that_does_not_exist_is_refused_and_nothing_is_stored(recorded):
    before = ok(agentenv(recorded["project"], "task", "list", "--json"))
    out = agentenv(recorded["project"], "replay", recorded["a"], "--env-version", "office=99")
    assert out.returncode == 1 and "office v99 not found" in out.stderr and not out.stdout, out.stdout + out.stderr
    out = agentenv(recorded["project"], "replay", recorded["a"], "--env-version", "nowhere=2")
    assert out.returncode == 1 and "ENV=V" in out.stderr and not out.stdout, out.stdout + out.stderr
    assert ok(agentenv(recorded["project"], "task", "list", "--json")) == before


def test_runs_diff_of_two_runs(recorded, changed):
    out = agentenv(recorded["project"], "runs", "diff", recorded["a"], changed, "--json")
    diff = json.loads(ok(out, 1))
    found = {(d["where"], d["what"]): d for d in diff["differences"]}
    assert (found[("status", "value")]["a"], found[("status", "value")]["b"]) == ("passed", "error")
    assert found[(UPDATE, "is_error")]["b"] is True
    # the changed run stopped at the failed call: the verifiers' reads and criteria are not in it
    assert found[("env call 5 (list_deals, role default)", "value")]["b"] == "(absent)"
    assert found[("verifier outcome criterion deal_won", "value")]["b"] == "(absent)"
    same = agentenv(recorded["project"], "runs", "diff", recorded["a"], recorded["a"])
    assert ok(same).strip() == "No differences."


def test_replay_eval_replays_each_of_its_runs_as_a_regression_suite(recorded, changed):
    text = ok(agentenv(recorded["project"], "replay", "--eval", "regress"))
    lines = [line for line in text.splitlines() if ": same" in line]
    assert len(lines) == 2 and "2 of 2 runs replay the same." in text
    text = ok(agentenv(recorded["project"], "replay", "--eval", "regress", "--env-version", "office=2"), 1)
    assert text.count(f": {len(EXPECTED)} difference(s)") == 2 and "0 of 2 runs replay the same." in text


def test_an_unrecorded_live_model_turn_is_named_not_reported_as_a_difference(tmp_path):
    project = tmp_path / "proj"
    (project / ".agentenv").mkdir(parents=True)
    shutil.copytree(BUNDLE, project / "support")
    # a model endpoint nobody listens on: the solver's first turn fails, its reply never recorded
    (project / ".agentenv" / "config.toml").write_text(
        '[model]\nbase_url = "http://127.0.0.1:9/v1"\napi_key = "sk-test-replay"\ndefault = "fake-model"\n')
    assert agentenv(project, "run", "support", "--agent", "tool-loop").returncode == 1
    out = agentenv(project, "replay", newest_run(project), "--json")
    report = json.loads(ok(out))
    assert report["differences"] == []
    assert report["notes"] == ["step chat (agent solver) turn 1: the agent's reply was not recorded (the turn ended "
                               "failed: a live model call whose response is not in the record); the replay fails "
                               "this turn as the run did"]


def test_trigger_firings_and_snapshotted_env_state_are_compared(tmp_path):
    """examples/office: a virtual clock, two triggers, RBAC refusals and a snapshot_env step at the end."""
    project = tmp_path / "proj"
    project.mkdir()
    shutil.copytree(ROOT / "examples" / "office", project / "office")
    ok(agentenv(project, "run", "office"))
    run = newest_run(project)
    report = json.loads(ok(agentenv(project, "replay", run, "--json")))
    assert report["differences"] == [] and report["notes"] == []
    # the task's next version has the time trigger send another text: replay the run with it (--task-version)
    task = project / "office" / "tasks" / "week.json"
    before = "Every deal's stage should be current in the CRM before the review."
    assert task.read_text().count(before) == 2
    task.write_text(task.read_text().replace(before, "Bring your forecast."))
    ok(agentenv(project, "run", "office"))
    report = json.loads(ok(agentenv(project, "replay", run, "--task-version", "2", "--json"), 1))
    wheres = {d["where"] for d in report["differences"]}
    # the trigger's call, the mailbox as the outcome verifier read it and as the snapshot stored it: nothing else
    assert wheres == {"env triggers fired", "env snapshot snapshot", "env call 12 (search_emails, role default)",
                      "env call 14 (read_email, role default)"}, report["differences"]
    fired = next(d for d in report["differences"] if d["where"] == "env triggers fired")
    assert fired["what"].endswith(".result_sha256")  # the reminder the trigger sent is another text
    state = [d for d in report["differences"] if d["where"] == "env snapshot snapshot"]
    assert any(d["b"] == "Bring your forecast." and d["what"].startswith("mail/mail.json.") for d in state)
    replayed = report["replay_run_ids"][0]
    diff = json.loads(ok(agentenv(project, "runs", "diff", run, replayed, "--json"), 1))
    assert {d["where"] for d in diff["differences"]} == wheres
