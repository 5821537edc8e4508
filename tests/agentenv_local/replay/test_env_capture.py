"""tasks/env_capture.py: what the runner keeps of each env at the episode's end (its changelog and `/state`), read
from a real gateway over the example crm and mail envs on a loopback port; bounded, and a failure to read is
recorded, not raised. Then through the real CLI: a run keeps it (`env_end`), and AGENTENV_CAPTURE_ENV_STATE=0
turns it off."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

from kits.data_plane import rpc
from kits.env_steps import Notebook, deployed_env, example, record, seed, step_call_tool
from kits.replay import ROOT, agentenv, newest_run, ok, project_with

from agentenv_local.tasks import env_capture


class Run:
    """What deployed_env needs of a run: its state."""

    def __init__(self) -> None:
        self.state: dict = {"deployed_envs": []}


def capture(run: Run) -> dict:
    return asyncio.run(env_capture.capture_envs(SimpleNamespace(), run.state))


def test_each_env_s_changelog_and_state_are_read_and_bounded(monkeypatch):
    run = Run()
    with deployed_env(run, "office", {"mail": example("mail"), "crm": example("crm")}) as (base, _gw), \
            deployed_env(run, "notes", {"notebook": Notebook()}):
        run.state["deployed_envs"][0]["step_id"] = "deploy"
        run.state["deployed_envs"][1]["step_id"] = "notes"
        rpc(base, "data/add", {"parts": [{"kind": "data", "data": seed("crm")}]}, child="crm")
        assert step_call_tool(base, "update_deal_stage", {"deal_id": "deal-101", "stage": "closed_lost"},
                              role="sales")["isError"] is False
        run.state["deployed_envs"].append({**record("gone", "http://127.0.0.1:9", []), "step_id": "gone"})
        run.state["deployed_envs"].append({**record("old", base, []), "step_id": "old", "torn_down": True})
        got = capture(run)
        monkeypatch.setattr(env_capture, "MAX_CHANGES", 1)
        cut = capture(run)["deploy"]
        monkeypatch.setattr(env_capture, "MAX_STATE_BYTES", 100)
        big = capture(run)["deploy"]
    assert sorted(got) == ["deploy", "gone", "notes"]  # a torn-down deployment is not read
    office = got["deploy"]
    assert [(r["table"], r["op"], r["key"]) for r in office["changes"]] == [
        ("deals", "update", "deal-101"), ("activities", "insert", "act-5")]
    assert "changes_cut" not in office and "error" not in office
    assert office["state"]["changelog_id"] == 2
    assert {s["name"] for s in office["state"]["mcp_servers"]} == {"mail", "crm"}
    assert got["notes"]["changes"] is None and "error" not in got["notes"]  # it keeps no changelog
    assert got["notes"]["state"]["mcp_servers"][0]["tools"][0]["name"] == "add_note"
    assert got["gone"]["error"].startswith("ConnectError") and "state" not in got["gone"]
    assert [r["key"] for r in cut["changes"]] == ["deal-101"] and cut["changes_cut"] is True
    assert big["state"]["cut"] > 100


def test_a_run_keeps_it_unless_it_is_turned_off(tmp_path):
    project = project_with(tmp_path, ROOT / "examples" / "support", "support")
    ok(agentenv(project, "run", "support"))
    kept = json.loads(ok(agentenv(project, "runs", "show", newest_run(project), "--json")))["env_end"]
    assert list(kept) == ["deploy"] and kept["deploy"]["env_id"].endswith("/office")
    assert [r["key"] for r in kept["deploy"]["changes"]] == ["deal-101", "act-5"]
    assert kept["deploy"]["state"]["changelog_id"] == 2
    ok(agentenv(project, "run", "support", extra_env={"AGENTENV_CAPTURE_ENV_STATE": "0"}))
    assert "env_end" not in json.loads(ok(agentenv(project, "runs", "show", newest_run(project), "--json")))
