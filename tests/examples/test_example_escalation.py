"""examples/envs/tickets and examples/escalation: the tickets env's rules and data plane in-process; the
escalation bundle end to end offline (scripted solver, customer and judge; the SLA timer and the customer's
email fire, RBAC refuses the credit exception), a solver that skips the escalation scoring below 1, and the same
bundle with `--agent tool-loop` and a [model] answered by the local wire-format model server."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from kits.data_plane import rpc
from kits.escalation import model_script
from kits.example_envs import call, error_code, exported, load_seed
from kits.example_runs import agentenv, last_run

from agentenv_local.env import load_env

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
BUNDLE = EXAMPLES / "escalation"
TICKETS = EXAMPLES / "envs" / "tickets" / "server.py"
TICKETS_SEED = EXAMPLES / "envs" / "tickets" / "seed.json"
COPIES = {
    "envs/tickets/server.py": "envs/tickets/server.py",
    "envs/mail/server.py": "envs/mail/server.py",
    "artifacts/tickets-seed/tickets.json": "envs/tickets/seed.json",
    "artifacts/mail-seed/mail.json": "envs/mail/seed.json",
}
AT = {"agentenv.io/role": "support", "agentenv.io/virtual_time": "2025-03-12T09:20:00Z"}


# -- the tickets env, in-process ------------------------------------------------------------------------------

@pytest.mark.parametrize(("in_bundle", "canonical"), sorted(COPIES.items()))
def test_the_bundle_carries_exact_copies_of_the_canonical_envs(in_bundle: str, canonical: str) -> None:
    copy = BUNDLE / in_bundle
    assert not copy.is_symlink()
    assert copy.read_bytes() == (EXAMPLES / canonical).read_bytes(), f"{copy} differs from examples/{canonical}"
    assert [p for p in BUNDLE.rglob("*") if p.is_symlink()] == []


@pytest.fixture()
def desk():
    env = load_env(TICKETS)
    assert rpc(env, "data/add", {"parts": [{"kind": "data", "data": load_seed(TICKETS_SEED)}]})["result"] == {}
    return env


def test_the_seed_round_trips_through_the_data_plane(desk):
    first = exported(desk)
    assert [t["id"] for t in first["tickets"]] == ["T-1042", "T-1039", "T-1044"]
    fresh = load_env(TICKETS)
    assert rpc(fresh, "data/add", {"parts": [{"kind": "data", "data": first}]})["result"] == {}
    assert exported(fresh) == first


def test_a_bad_load_is_refused_and_changes_nothing(desk):
    before = exported(desk)
    bad = {"tickets": [{"id": "T-9", "account_id": "acc-acme", "status": "open"}, {"id": "T-10", "status": "lost",
                                                                                  "account_id": "acc-acme"}]}
    answer = rpc(desk, "data/add", {"parts": [{"kind": "data", "data": bad}]})
    assert "status must be one of" in answer["error"]["message"]
    assert exported(desk) == before


def test_entitlements_bound_credits_and_escalations(desk):
    owed = call(desk, "get_entitlements", {"account_id": "acc-acme"}, AT).structured_content
    assert owed["tier"] == "enterprise" and owed["credit_left_percent"] == 10
    assert owed["entitlements"]["first_response_minutes"] == 60
    too_much = call(desk, "offer_credit", {"ticket_id": "T-1042", "percent": 11, "reason": "outage"}, AT)
    assert error_code(too_much) == "invalid_argument" and "10% left" in too_much.structured_content["message"]
    credit = call(desk, "offer_credit", {"ticket_id": "T-1042", "percent": 10, "reason": "outage"}, AT)
    assert credit.structured_content["amount"] == 1200 and credit.structured_content["by_role"] == "support"
    assert call(desk, "get_entitlements", {"account_id": "acc-acme"}, AT).structured_content[
        "credit_left_percent"] == 0
    # Globex is standard: no sev1 on its escalation path
    refused = call(desk, "escalate_to_engineering", {"ticket_id": "T-1044", "severity": "sev1", "summary": "x"}, AT)
    assert error_code(refused) == "invalid_argument" and "allowed: sev3" in refused.structured_content["hint"]
    esc = call(desk, "escalate_to_engineering", {"ticket_id": "T-1042", "severity": "sev1", "summary": "down"},
               AT).structured_content
    assert esc["id"] == "ESC-1" and esc["opened_at"] == "2025-03-12T09:20:00Z"
    blocked = call(desk, "update_ticket", {"ticket_id": "T-1042", "status": "resolved"}, AT)
    assert error_code(blocked) == "invalid_argument"
    call(desk, "close_escalation", {"escalation_id": "ESC-1", "resolution": "fixed"}, AT)
    assert call(desk, "get_ticket", {"ticket_id": "T-1042"}).structured_content["status"] == "open"


def test_replies_stamp_the_first_response_and_hooks_record_sla_marks(desk):
    reply = call(desk, "reply_to_customer", {"ticket_id": "T-1042", "body": "On it."}, AT).structured_content
    assert reply["first_response_at"] == "2025-03-12T09:20:00Z"
    later = {**AT, "agentenv.io/virtual_time": "2025-03-12T09:40:00Z"}
    call(desk, "reply_to_customer", {"ticket_id": "T-1042", "body": "Update."}, later)
    call(desk, "record_sla_event", {"ticket_id": "T-1042", "kind": "update_due"}, later)
    call(desk, "receive_customer_email", {"ticket_id": "T-1042", "sender": "tom.becker@acmelogistics.example",
                                          "body": "sev1 please"}, later)
    ticket = call(desk, "get_ticket", {"ticket_id": "T-1042"}).structured_content
    assert ticket["first_response_at"] == "2025-03-12T09:20:00Z" and ticket["first_response_due"] == \
        "2025-03-12T10:00:00Z"
    assert ticket["sla_status"] == "update_due"
    assert [m["direction"] for m in ticket["messages"]] == ["inbound", "outbound", "outbound", "inbound"]


# -- the bundle, end to end ---------------------------------------------------------------------------------

def tool_calls(run: dict) -> list[dict]:
    [chat] = run["context"]["prompt_responses"]
    return [e for e in chat["trajectory"] if e.get("type") == "tool_call"]


def criteria(run: dict, verifier: str) -> dict[str, bool]:
    return {r["id"]: r["result"] for r in run["context"]["metadata"]["verifications"][verifier]["results"]}


def test_offline_the_escalation_scores_what_happened(project):
    out = agentenv(project, "run", str(BUNDLE))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "passed (grade: 1, outcome: 1)" in out.stdout
    run = last_run(project)
    calls = tool_calls(run)
    assert [c["tool"] for c in calls] == [
        "get_ticket", "get_entitlements", "reply_to_customer",
        "get_entitlements", "offer_credit", "offer_credit", "get_ticket", "escalate_to_engineering",
        "reply_to_customer", "approve_credit_exception", "send_email"]
    # the env bounds the credit; RBAC refuses the manager's tool to the role 'support'
    assert calls[4]["is_error"] and "exceeds the enterprise entitlement" in calls[4]["result"]
    assert calls[9]["is_error"] and calls[9]["result"] == "Tool 'approve_credit_exception' is disabled for role " \
                                                         "'support'"
    # the customer's email arrived (a barrier on offer_credit) before the agent read the ticket again
    assert calls[6]["result"]["messages"][-1]["from"] == "tom.becker@acmelogistics.example"
    meta = run["context"]["metadata"]
    assert meta["awaited_env_triggers"]["triggers_fired"] == {"cto_email": "fired", "update_due": "fired"}
    assert [c["tools"] for c in meta["tool_access_changes"]] == [["approve_credit_exception", "close_escalation"]]
    assert all(criteria(run, "outcome").values()) and len(criteria(run, "outcome")) == 5
    [chat] = run["context"]["prompt_responses"]
    assert len(chat["turns"]) == 3 and "Sam Okafor" in chat["turns"][-1]["response"]


def test_a_solver_that_never_escalates_scores_below_1(project):
    copy = project / "escalation"
    shutil.copytree(BUNDLE, copy)
    task_file = copy / "tasks" / "escalation.json"
    task = json.loads(task_file.read_text())
    solver = next(s for s in task["steps"] if s["id"] == "solver")
    turn = solver["config"]["plan"]["turns"][1]
    turn[:] = [a for a in turn if a.get("tool") != "escalate_to_engineering"]
    for action in turn:
        for key in ("reply",):
            if key in action:
                action[key] = action[key].replace(" ({esc.id})", "")
        if action.get("tool") == "reply_to_customer":
            action["args"]["body"] = "Update: I've applied a {credit.percent}% service credit."
    task_file.write_text(json.dumps(task))
    out = agentenv(project, "run", "./escalation")
    assert out.returncode == 1, out.stdout + out.stderr
    run = last_run(project)
    assert criteria(run, "grade") == {"acknowledged": True, "escalated": False, "held_the_line": True,
                                      "next_step": True}
    outcome = criteria(run, "outcome")
    assert outcome["sev1_escalation"] is False and outcome["credit_within_entitlement"] is True
    assert run["score"] < 1


def test_the_same_bundle_with_the_tool_loop_agent_and_a_model(project):
    from agentenv_local.testing.fake_models import FakeModelServer

    script = model_script()
    with FakeModelServer(api_key="sk-test-escalation", script=script) as server:
        state = project / ".agentenv"
        state.mkdir()
        (state / "config.toml").write_text(
            f'[model]\nbase_url = "{server.base_url}"\napi_key = "sk-test-escalation"\ndefault = "fake-model"\n')
        out = agentenv(project, "run", str(BUNDLE), "--agent", "tool-loop")
        requests = list(server.requests)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "passed (grade: 1, outcome: 1)" in out.stdout
    assert all(not r.problems for r in requests), [r.problems for r in requests]
    assert len(requests) == len(script)
    listed = set(requests[0].tool_names)
    assert {"offer_credit", "escalate_to_engineering", "send_email"} <= listed
    # RBAC: the role 'support' is not shown the manager's and engineering's tools; hooks stay hidden
    assert not listed & {"approve_credit_exception", "close_escalation", "receive_customer_email",
                         "record_sla_event"}
    run = last_run(project)
    solver = next(a for a in run["context"]["deployed_agents"] if a["agent_name"] == "solver")
    assert solver["a2a_agent_id"] == "tool-loop" and solver["role"] == "support"
    assert "sk-test-escalation" not in json.dumps(run)
