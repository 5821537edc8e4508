"""snapshot_env, load_artifact into an env and env_outcome_verifier against a real gateway (over HTTP) in front of
in-process example envs."""

from __future__ import annotations

import json

import pytest
from kits.data_plane import rpc
from kits.env_steps import data_of, deployed_env, example, seed, step_call_tool

from agentenv_local.artifacts import read_files
from agentenv_local.errors import StepError


@pytest.fixture
def office(run):
    with deployed_env(run, "office", {"mail": example("mail"), "crm": example("crm")}) as (base, gw):
        yield run, base, gw


def step(run, **fields):
    return run.step({"id": fields.pop("id", "s"), **fields})


def test_load_seed_files_snapshot_reset_and_load_the_snapshot_back(office):
    run, base, _ = office
    # seed files named after the services go to those services (FileParts, inline base64)
    run.put_artifact("seeds", {"mail.json": json.dumps(seed("mail")).encode(),
                               "crm.json": json.dumps(seed("crm")).encode()})
    run.execute(step(run, id="load", type="load_artifact", env_id="office", artifact_id="seeds"))
    assert len(data_of(base, "crm")["deals"]) == len(seed("crm")["deals"])
    [loaded] = run.metadata["loaded_file_artifact_universes"]
    assert loaded["env_id"] == "office" and loaded["services"] == ["crm", "mail"]
    # change the state through a tool, then snapshot it
    deal = seed("crm")["deals"][0]
    moved = step_call_tool(base, "update_deal_stage", {"deal_id": deal["id"], "stage": "closed_lost"}, role="sales")
    assert moved["isError"] is False
    before = {c: data_of(base, c) for c in ("mail", "crm")}
    run.execute(step(run, id="snap", type="snapshot_env", env_id="office", include_env_trajectory=True))
    ref = run.metadata["env_snapshotted_universes"]["snap"]
    assert ref == {"id": "run-0001__snap-env-snapshot", "version": 1}
    doc = run.store.documents.find("artifacts", ref["id"])
    assert doc["body"]["type"] == "environment_universe"  # as the reference's: one environment per service
    assert [r["id"] for r in doc["body"]["environment_artifact_refs"]] == [
        "run-0001__snap-env-snapshot__mail", "run-0001__snap-env-snapshot__crm"]
    assert sorted(doc["body"]["metadata_refs"]) == ["trajectory"]
    assert doc["body"]["env_snapshot"]["services"] == ["mail", "crm"]
    files = read_files(run.services.store, doc)
    assert sorted(files) == ["crm/crm.json", "mail/mail.json", "metadata/trajectory/trajectory.jsonl"]
    assert json.loads(files["crm/crm.json"])["parts"][0]["data"] == before["crm"]
    # reset wipes it; loading the snapshot artifact brings back exactly the same data
    run.execute(step(run, id="reset", type="reset_env", env_id="office"))
    assert data_of(base, "crm")["deals"] == [] and data_of(base, "mail")["emails"] == []
    run.execute(step(run, id="restore", type="load_artifact", env_id="office", artifact_id=ref["id"]))
    assert {c: data_of(base, c) for c in ("mail", "crm")} == before


def test_load_with_reset_first_and_environment_name(office):
    run, base, _ = office
    rpc(base, "data/add", {"parts": [{"kind": "data", "data": seed("crm")}]}, child="crm")
    rpc(base, "data/add", {"parts": [{"kind": "data", "data": seed("mail")}]}, child="mail")
    small = {"accounts": [{"id": "acc-1", "name": "One"}]}
    run.put_artifact("small", {"accounts.json": json.dumps(small).encode()})
    run.execute(step(run, type="load_artifact", env_id="office", artifact_id="small", environment_name="crm",
                     reset_first=True))
    assert [a["id"] for a in data_of(base, "crm")["accounts"]] == ["acc-1"]
    assert data_of(base, "mail")["emails"]  # untouched
    with pytest.raises(StepError, match=r"has no service 'billing' \(its services: mail, crm\)"):
        run.execute(step(run, type="load_artifact", env_id="office", artifact_id="small",
                         environment_name="billing"))


def test_load_failure_names_the_service_and_the_envs_message(office):
    run, _, _ = office
    run.put_artifact("broken", {"data.json": b"{not json"})
    with pytest.raises(StepError, match=r"data/add of 'data.json' \(artifact 'broken' v1\) into env 'office' "
                                        r"child 'crm' failed: file part data.json is not readable JSON: "
                                        r".*\(hint: send an object"):
        run.execute(step(run, type="load_artifact", env_id="office", artifact_id="broken", environment_name="crm"))


def test_load_into_a_single_service_env_uses_the_env_level_plane(run):
    with deployed_env(run, "notes", {"notes": example_notes()}) as (base, _):
        run.put_artifact("n", {"n.json": json.dumps({"notes": [{"title": "hello", "body": "world"}]}).encode()})
        run.execute(step(run, type="load_artifact", env_id="notes", artifact_id="n"))
        assert [n["title"] for n in rpc(base, "data/get")["result"]["parts"][0]["data"]["notes"]] == ["hello"]
    assert step(run, type="load_artifact", artifact_id="n", reset_first=True).config_problems() == [
        "environment_name, reset_first: only go with env_id"]


def example_notes():
    from kits.env_steps import ENVS, load

    return load(ENVS / "notes" / "server.py")


def test_snapshot_fails_when_a_service_cannot_export(run):
    from agentenv_local.env import Env, environment_card, get_data, tool

    @environment_card(name="flaky")
    class Flaky(Env):
        @tool()
        def ping(self) -> str:
            """Pong."""
            return "pong"

        @get_data
        def export(self) -> list:
            raise RuntimeError("disk on fire")

    with deployed_env(run, "pair", {"crm": example("crm"), "flaky": Flaky()}), pytest.raises(
            StepError, match=r"env 'pair' child 'flaky' failed to export its data \(data/get\): .*disk on fire"):
        run.execute(step(run, type="snapshot_env", env_id="pair", snapshot_id="snap"))
    assert "env_snapshotted_universes" not in run.metadata
    assert run.store.documents.find("artifacts", "snap") is None


VERIFIER = b'''
from mcp import Client

async def verify(mcp_url, run):
    async with Client(mcp_url) as client:
        result = await client.call_tool("list_deals", {"stage": "closed_lost"})
    lost = result.structured_content["result"]
    return [
        {"id": "lost", "result": any(d["id"] == run["response"]["wanted"] for d in lost),
         "description": "the deal was marked lost"},
        {"id": "seeded", "result": run["env"]["id"] == "office", "description": "the env is the office"},
        {"id": "never", "result": False, "description": "a criterion that fails"},
    ]
'''


def test_env_outcome_verifier_runs_the_script_against_the_gateway(office):
    run, base, _ = office
    rpc(base, "data/add", {"parts": [{"kind": "data", "data": seed("crm")}]}, child="crm")
    deal = seed("crm")["deals"][0]["id"]
    step_call_tool(base, "update_deal_stage", {"deal_id": deal, "stage": "closed_lost"}, role="sales")
    run.state["prompt_responses"].append({"prompt_id": "p1", "wanted": deal})
    run.put_artifact("check.py", {"check.py": VERIFIER})
    run.execute(step(run, type="env_outcome_verifier", env_id="office", file_artifact_id="check.py",
                     prompt_id="p1", verifier_id="outcome", score_aggregator="weighted_average"))
    v = run.metadata["verifications"]["outcome"]
    assert v["results"] == [
        {"criterion": "the deal was marked lost", "id": "lost", "result": True, "score": 1.0},
        {"criterion": "the env is the office", "id": "seeded", "result": True, "score": 1.0},
        {"criterion": "a criterion that fails", "id": "never", "result": False, "score": 0.0}]
    assert v["score"] == pytest.approx(2 / 3)


def test_env_outcome_verifier_failures(office):
    run, _, _ = office
    run.put_artifact("raises.py", {"raises.py": b"async def verify(mcp_url):\n    raise ValueError('no such deal')\n"})
    with pytest.raises(StepError, match=r"verify\(\) failed: ValueError: no such deal"):
        run.execute(step(run, type="env_outcome_verifier", env_id="office", file_artifact_id="raises.py"))
    run.put_artifact("shape.py", {"shape.py": b"def verify(mcp_url):\n    return [{'id': 'x', 'result': 'yes'}]\n"})
    with pytest.raises(StepError, match=r'result \[0\] needs a boolean "result"'):
        run.execute(step(run, type="env_outcome_verifier", env_id="office", file_artifact_id="shape.py"))
    run.put_artifact("one.py", {"one.py": b"def verify(mcp_url):\n    return [{'id': 'x', 'result': True}]\n"})
    with pytest.raises(StepError, match="no prompt response with prompt_id 'p9'"):
        run.execute(step(run, type="env_outcome_verifier", env_id="office", file_artifact_id="one.py",
                         prompt_id="p9"))
    run.execute(step(run, id="ok", type="env_outcome_verifier", env_id="office", file_artifact_id="one.py"))
    assert run.metadata["verifications"]["ok"]["score"] == 1.0
    with pytest.raises(StepError, match=r"env 'elsewhere' is not deployed in this run \(deployed: office\)"):
        run.execute(step(run, type="env_outcome_verifier", env_id="elsewhere", file_artifact_id="one.py"))
    assert step(run, type="env_outcome_verifier", env_id="e", file_artifact_id="f",
                score_aggregator="median").config_problems() == [
        "score_aggregator: 'median' is not one of all_pass, any_pass, weighted_average"]


ACTOR = b'''
import asyncio

from mcp import Client


async def run(input):
    env = input["env"]
    async with Client(env["mcp_url"]) as client:
        found = await client.call_tool("find_account", {"name": input["args"]["account"]})
    return {"env_id": env["id"], "mcp_url": env["mcp_url"], "found": found.content[0].text}
'''


def test_run_code_gets_the_env_and_calls_its_tools(office):
    run, base, _ = office
    rpc(base, "data/add", {"parts": [{"kind": "data", "data": seed("crm")}]}, child="crm")
    run.put_artifact("actor.py", {"actor.py": ACTOR})
    account = seed("crm")["accounts"][0]["name"]
    run.execute(step(run, id="act", type="run_code", env_id="office", script_artifact_id="actor.py",
                     args={"account": account}))
    result = run.metadata["script_results"]["act"]
    assert result["env_id"] == "office" and result["mcp_url"] == base + "/mcp"
    assert account in result["found"]
    with pytest.raises(StepError, match="env 'nowhere' is not deployed"):
        run.execute(step(run, id="lost", type="run_code", env_id="nowhere", script_artifact_id="actor.py"))
