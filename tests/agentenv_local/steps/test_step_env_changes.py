"""snapshot_env with include_env_changes: the gateway's change rows (GET /changes, every page) stored as
changes.jsonl beside the services' data, and left out (not a failure) when the env keeps no changelog.

The first test needs Gateway.call absorbing the rows of agent calls (the crm write goes through /step)."""

from __future__ import annotations

import json

from kits.data_plane import rpc
from kits.env_steps import deployed_env, example, seed, step_call_tool


def step(run, **fields):
    return run.step({"id": fields.pop("id", "s"), **fields})


def stored_files(run, artifact_id):
    """The snapshot's files by name (a universe keeps `<service>/<service>.json`, `metadata/<key>/<file>`)."""
    from agentenv_local.artifacts import read_files

    doc = run.store.documents.find("artifacts", artifact_id)
    return {path.rsplit("/", 1)[-1]: data for path, data in read_files(run.services.store, doc).items()}


def test_snapshot_stores_the_change_rows_beside_the_data(run):
    with deployed_env(run, "office", {"mail": example("mail"), "crm": example("crm")}) as (base, _gw):
        rpc(base, "data/add", {"parts": [{"kind": "data", "data": seed("crm")}]}, child="crm")
        deal = seed("crm")["deals"][0]
        moved = step_call_tool(base, "update_deal_stage", {"deal_id": deal["id"], "stage": "closed_lost"}, role="sales")
        assert moved["isError"] is False and "_meta" not in moved
        run.execute(step(run, id="snap", type="snapshot_env", env_id="office", include_env_changes=True))
        files = stored_files(run, run.metadata["env_snapshotted_universes"]["snap"]["id"])
        assert sorted(files) == ["changes.jsonl", "crm.json", "mail.json"]
        rows = [json.loads(line) for line in files["changes.jsonl"].decode().splitlines()]
        assert [(r["id"], r["table"], r["op"]) for r in rows] == [(1, "deals", "update"), (2, "activities", "insert")]
        assert rows[0]["actors"][0]["role"] == "sales" and rows[0]["after"]["stage"] == "closed_lost"


def test_snapshot_without_a_changelog_has_no_changes_file(run):
    with deployed_env(run, "plain", {"mail": example("mail")}):
        run.execute(step(run, id="snap", type="snapshot_env", env_id="plain", include_env_changes=True))
        files = stored_files(run, run.metadata["env_snapshotted_universes"]["snap"]["id"])
        assert sorted(files) == ["mail.json"]
