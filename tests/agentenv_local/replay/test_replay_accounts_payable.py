"""`agentenv replay` on a recorded episode of the accounts-payable cookbook (examples/accounts-payable, offline:
the scripted clerk, wrong on five invoices on purpose, and the scripted judge), through the real CLI.

Two changed envs, each stored by running the changed bundle once: ap v2 refuses to approve an invoice whose vendor's
bank details changed recently (`bank_change_unverified`; the recorded clerk approved INV-2004, such an invoice), and
ap v3 lets a clerk approve above the approval limit an invoice within its purchase order (the recorded clerk tried
to approve INV-2017, within PO-113, was refused, and escalated it). The judge is the built-in scripted agent with
its plan in the task: the replay deploys it as recorded and it judges the replayed episode again.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from kits.replay import ROOT, agentenv, newest_run, ok, project_with

BUNDLE = ROOT / "examples" / "accounts-payable"
RULE_BEFORE = '''        row = {"invoice_id": invoice_id, "decision": decision, "reason": reason.strip(),'''
RULE_AFTER = '''        if decision == "approve" and checks["bank_changed_days"] is not None:
            raise EnvError("bank_change_unverified", f"{invoice_id}: the vendor's bank details changed "
                           f"{checks['bank_changed_days']} days before the invoice", hint="hold it until verified")
''' + RULE_BEFORE
APPROVE_2004 = "step work (agent solver) turn 1 tool call 10"  # read_policy, list_invoices, then 2 calls an invoice
ENV_APPROVE_2004 = "env call 10 (approve_invoice, role clerk)"
DECISION_LOG = "env call 56 (decision_log, role default)"  # the outcome verifier's read of the final state
# What the v2 rule changes, and nothing else: the approval of INV-2004 (as the clerk and the env saw it), the
# decisions the outcome verifier read (INV-2004 is left pending), the env's changelog as the episode left it (no
# INV-2004 decision) and its head in the gateway's /state (one change fewer), and the outcome verifier's two
# criteria that read the decisions: every invoice decided (now not) and no invoice of a vendor with changed bank
# details paid (now none). The outcome's score stays 5 of 7 (one criterion fails, another passes), so no score and
# no status differ; the judge gives INV-2004 0 again (not decided instead of approved: the same score), so none of
# its criteria differ either.
DECIDED_2004 = "env deploy change decisions insert INV-2004"
EXPECTED = {
    (APPROVE_2004, "result"), (APPROVE_2004, "is_error"),
    (ENV_APPROVE_2004, "result"), (ENV_APPROVE_2004, "is_error"),
    (DECISION_LOG, "result"), (DECIDED_2004, "value"), ("env deploy state", "changelog_id"),
    ("verifier outcome criterion all_decided", "result"), ("verifier outcome criterion all_decided", "score"),
    ("verifier outcome criterion no_bank_change_paid", "result"),
    ("verifier outcome criterion no_bank_change_paid", "score"),
}
LIMIT_BEFORE = '        if decision == "approve" and checks["over_limit"]:\n'
LIMIT_AFTER = '        if decision == "approve" and checks["over_limit"] and checks["po"] != "ok":\n'
APPROVE_2017, ESCALATE_2017 = (f"step work (agent solver) turn 1 tool call {n}" for n in (36, 37))
ENV_APPROVE_2017 = "env call 36 (approve_invoice, role clerk)"
ENV_ESCALATE_2017 = "env call 37 (escalate_invoice, role clerk)"
# What the v3 rule changes, and nothing else: INV-2017's approval now goes through and the escalation after it is
# refused (already decided), as the clerk and the env saw them; the decision the outcome verifier read and the
# env's changelog holds (approve, with the approval's reason, by approve_invoice); the judge's criterion for
# INV-2017 (escalated: half credit; approved: none), the judge's score and the run's. The outcome verifier's
# criteria do not change (a bank-change invoice was paid already: INV-2004), nor does the status (failed), nor the
# number of changes (the changelog head in /state).
DECIDED_2017 = "env deploy change decisions insert INV-2017"
EXPECTED_LIMIT = {
    ("score", "value"),
    (APPROVE_2017, "result"), (APPROVE_2017, "is_error"), (ESCALATE_2017, "result"), (ESCALATE_2017, "is_error"),
    (ENV_APPROVE_2017, "result"), (ENV_APPROVE_2017, "is_error"),
    (ENV_ESCALATE_2017, "result"), (ENV_ESCALATE_2017, "is_error"),
    (DECISION_LOG, "result.16.decision"), (DECISION_LOG, "result.16.reason"),
    (DECIDED_2017, "after.decision"), (DECIDED_2017, "after.reason"), (DECIDED_2017, "actors.0.tool"),
    ("verifier grade score", "value"), ("verifier grade criterion INV-2017", "score"),
}
TIMES = 20  # unchanged replays of the episode (about 4 s each here)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> dict:
    """A project holding one recorded AP episode: failed (grade 0.87, outcome 0.71), as the cookbook says."""
    project = project_with(tmp_path_factory.mktemp("replay-ap"), BUNDLE, "ap-week")
    out = agentenv(project, "run", "ap-week")
    assert out.returncode == 1 and "failed (grade: 0.87, outcome: 0.71)" in out.stdout, out.stdout + out.stderr
    run = newest_run(project)
    return {"project": project, "run": run}


def changed_run(project: Path, before: str, after: str, refusal: str) -> str:
    """Run the bundle with the original ap env changed by one rule, which stores it as the next ap version; live,
    the scripted clerk stops at the call the rule now answers otherwise (it allows no such error): the run errs."""
    server = project / "ap-week" / "envs" / "ap" / "server.py"
    text = (BUNDLE / "envs" / "ap" / "server.py").read_text()
    assert text.count(before) == 1
    server.write_text(text.replace(before, after))
    out = agentenv(project, "run", "ap-week")
    assert out.returncode == 1 and refusal in out.stdout + out.stderr, out.stdout + out.stderr
    run = newest_run(project)
    assert json.loads(ok(agentenv(project, "runs", "show", run, "--json")))["status"] == "error"
    return run


@pytest.fixture(scope="module")
def bank_rule(recorded) -> int:
    """ap v2: approving an invoice whose vendor's bank details changed recently is refused."""
    changed_run(recorded["project"], RULE_BEFORE, RULE_AFTER, "bank_change_unverified: INV-2004")
    return 2


@pytest.fixture(scope="module")
def limit_rule(recorded, bank_rule) -> int:
    """ap v3 (the original env and this one change): the approval limit does not hold for an invoice within its PO."""
    changed_run(recorded["project"], LIMIT_BEFORE, LIMIT_AFTER, "already_decided: INV-2017 was already approved")
    return bank_rule + 1


def second(virtual_time: str) -> str:
    """A virtual time ("2026-12-01T22:57:06.944890Z") as the ap env dates a decision with it, to the second."""
    return datetime.fromisoformat(virtual_time).astimezone(UTC).isoformat(timespec="seconds")


def summaries(text: str) -> list[str]:
    """The outcome of each replay as its progress line says it (the verifiers are named in the order they ended)."""
    return re.findall(r"^replay of \S+ v\d+: (\w+) \((?:grade: ([\d.]+), outcome: ([\d.]+)|outcome: ([\d.]+), "
                      r"grade: ([\d.]+))\)", text, re.M)


def test_the_unchanged_env_replays_the_ap_episode_with_no_difference_20_times_out_of_20(recorded):
    out = agentenv(recorded["project"], "replay", recorded["run"], "--times", str(TIMES), "--json")
    report = json.loads(ok(out))
    assert report["run_id"] == recorded["run"] and len(set(report["replay_run_ids"])) == TIMES
    # none differs from the recording, nor from one another (that would be a note: randomness in a tool), and no
    # date is let off as the wall clock's: each call had its recorded time, so every date is compared, and equal
    assert report["differences"] == [] and report["notes"] == []
    outcomes = {(status, g1 or g2, o1 or o2) for status, g1, o1, o2, g2 in summaries(out.stdout + out.stderr)}
    assert len(summaries(out.stdout + out.stderr)) == TIMES and outcomes == {("failed", "0.87", "0.71")}
    # the env dated each decision with the time its gateway stamped the call with: the recorded call's time
    original = json.loads(ok(agentenv(recorded["project"], "runs", "show", recorded["run"], "--json")))
    replayed = json.loads(ok(agentenv(recorded["project"], "runs", "show", report["replay_run_ids"][-1], "--json")))
    rows = replayed["env_end"]["deploy"]["changes"]
    assert len(rows) == 26 and all(row["after"]["at"] == second(row["virtual_time"]) for row in rows)
    assert [row["after"]["at"] for row in rows] == [r["after"]["at"] for r in original["env_end"]["deploy"]["changes"]]
    clocks = replayed["context"]["metadata"]["clock_configurations"]
    assert [(c["step_id"], c["mode"], c["schedule_length"]) for c in clocks] == [
        ("replay-clock-deploy", "schedule", 56)]  # the recorded run's 56 calls to the env: 56 times


def test_a_changed_ap_rule_shows_exactly_its_differences(recorded, bank_rule):
    project = recorded["project"]
    out = agentenv(project, "replay", recorded["run"], "--env-version", f"ap={bank_rule}", "--json")
    report = json.loads(ok(out, 1))
    found = {(d["where"], d["what"]): d for d in report["differences"]}
    assert set(found) == EXPECTED, report["differences"]
    assert len(report["differences"]) == len(EXPECTED) and report["notes"] == []
    approve = found[(APPROVE_2004, "result")]
    assert approve["a"] == {"invoice_id": "INV-2004", "status": "approved", "receipt": "INV-2004=>approve"}
    assert approve["b"].startswith("bank_change_unverified: INV-2004")
    assert found[(ENV_APPROVE_2004, "result")]["b"] == approve["b"]
    # the decisions the verifier read: the same, but for INV-2004's (left pending by the refusal)
    log_a, log_b = found[(DECISION_LOG, "result")]["a"], found[(DECISION_LOG, "result")]["b"]
    assert len(log_a) == 26 and log_b == [d for d in log_a if d["invoice_id"] != "INV-2004"]
    assert (found[("verifier outcome criterion all_decided", "result")]["a"],
            found[("verifier outcome criterion all_decided", "result")]["b"]) == (True, False)
    assert (found[("verifier outcome criterion no_bank_change_paid", "result")]["a"],
            found[("verifier outcome criterion no_bank_change_paid", "result")]["b"]) == (False, True)
    assert len(report["replay_run_ids"]) == 2  # differences: replayed twice, to tell randomness from a change
    replayed = json.loads(ok(agentenv(project, "runs", "show", report["replay_run_ids"][0], "--json")))
    judged = {r["id"]: r for r in replayed["verifications"]["grade"]["results"]}
    assert "made no decision" in judged["INV-2004"]["justification"]  # judged again: what happened now
    text = ok(agentenv(project, "replay", recorded["run"], "--env-version", str(bank_rule)), 1)
    assert f"{APPROVE_2004}: is_error: recorded false | replayed true" in text
    assert text.strip().endswith(f"{len(EXPECTED)} difference(s).")


def test_a_changed_approval_limit_changes_the_judges_criterion_and_the_scores(recorded, limit_rule):
    project = recorded["project"]
    out = agentenv(project, "replay", recorded["run"], "--env-version", f"ap={limit_rule}", "--json")
    report = json.loads(ok(out, 1))
    found = {(d["where"], d["what"]): d for d in report["differences"]}
    # INV-2017 is now decided by the approval (call 36), not the escalation after it (call 37): the env dates the
    # decision with call 36's recorded time, a second earlier than the recorded one only when a second turned
    # between the two calls (the clerk makes them a few milliseconds apart): then that date differs too
    replayed = json.loads(ok(agentenv(project, "runs", "show", report["replay_run_ids"][0], "--json")))
    original = json.loads(ok(agentenv(project, "runs", "show", recorded["run"], "--json")))
    now, then = ({r["key"]: r for r in run["env_end"]["deploy"]["changes"]}["INV-2017"]
                 for run in (replayed, original))
    assert now["after"]["at"] == second(now["virtual_time"])  # the time of the recorded approval call
    dated = {(DECIDED_2017, "after.at"), (DECISION_LOG, "result.16.at")} if now["after"]["at"] != then["after"]["at"] \
        else set()
    assert set(found) == EXPECTED_LIMIT | dated, report["differences"]
    assert len(report["differences"]) == len(EXPECTED_LIMIT | dated) and report["notes"] == []
    assert found[(APPROVE_2017, "result")]["a"].startswith("approval_limit_exceeded: INV-2017")
    assert found[(APPROVE_2017, "result")]["b"] == {"invoice_id": "INV-2017", "status": "approved",
                                                    "receipt": "INV-2017=>approve"}
    assert found[(ESCALATE_2017, "result")]["b"].startswith("already_decided: INV-2017")
    assert found[(ENV_ESCALATE_2017, "result")]["b"] == found[(ESCALATE_2017, "result")]["b"]
    assert (found[(DECISION_LOG, "result.16.decision")]["a"], found[(DECISION_LOG, "result.16.decision")]["b"]) \
        == ("escalate", "approve")
    assert (found[("verifier grade criterion INV-2017", "score")]["a"],
            found[("verifier grade criterion INV-2017", "score")]["b"]) == (0.5, 0)
    grade = found[("verifier grade score", "value")]
    assert round(grade["a"] * 26, 6) == 22.5 and round(grade["b"] * 26, 6) == 22  # the sum of 26 criteria
    assert found[("score", "value")]["b"] < found[("score", "value")]["a"]
    judged = {r["id"]: r for r in replayed["verifications"]["grade"]["results"]}
    assert "approved it" in judged["INV-2017"]["justification"]
    assert replayed["status"] == "failed"


def test_every_run_keeps_the_envs_changelog_and_state_and_replay_compares_them_with_the_original(recorded, bank_rule):
    """The runner reads the ap env's changelog (`GET /changes`) and its gateway's `/state` before teardown, in every
    run: the recorded run holds them, so a replay compares them with the ORIGINAL episode (no replay-end steps)."""
    project = recorded["project"]
    original = json.loads(ok(agentenv(project, "runs", "show", recorded["run"], "--json")))
    end = original["env_end"]["deploy"]
    assert end["env_id"].endswith("/ap") and "changes_cut" not in end and "error" not in end
    decided = [row for row in end["changes"] if row["table"] == "decisions" and row["op"] == "insert"]
    assert len(decided) == 26 and end["state"]["changelog_id"] == end["changes"][-1]["id"]
    assert {t["name"] for s in end["state"]["mcp_servers"] for t in s["tools"]} >= {"approve_invoice", "decision_log"}
    changed = json.loads(ok(agentenv(project, "replay", recorded["run"], "--env-version", f"ap={bank_rule}",
                                     "--json"), 1))
    logged = {(d["where"], d["what"]): d for d in changed["differences"] if d["where"].startswith("env deploy ")}
    # v2 refused INV-2004's approval: its decision is the one change the replay's log lacks, one change fewer
    assert set(logged) == {(DECIDED_2004, "value"), ("env deploy state", "changelog_id")}
    row = logged[(DECIDED_2004, "value")]
    assert row["a"]["after"]["decision"] == "approve" and row["b"] == "(absent)"
    assert row["a"]["actors"] == [{"event_type": "tool_call", "role": "clerk", "tool": "approve_invoice"}]
    assert logged[("env deploy state", "changelog_id")]["b"] == logged[("env deploy state", "changelog_id")]["a"] - 1
    replayed = json.loads(ok(agentenv(project, "runs", "show", changed["replay_run_ids"][0], "--json")))
    assert not (replayed["context"]["metadata"].get("env_snapshotted_universes") or {})  # no extra steps
    assert replayed["env_end"]["deploy"]["state"]["changelog_id"] == end["state"]["changelog_id"] - 1
    # `runs diff` of the original and that replay: the same differences; a replay of a replay: none
    diff = json.loads(ok(agentenv(project, "runs", "diff", recorded["run"], changed["replay_run_ids"][0], "--json"), 1))
    assert {(d["where"], d["what"]) for d in diff["differences"]} == EXPECTED
    same = json.loads(ok(agentenv(project, "replay", recorded["run"], "--json")))["replay_run_ids"][0]
    again = json.loads(ok(agentenv(project, "replay", same, "--json")))
    assert again["differences"] == [] and again["notes"] == []
