"""Env pools (hosting/envs/pool.py): a torn-down in-hub instance is reset from its clean snapshot and pooled; the
next deploy takes it, as fresh as a cold one; what cannot be reset faithfully is stopped, never pooled."""

from __future__ import annotations

import asyncio
import re

import httpx2
import pytest
from kits.data_plane import request
from kits.env_deploy import EXAMPLES, admin, on_hub, open_hub_session, put_env, seed
from kits.env_pool import call, deploy, hub, put_counter, slot_records, starts_of, teardown


def observe(session, record: dict, child: str) -> dict:
    """Everything an episode can read of an instance: the env's data and tools, the gateway's state (RBAC
    roles, changelog id), trajectory, changes, clock and triggers; with the instance's own URLs and ids
    blanked, and timestamps, which differ between any two instances."""
    base = record["gateway_url"]
    seen = {}
    with httpx2.Client(base_url=base, headers=admin(session, record), timeout=30) as c:
        seen["data"] = c.post(f"/svc/mcp-{child}/agentenv", json=request("data/get")).json()
        for path in ("/state", "/trajectory", "/changes", "/clock/state", "/triggers/state"):
            r = c.get(path)
            seen[path] = (r.status_code, r.text)
        seen["tools"] = c.post("/step", json={"action": "list_tools"}).text
    def blank(value: object) -> str:
        text = repr(value).replace(base, "BASE").replace(record["instance_id"], "INSTANCE")
        return re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+Z?", "TIME", text)

    return {part: blank(value) for part, value in seen.items()}


def dirty(session, record: dict) -> None:
    """What an episode does to an instance: its data, RBAC rules, clock, triggers, trajectory and changes."""
    headers = admin(session, record)
    base = record["gateway_url"]
    with httpx2.Client(base_url=base, headers=headers, timeout=30) as c:
        assert "error" not in c.post("/svc/mcp-echo/agentenv", json=request(
            "data/add", {"parts": [{"kind": "data", "data": {"seeded": 1}}]})).json()
        assert c.post("/tools/disable", json={"role": "agent", "tools": ["fail"]}).status_code == 200
        assert c.put("/clock/set-time", json={"virtual_time": "2025-03-10T09:00:00Z",
                                              "mode": "frozen"}).status_code == 200
        assert c.post("/triggers/register", json={"triggers": [{
            "id": "t1", "when": {"type": "action", "tool": "echo"},
            "actions": [{"type": "permission", "action": "disable", "role": "agent", "tools": ["whoami"]}]}],
        }).status_code == 200
    assert call(record, "echo", {"text": "hi"}, role="agent")


def test_the_changelog_of_a_pooled_instance_starts_empty(tmp_path):
    with hub(tmp_path) as session:
        put_env(session.store, "crm", EXAMPLES / "crm", module="server.py:Crm", environment_name="crm")
        first = deploy(session, "crm")
        clean = observe(session, first, "crm")
        with httpx2.Client(base_url=first["gateway_url"], headers=admin(session, first), timeout=30) as c:
            assert "error" not in c.post("/svc/mcp-crm/agentenv", json=request(
                "data/add", {"parts": [{"kind": "data", "data": seed("crm")}]})).json()
        answer = call(first, "update_deal_stage", {"deal_id": "deal-101", "stage": "closed_won"})
        assert not answer.get("isError", answer.get("is_error")), answer
        changes = httpx2.get(first["gateway_url"] + "/changes", timeout=30).json()["changes"]
        assert changes  # the call changed rows
        teardown(session, first)
        pooled = deploy(session, "crm")
        cold = deploy(session, "crm", pool=False)
        assert pooled["from_pool"] is True
        assert observe(session, pooled, "crm") == observe(session, cold, "crm") == clean
        assert httpx2.get(pooled["gateway_url"] + "/changes", timeout=30).json()["changes"] == []
        for record in (pooled, cold):
            teardown(session, record)


def test_a_pooled_instance_is_as_fresh_as_a_cold_one(tmp_path):
    with hub(tmp_path) as session:
        put_env(session.store, "echo", EXAMPLES / "echo", module="server.py:Echo", environment_name="echo")
        first = deploy(session, "echo")
        assert first["pool_slot"].startswith("envp-") and first["from_pool"] is False
        clean_cold = observe(session, first, "echo")
        dirty(session, first)
        after = observe(session, first, "echo")
        changed = {part for part in clean_cold if after[part] != clean_cold[part]}
        # the episode changed everything it can see (the tools: RBAC hides two from the agent's list too)
        assert changed >= {"data", "/state", "/trajectory", "/clock/state", "/triggers/state"}, changed
        done = teardown(session, first)
        assert done["status"] == "terminated"
        assert slot_records(session)[first["pool_slot"]]["status"] == "pooled"

        pooled = deploy(session, "echo")
        assert pooled["from_pool"] is True and pooled["pool_slot"] == first["pool_slot"]
        assert pooled["instance_id"] != first["instance_id"] and pooled["gateway_url"] != first["gateway_url"]
        cold = deploy(session, "echo", pool=False)
        assert "pool_slot" not in cold
        assert observe(session, pooled, "echo") == observe(session, cold, "echo") == clean_cold
        for record in (pooled, cold):
            teardown(session, record)


def test_a_second_episode_takes_the_pooled_instance_without_starting_servers(tmp_path):
    with hub(tmp_path) as session:
        starts = put_counter(session, tmp_path)
        first = deploy(session, "counter")
        assert starts_of(starts) == 1
        assert call(first, "add_item", {"item": "a"})
        teardown(session, first)
        for _ in range(3):  # each episode takes the one pooled instance: no server starts again
            again = deploy(session, "counter")
            assert again["from_pool"] is True
            with httpx2.Client(headers=admin(session, again)) as c:
                data = c.post(again["gateway_url"] + "/svc/mcp-counter/agentenv", json=request("data/get")).json()
            assert data["result"]["parts"][0]["data"] == {"items": []}
            call(again, "add_item", {"item": "b"})
            teardown(session, again)
        assert starts_of(starts) == 1
        [slot] = slot_records(session).values()
        assert slot["uses"] == 4 and slot["status"] == "pooled"
        session.store.events.flush()
        # each episode has its own instance id in the event log
        ids = {e["body"]["instance_id"] for e in session.store.events.query(kinds=["env.tool_call"])}
        assert len(ids) == 4


def test_what_cannot_be_reset_is_stopped_not_pooled(tmp_path):
    with hub(tmp_path) as session:
        starts = put_counter(session, tmp_path)
        first = deploy(session, "counter")
        call(first, "break_reset", {})  # its data/reset now raises
        teardown(session, first)
        slot = slot_records(session)[first["pool_slot"]]
        assert slot["status"] == "terminated" and "reset failed" in slot["status_reason"]
        assert not (session.paths.state_dir / "envs" / first["instance_id"]).exists()

        second = deploy(session, "counter")
        assert second["from_pool"] is False and starts_of(starts) == 2
        call(second, "set_greeting", {"text": "changed"})  # outside the data plane: the reset cannot undo it
        teardown(session, second)
        slot = slot_records(session)[second["pool_slot"]]
        assert slot["status"] == "terminated" and "attribute outside its data plane" in slot["status_reason"]

        third = deploy(session, "counter")  # nothing poisoned: a cold deploy, then pooled as usual
        assert third["from_pool"] is False and starts_of(starts) == 3
        teardown(session, third)
        assert slot_records(session)[third["pool_slot"]]["status"] == "pooled"


def test_two_episodes_at_once_never_share_an_instance(tmp_path):
    with hub(tmp_path) as session:
        starts = put_counter(session, tmp_path)
        warm = [deploy(session, "counter") for _ in range(2)]
        for record in warm:
            teardown(session, record)
        assert starts_of(starts) == 2

        async def three_at_once():
            return await asyncio.gather(*(session.hub.envs.deploy("counter") for _ in range(3)))

        records = on_hub(session, three_at_once())
        slots = [r["pool_slot"] for r in records]
        assert len(set(slots)) == 3 and sum(r["from_pool"] for r in records) == 2
        assert starts_of(starts) == 3
        for record in records:
            teardown(session, record)


def test_the_pool_empties_when_the_hub_closes_and_a_pooled_slot_can_be_torn_down(tmp_path):
    with hub(tmp_path) as session:
        put_counter(session, tmp_path)
        records = [deploy(session, "counter") for _ in range(2)]
        for record in records:
            teardown(session, record)
        one, other = (r["pool_slot"] for r in records)
        stopped = on_hub(session, session.hub.envs.teardown(one))
        assert stopped["status"] == "terminated"
        assert slot_records(session)[other]["status"] == "pooled"
        envs_root = session.paths.state_dir / "envs"
        assert (envs_root / records[1]["instance_id"]).is_dir() and not (envs_root / records[0]["instance_id"]).exists()
        assert [r["instance_id"] for r in session.hub.envs.instances("pooled")] == [other]
        on_hub(session, session.hub.envs.aclose())  # what the hub's close (agentenv down) runs
        slot = slot_records(session)[other]
        assert slot["status"] == "terminated" and slot["status_reason"] == "hub stopped"
        assert not (envs_root / records[1]["instance_id"]).exists() and session.hub.envs.pool.idle() == []


@pytest.mark.parametrize("status", ["pooled", "leased"])
def test_a_dead_hubs_slots_are_swept(tmp_path, status):
    from agentenv_local.hosting.envs.pool import SLOTS, sweep_slots

    with hub(tmp_path) as session:
        root = session.paths.state_dir / "envs"
        (root / "envi-0123456789ab" / "counter").mkdir(parents=True)
        session.store.records.save(SLOTS, "envp-0123456789ab", {"instance_id": "envp-0123456789ab",
                                                               "status": status, "pool_slot": True,
                                                               "folder": "envi-0123456789ab"})
        assert sweep_slots(session.store, root) == ["envp-0123456789ab"]
        assert not (root / "envi-0123456789ab").exists()
        assert slot_records(session)["envp-0123456789ab"]["status_reason"] == "its hub is gone"


def test_env_instances_lists_pooled_slots_and_down_empties_the_pool(tmp_path):
    import json
    import shutil

    from kits.hub import cli

    project = tmp_path / "proj"
    (project / "echo-env").mkdir(parents=True)
    shutil.copy(EXAMPLES / "echo" / "server.py", project / "echo-env" / "server.py")
    (project / "echo-env" / "env.toml").write_text('module = "server.py:Echo"\nenvironment_name = "echo"\n')
    cli(project, "up", "--detach", check=True)
    try:
        cli(project, "env", "put", "echo-env", "--id", "echo", check=True)
        record = json.loads(cli(project, "env", "deploy", "--id", "echo", "--json", check=True, timeout=120).stdout)
        slot_id = record["pool_slot"]
        table = cli(project, "env", "instances", check=True).stdout
        assert f"running (pool {slot_id})" in table
        cli(project, "env", "teardown", record["instance_id"], check=True)
        listed = json.loads(cli(project, "env", "instances", "--json", check=True).stdout)
        assert [(r["instance_id"], r["status"]) for r in listed] == [(slot_id, "pooled")]
        table = cli(project, "env", "instances", check=True).stdout
        assert slot_id in table and "pooled (idle, 1 uses)" in table
        again = json.loads(cli(project, "env", "deploy", "--id", "echo", "--json", check=True, timeout=120).stdout)
        assert again["from_pool"] is True and again["pool_slot"] == slot_id
        assert f"running (from pool {slot_id})" in cli(project, "env", "instances", check=True).stdout
        cli(project, "env", "teardown", again["instance_id"], check=True)
    finally:
        cli(project, "down")
    with open_hub_session(project) as session:  # `down` stopped the slot (not the next hub's sweep)
        slot = slot_records(session)[slot_id]
        assert slot["status"] == "terminated" and slot["status_reason"] == "hub stopped"
        assert slot["uses"] == 2
        assert not list((session.paths.state_dir / "envs").glob("env*"))
    with pytest.raises(httpx2.HTTPError):
        httpx2.get(again["gateway_url"] + "/state", timeout=2)


def test_the_tui_env_view_names_the_pool_slot():
    from tui.envstate import env_view

    pooled = env_view({"instance_id": "envi-1", "env_id": "echo", "pool_slot": "envp-1", "from_pool": True},
                      None, 0.0)
    assert pooled.pool_slot == "envp-1"
    assert env_view({"instance_id": "envi-2", "env_id": "echo"}, None, 0.0).pool_slot is None


def test_the_deploy_env_step_pools_unless_told_not_to(tmp_path):
    from agentenv_local.artifacts import put_artifact
    from agentenv_local.steps.env import DeployEnvStep
    from agentenv_local.tasks.context import StepContext, new_state

    with hub(tmp_path) as session:
        put_env(session.store, "echo", EXAMPLES / "echo", module="server.py:Echo", environment_name="echo")
        put_artifact(session.store, "greeting", {"hello.txt": b"hello world"})
        loaded = []
        for run, pool in (("run-1", True), ("run-2", True), ("run-3", False)):
            step = DeployEnvStep(id="env", env_id="echo", artifact_id="greeting", pool=pool)
            state = new_state()
            ctx = StepContext(session.hub.services, run, step, state)
            on_hub(session, step.execute(ctx))
            [record] = state["deployed_envs"]
            with httpx2.Client(headers=admin(session, record)) as c:
                data = c.post(record["gateway_url"] + "/svc/mcp-echo/agentenv", json=request("data/get")).json()
            loaded.append(data["result"]["parts"][0]["data"]["loaded"])
            on_hub(session, step.teardown(ctx))
            assert (record.get("from_pool"), record["run_id"]) == {"run-1": (False, run), "run-2": (True, run),
                                                                   "run-3": (None, run)}[run]
        # the artifact the step loads after the deploy is loaded once into each, pooled or cold
        assert loaded == [[{"file": "hello.txt", "size": 11}]] * 3


def test_opt_outs_never_pool(tmp_path):
    with hub(tmp_path) as session:
        starts = put_counter(session, tmp_path, "counter")
        put_counter(session, tmp_path, "counter-no-pool", pool=False)
        session.store.documents.put("envs", "multi-no-pool", {"type": "multi", "mcp_server_envs": ["counter"],
                                                              "pool": False})
        for env_id, options in (("counter-no-pool", {}), ("counter", {"pool": False}), ("multi-no-pool", {})):
            for _ in range(2):
                record = deploy(session, env_id, **options)
                assert "pool_slot" not in record
                teardown(session, record)
        assert starts_of(starts) == 6
        assert slot_records(session) == {}
        assert not list((session.paths.state_dir / "envs").glob("env*"))
