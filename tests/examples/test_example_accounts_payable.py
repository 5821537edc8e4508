"""examples/accounts-payable and its ap env (examples/envs/ap): the env's rules in process, the bundle's generated
files, the offline run with the scripted clerk (wrong on purpose: the score is below 1 and the judge says why), and
the same bundle with `--agent tool-loop` and a [model] answered by the local wire-format model server."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path

from kits.example_runs import agentenv, last_run

from agentenv_local.env import load_env

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "examples" / "accounts-payable"
QUEUE = json.loads((BUNDLE / "artifacts" / "ap-week" / "queue.json").read_text())
POLICY = (BUNDLE / "artifacts" / "ap-week" / "policy.md").read_text()


def make_week():
    spec = importlib.util.spec_from_file_location("make_week", BUNDLE / "make_week.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- the env, in process ------------------------------------------------------------------------------------

def loaded_env():
    env = load_env(str(ROOT / "examples" / "envs" / "ap" / "server.py"))
    asyncio.run(env.data_rpc({"jsonrpc": "2.0", "id": 1, "method": "data/add",
                              "params": {"parts": [{"kind": "data", "data": QUEUE},
                                                   {"kind": "text", "text": POLICY}]}}))
    return env


def call(env, tool: str, role: str = "clerk", **args):
    result = asyncio.run(env.call_tool(tool, args, role=role, virtual_time="2026-03-06T17:00:00Z"))
    return result


def export(env) -> dict:
    answer = asyncio.run(env.data_rpc({"jsonrpc": "2.0", "id": 2, "method": "data/get"}))
    return answer["result"]["parts"][0]["data"]


def test_the_env_records_the_checks_the_answer_key_was_made_from():
    """Deciding every invoice records checks; the policy's rule order applied to them gives the answer key."""
    env = loaded_env()
    key = {r["invoice_id"]: r for r in make_week().build()[1]}
    assert len(key) == 26
    pending = call(env, "list_invoices")["structuredContent"]["result"]
    assert [i["id"] for i in pending] == sorted(key)
    for inv in key:
        assert not call(env, "hold_invoice", invoice_id=inv, reason="checking")["isError"]
    log = {d["invoice_id"]: d for d in call(env, "decision_log")["structuredContent"]["result"]}
    assert log["INV-2001"]["by"] == "clerk" and log["INV-2001"]["at"] == "2026-03-06T17:00:00+00:00"

    def by_policy(c: dict) -> str:
        if c["duplicate_of"]:
            return "reject"
        if c["bank_changed_days"] is not None or c["po"] != "ok":
            return "hold"
        if c["tax_mismatch"]:
            return "reject"
        return "escalate" if c["over_limit"] else "approve"
    assert {i: by_policy(d["checks"]) for i, d in log.items()} == {i: r["decision"] for i, r in key.items()}
    assert log["INV-2006"]["checks"]["duplicate_of"] == "INV-2001"
    assert log["INV-2004"]["checks"]["bank_changed_days"] == 10
    assert {log[i]["checks"]["po"] for i in ("INV-2005", "INV-2010", "INV-2011", "INV-2012")} == \
        {"missing", "over_po", "other_vendor", "unknown"}
    assert call(env, "list_invoices")["structuredContent"]["result"] == []


def test_the_env_enforces_one_decision_the_limit_and_a_reason():
    env = loaded_env()
    over = call(env, "approve_invoice", invoice_id="INV-2007", reason="looks fine")
    assert over["isError"] and over["structuredContent"]["code"] == "approval_limit_exceeded"
    assert "escalate_invoice" in over["structuredContent"]["hint"]
    done = call(env, "escalate_invoice", invoice_id="INV-2007", reason="above the limit")
    assert done["structuredContent"]["receipt"] == "INV-2007=>escalate"
    assert done["_meta"]["agentenv.io/changes"][0]["key"] == "INV-2007"
    again = call(env, "approve_invoice", invoice_id="INV-2007", reason="changed my mind")
    assert again["isError"] and again["structuredContent"]["code"] == "already_decided"
    assert call(env, "reject_invoice", invoice_id="INV-2001", reason="")["isError"]  # a reason is required
    assert call(env, "read_invoice", invoice_id="INV-9999")["structuredContent"]["code"] == "not_found"
    assert call(env, "read_invoice", invoice_id="INV-2007")["structuredContent"]["status"] == "escalated"
    assert call(env, "read_policy")["structuredContent"]["result"].startswith("# Accounts payable policy")
    assert call(env, "get_vendor", vendor_id="V-04")["structuredContent"]["bank_changed_on"] == "2026-02-20"
    assert call(env, "get_purchase_order", po_id="PO-113")["structuredContent"]["amount"] == 16500


def test_bad_data_leaves_the_env_unchanged_and_an_export_loads_back():
    env = loaded_env()
    before = export(env)
    bad = {**QUEUE, "invoices": [{**QUEUE["invoices"][0], "id": "INV-3000", "invoice_date": "March 2"}]}
    answer = asyncio.run(env.data_rpc({"jsonrpc": "2.0", "id": 3, "method": "data/add",
                                       "params": {"parts": [{"kind": "data", "data": bad}]}}))
    assert "error" in answer and "not a date" in json.dumps(answer["error"])
    assert export(env) == before
    fresh = load_env(str(ROOT / "examples" / "envs" / "ap" / "server.py"))
    data = {k: v for k, v in before.items() if k != "decisions"}
    asyncio.run(fresh.data_rpc({"jsonrpc": "2.0", "id": 4, "method": "data/add",
                                "params": {"parts": [{"kind": "data", "data": data}]}}))
    assert export(fresh) == before


# --- the bundle ----------------------------------------------------------------------------------------------

def test_the_bundle_holds_what_make_week_writes_and_a_copy_of_the_canonical_env(tmp_path):
    week = make_week()
    queue, key = week.build()
    assert queue == QUEUE
    task = json.loads((BUNDLE / "tasks" / "week.json").read_text())
    assert task == json.loads(json.dumps(week.task(key)))
    verify = (BUNDLE / "artifacts" / "verifier" / "verify.py").read_text()
    assert week.key_text({r["invoice_id"]: {"decision": r["decision"], "rule": r["rule"]} for r in key}) in verify
    assert 20 <= len(key) <= 40 and {r["decision"] for r in key} == {"approve", "hold", "reject", "escalate"}
    assert (BUNDLE / "envs" / "ap" / "server.py").read_bytes() == \
        (ROOT / "examples" / "envs" / "ap" / "server.py").read_bytes()
    assert [p for p in BUNDLE.rglob("*") if p.is_symlink()] == []
    # the solver sees neither the answer key nor the judge's plan: only the prompt and the env's tools
    solver = next(s for s in task["steps"] if s["id"] == "solver")
    assert "should be" not in json.dumps(solver) and "rule" not in json.dumps(solver)


def test_offline_the_scripted_clerk_scores_below_1_and_the_judge_says_why(project):
    out = agentenv(project, "run", str(BUNDLE))
    assert out.returncode == 1, out.stdout + out.stderr
    assert "failed (grade: 0.87, outcome: 0.71)" in out.stdout
    run = last_run(project)
    rows = {r["id"]: r for r in run["verifications"]["grade"]["results"]}
    assert len(rows) == 26
    wrong = {i: r for i, r in rows.items() if r["score"] < 1}
    assert {i: r["score"] for i, r in wrong.items()} == {"INV-2004": 0, "INV-2017": 0.5, "INV-2018": 0,
                                                          "INV-2020": 0.5, "INV-2021": 0.5}
    assert "approved it: it would be paid" in wrong["INV-2018"]["justification"]
    assert "duplicate of INV-2002" in wrong["INV-2018"]["justification"]
    assert "partial credit" in wrong["INV-2020"]["justification"]
    outcome = {r["id"]: r["result"] for r in run["verifications"]["outcome"]["results"]}
    assert [k for k, ok in outcome.items() if not ok] == ["no_duplicate_paid", "no_bank_change_paid"]
    [work] = run["context"]["prompt_responses"]
    tools = [e["tool"] for e in work["trajectory"] if e.get("type") == "tool_call"]
    assert "decision_log" not in tools and tools.count("read_invoice") == 26
    refused = [e for e in work["trajectory"] if e.get("type") == "tool_call" and e["is_error"]]
    assert [e["tool"] for e in refused] == ["approve_invoice"] and "approval_limit_exceeded" in refused[0]["result"]


def test_the_same_bundle_with_the_tool_loop_agent_and_a_model(project):
    from agentenv_local.testing.fake_models import FakeModelServer, Reply

    key = make_week().build()[1]
    decide = [(f"{r['decision']}_invoice", {"invoice_id": r["invoice_id"], "reason": r["why"]}) for r in key]
    script = [Reply.calls([("read_policy", {}), ("list_invoices", {})]),
              Reply.calls(decide),
              Reply.text("Done: all 26 invoices are decided.")]
    with FakeModelServer(api_key="sk-test-ap", script=script) as server:
        state = project / ".agentenv"
        state.mkdir()
        (state / "config.toml").write_text(
            f'[model]\nbase_url = "{server.base_url}"\napi_key = "sk-test-ap"\ndefault = "fake-model"\n')
        out = agentenv(project, "run", str(BUNDLE), "--agent", "tool-loop")
        requests = list(server.requests)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "passed (grade: 1, outcome: 1)" in out.stdout
    assert all(not r.problems for r in requests), [r.problems for r in requests]
    assert len(requests) == 3
    assert "hold_invoice" in requests[0].tool_names
    assert "decision_log" not in requests[0].tool_names  # RBAC: hidden from the clerk's role
    run = last_run(project)
    solver = next(a for a in run["context"]["deployed_agents"] if a["agent_name"] == "solver")
    assert solver["a2a_agent_id"] == "tool-loop" and solver["role"] == "clerk"
    assert "sk-test-ap" not in json.dumps(run)
