"""Replay of a task that prompts one agent in two separate prompt_agent steps (two conversations): each replays its
own recorded turns (the scripted agent counts turns per conversation, so a plan of both joined would replay the
first conversation's turn in the second). The real CLI, offline, on the support bundle's office env."""

from __future__ import annotations

import json
import shutil

from kits.replay import ROOT, agentenv, keys, newest_run, ok

SUPPORT = ROOT / "examples" / "support"
IF_DEALS = {"input": "text", "contains": "deals"}
TASK = {"description": "one agent, two conversations", "steps": [
    {"id": "deploy", "type": "deploy_env", "env_id": "office"},
    {"id": "seed_crm", "type": "load_artifact", "artifact_id": "crm-seed", "env_id": "office",
     "depends_on": ["deploy"]},
    {"id": "solver", "type": "deploy_agent", "agent_name": "solver", "env_ids": ["office"], "role": "agent",
     "depends_on": ["seed_crm"], "config": {"plan": {"steps": [{"if": IF_DEALS, "then": [
         {"tool": "list_deals", "args": {"stage": "negotiation"}, "save_as": "deals"},
         {"reply": "Open: {deals}"}], "else": [
         {"tool": "update_deal_stage", "args": {"deal_id": "deal-101", "stage": "closed_won", "note": "signed"},
          "save_as": "deal"},
         {"reply": "deal-101 is {deal.deal.stage}"}]}]}}},
    {"id": "ask", "type": "prompt_agent", "agent_name": "solver", "prompt": "Which deals are in negotiation?",
     "depends_on": ["solver"]},
    {"id": "close", "type": "prompt_agent", "agent_name": "solver", "prompt": "Acme signed: mark their deal won.",
     "depends_on": ["ask"]},
]}
RULE_BEFORE = '''        deal = self._deal(deal_id)
        if stage == deal["stage"]:'''
RULE_AFTER = '''        deal = self._deal(deal_id)
        if stage == "closed_won" and "order form" not in (note or ""):
            raise EnvError("note_required", f"{deal_id}: closing a deal won needs a note naming the order form")
        if stage == deal["stage"]:'''


def test_two_conversations_with_one_agent_each_replay_their_own_turns(tmp_path):
    project = tmp_path / "proj"
    bundle = project / "two"
    bundle.mkdir(parents=True)
    shutil.copytree(SUPPORT / "envs", bundle / "envs")
    shutil.copytree(SUPPORT / "artifacts", bundle / "artifacts")
    (bundle / "tasks").mkdir()
    (bundle / "tasks" / "two.json").write_text(json.dumps(TASK))
    ok(agentenv(project, "run", "two"))
    run = newest_run(project)
    report = json.loads(ok(agentenv(project, "replay", run, "--json")))
    assert report["differences"] == [] and report["notes"] == []
    replayed = json.loads(ok(agentenv(project, "runs", "show", report["replay_run_ids"][0], "--json")))
    calls = {r["step_id"]: [e.get("tool") for e in r["trajectory"] if e.get("type") == "tool_call"]
             for r in replayed["context"]["prompt_responses"]}
    assert calls == {"ask": ["list_deals"], "close": ["update_deal_stage"]}
    # the env changed so that the second conversation's call is refused: the differences are that call's only
    server = bundle / "envs" / "crm" / "server.py"
    assert server.read_text().count(RULE_BEFORE) == 1
    server.write_text(server.read_text().replace(RULE_BEFORE, RULE_AFTER))
    ok(agentenv(project, "run", "two"), 1)
    changed = json.loads(ok(agentenv(project, "replay", run, "--env-version", "office=2", "--json"), 1))
    close = "step close (agent solver) turn 1 tool call 1"
    call = "env call 2 (update_deal_stage, role agent)"
    assert keys(changed) == {
        (close, "result"), (close, "is_error"), (call, "result"), (call, "is_error"),
        ("env deploy change deals update deal-101", "value"), ("env deploy change activities insert act-5", "value"),
        ("env deploy state", "changelog_id")}, changed["differences"]
