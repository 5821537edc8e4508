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
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
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
# decisions the outcome verifier read (INV-2004 is left pending), and its two criteria that read that: every
# invoice decided (now not) and no invoice of a vendor with changed bank details paid (now none). The outcome's
# score stays 5 of 7 (one criterion fails, another passes), so no score and no status differ; the judge gives
# INV-2004 0 again (not decided instead of approved: the same score), so none of its criteria differ either.
EXPECTED = {
    (APPROVE_2004, "result"), (APPROVE_2004, "is_error"),
    (ENV_APPROVE_2004, "result"), (ENV_APPROVE_2004, "is_error"),
    (DECISION_LOG, "result"),
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
# refused (already decided), as the clerk and the env saw them; the decision the outcome verifier read (approve,
# with the approval's reason); the judge's criterion for INV-2017 (escalated: half credit; approved: none), the
# judge's score and the run's. The outcome verifier's criteria do not change (a bank-change invoice was paid
# already: INV-2004), nor does the status (failed).
EXPECTED_LIMIT = {
    ("score", "value"),
    (APPROVE_2017, "result"), (APPROVE_2017, "is_error"), (ESCALATE_2017, "result"), (ESCALATE_2017, "is_error"),
    (ENV_APPROVE_2017, "result"), (ENV_APPROVE_2017, "is_error"),
    (ENV_ESCALATE_2017, "result"), (ENV_ESCALATE_2017, "is_error"),
    (DECISION_LOG, "result.16.decision"), (DECISION_LOG, "result.16.reason"),
    ("verifier grade score", "value"), ("verifier grade criterion INV-2017", "score"),
}
TIMES = 20  # unchanged replays of the episode (about 4 s each here)


def agentenv(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_") or k == "AGENTENV_SANDBOX_DEFAULT"}
    return subprocess.run([str(Path(sys.executable).parent / "agentenv"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900, check=False)


def ok(out: subprocess.CompletedProcess, code: int = 0) -> str:
    assert out.returncode == code, out.stdout + out.stderr
    return out.stdout


def newest_run(cwd: Path) -> str:
    return json.loads(ok(agentenv(cwd, "runs", "list", "--json", "--limit", "1")))[0]["run_id"]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> dict:
    """A project holding one recorded AP episode: failed (grade 0.87, outcome 0.71), as the cookbook says."""
    project = tmp_path_factory.mktemp("replay-ap") / "proj"
    project.mkdir()
    shutil.copytree(BUNDLE, project / "ap-week")
    for _attempt in range(5):
        out = agentenv(project, "run", "ap-week")
        assert out.returncode == 1 and "failed (grade: 0.87, outcome: 0.71)" in out.stdout, out.stdout + out.stderr
        run = newest_run(project)
        # The ap env stamps decisions with its wall clock, which replay freezes at the recording's first second
        # (docs/tasks/replay.md): an episode whose decisions crossed a second boundary is recorded again.
        probe = json.loads(agentenv(project, "replay", run, "--json").stdout or "{}")
        if not [d for d in probe.get("differences", []) if str(d.get("what", "")).endswith(".at")]:
            break
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


def summaries(text: str) -> list[str]:
    """The outcome of each replay as its progress line says it (the verifiers are named in the order they ended)."""
    return re.findall(r"^replay of \S+ v\d+: (\w+) \((?:grade: ([\d.]+), outcome: ([\d.]+)|outcome: ([\d.]+), "
                      r"grade: ([\d.]+))\)", text, re.M)


def test_the_unchanged_env_replays_the_ap_episode_with_no_difference_20_times_out_of_20(recorded):
    out = agentenv(recorded["project"], "replay", recorded["run"], "--times", str(TIMES), "--json")
    report = json.loads(ok(out))
    assert report["run_id"] == recorded["run"] and len(set(report["replay_run_ids"])) == TIMES
    # none differs from the recording, nor from one another (that would be a note: randomness in a tool)
    assert report["differences"] == [] and report["notes"] == []
    outcomes = {(status, g1 or g2, o1 or o2) for status, g1, o1, o2, g2 in summaries(out.stdout + out.stderr)}
    assert len(summaries(out.stdout + out.stderr)) == TIMES and outcomes == {("failed", "0.87", "0.71")}


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
    assert set(found) == EXPECTED_LIMIT, report["differences"]
    assert len(report["differences"]) == len(EXPECTED_LIMIT) and report["notes"] == []
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
    replayed = json.loads(ok(agentenv(project, "runs", "show", report["replay_run_ids"][0], "--json")))
    judged = {r["id"]: r for r in replayed["verifications"]["grade"]["results"]}
    assert "approved it" in judged["INV-2017"]["justification"]
    assert replayed["status"] == "failed"


def test_a_replay_holds_the_envs_changelog_at_the_end_and_runs_diff_compares_two_replays(recorded, bank_rule):
    """The replay task reads the ap env's changelog (`GET /changes`) after every other step, before teardown; the
    recorded run (not a replay) holds none, so replay compares it only between runs that both hold it."""
    project = recorded["project"]
    same = json.loads(ok(agentenv(project, "replay", recorded["run"], "--json")))["replay_run_ids"][0]
    changed = json.loads(ok(agentenv(project, "replay", recorded["run"], "--env-version", f"ap={bank_rule}",
                                     "--json"), 1))["replay_run_ids"][0]
    shown = {r: json.loads(ok(agentenv(project, "runs", "show", r, "--json"))) for r in (recorded["run"], same)}
    assert "replay-end-deploy" not in (shown[recorded["run"]]["context"]["metadata"].get("env_snapshotted_universes")
                                       or {})
    assert "replay-end-deploy" in shown[same]["context"]["metadata"]["env_snapshotted_universes"]
    ok(agentenv(project, "runs", "diff", recorded["run"], same))  # no changelog on one side: not a difference
    diff = json.loads(ok(agentenv(project, "runs", "diff", same, changed, "--json"), 1))
    logged = [d for d in diff["differences"] if d["where"].startswith("env deploy change ")]
    # v2 refused INV-2004's approval: its decision is the one change the changed env's log lacks
    assert [(d["where"], d["what"]) for d in logged] == [("env deploy change decisions insert INV-2004", "value")]
    assert logged[0]["a"]["after"]["decision"] == "approve" and logged[0]["a"]["actors"] == [
        {"event_type": "tool_call", "role": "clerk", "tool": "approve_invoice"}] \
        and logged[0]["b"] == "(absent)"
    again = json.loads(ok(agentenv(project, "replay", same, "--json")))  # a replay of a replay compares it
    assert again["differences"] == [] and again["notes"] == []
    newer = json.loads(ok(agentenv(project, "runs", "show", again["replay_run_ids"][0], "--json")))
    assert list(newer["context"]["metadata"]["env_snapshotted_universes"]) == ["replay-end-deploy"]
