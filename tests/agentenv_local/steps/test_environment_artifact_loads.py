"""environment / environment_universe artifacts loaded into a deployed env (a real gateway over HTTP in front of
the example crm and mail envs): each member's file goes to the server its environment_name names; a snapshot
taken before snapshot_env stored universes (a file bundle with <service>.json) still loads; sandboxes get files."""

from __future__ import annotations

import json

import pytest
from kits.env_steps import data_of, deployed_env, example, seed

from agentenv_local import typed_artifacts as typed
from agentenv_local.artifacts import universe_members
from agentenv_local.errors import StepError


def step(run, **fields):
    return run.step({"id": fields.pop("id", "s"), **fields})


def put_env(run, artifact_id: str, name: str, content: dict) -> dict:
    return typed.put_environment(run.store, artifact_id, f"{name}-seed.json", json.dumps(content).encode(),
                                 environment_name=name)


@pytest.fixture
def office(run):
    with deployed_env(run, "office", {"mail": example("mail"), "crm": example("crm")}) as (base, gw):
        yield run, base, gw


def test_a_universe_seeds_each_server_from_its_own_environment(office):
    run, base, _ = office
    crm = put_env(run, "crm-data", "crm", seed("crm"))
    mail = put_env(run, "mail-data", "mail", seed("mail"))
    typed.put_environment_universe(run.store, "world", [typed.ref_of(crm), typed.ref_of(mail)])
    run.execute(step(run, type="load_artifact", env_id="office", artifact_id="world"))
    assert len(data_of(base, "crm")["deals"]) == len(seed("crm")["deals"])
    assert len(data_of(base, "mail")["emails"]) == len(seed("mail")["emails"])
    [loaded] = run.metadata["loaded_file_artifact_universes"]
    assert loaded["artifact_type"] == "environment_universe" and loaded["services"] == ["crm", "mail"]


def test_one_environment_goes_to_its_server_only_and_a_wrong_name_is_refused(office):
    run, base, _ = office
    put_env(run, "crm-data", "crm", seed("crm"))
    run.execute(step(run, type="load_artifact", env_id="office", artifact_id="crm-data"))
    assert data_of(base, "crm")["deals"] and data_of(base, "mail")["emails"] == []
    put_env(run, "billing-data", "billing", {"x": 1})
    with pytest.raises(StepError, match=r"artifact 'billing-data' seeds 'billing', which env 'office' does not "
                                        r"have \(its services: mail, crm\)"):
        run.execute(step(run, type="load_artifact", env_id="office", artifact_id="billing-data"))


def test_a_legacy_service_typed_document_loads_as_an_environment(office):
    run, base, _ = office
    doc = put_env(run, "crm-data", "crm", seed("crm"))
    run.store.documents.put("artifacts", "old-style", {**doc["body"], "type": "service",
                                                       "environment_name": None})  # only service_name, as old docs
    run.execute(step(run, type="load_artifact", env_id="office", artifact_id="old-style"))
    assert len(data_of(base, "crm")["deals"]) == len(seed("crm")["deals"])


def test_a_file_bundle_snapshot_of_the_old_form_still_restores(office):
    run, base, _ = office
    old = {"crm": {"service": "crm", "parts": [{"kind": "data", "data": seed("crm")}]}}
    run.put_artifact("old-snap", {"crm.json": json.dumps(old["crm"]).encode(), "trajectory.jsonl": b""},
                     extra={"env_snapshot": {"format": "agentenv-env-snapshot/v1", "services": ["crm"]}})
    run.execute(step(run, type="load_artifact", env_id="office", artifact_id="old-snap"))
    assert len(data_of(base, "crm")["deals"]) == len(seed("crm")["deals"])


def test_snapshot_then_reset_then_load_the_universe_back(office):
    run, base, _ = office
    put_env(run, "crm-data", "crm", seed("crm"))
    run.execute(step(run, id="load", type="load_artifact", env_id="office", artifact_id="crm-data"))
    before = {c: data_of(base, c) for c in ("mail", "crm")}
    run.execute(step(run, id="snap", type="snapshot_env", env_id="office", snapshot_id="snap-1"))
    doc = run.store.documents.find("artifacts", "snap-1")
    members = universe_members(run.store, doc)
    assert [(m.artifact_id, m.environment_name, m.filename) for m in members] == [
        ("snap-1__mail", "mail", "mail.json"), ("snap-1__crm", "crm", "crm.json")]
    run.execute(step(run, id="reset", type="reset_env", env_id="office"))
    assert data_of(base, "crm")["deals"] == []
    run.execute(step(run, id="back", type="load_artifact", env_id="office", artifact_id="snap-1",
                     environment_name="crm"))
    assert data_of(base, "crm") == before["crm"]


def test_a_sandbox_gets_a_universes_files_and_a_clis_tree(deployed):
    crm = put_env(deployed, "crm-data", "crm", {"a": 1})
    typed.put_environment_universe(deployed.store, "world", [typed.ref_of(crm)],
                                   metadata={"readme": ("README.md", b"hi")})
    typed.put_cli(deployed.store, "tool", {"bin/tool": b"#!/bin/sh\n"}, entrypoint="bin/tool", command_name="tool")
    deployed.execute(deployed.step({"id": "load", "type": "load_artifact", "destination_path": "/app/u",
                                    "artifacts": ["world", "tool"]}))
    root = deployed.sandbox().root / "u"
    assert json.loads((root / "crm" / "crm-seed.json").read_text()) == {"a": 1}
    assert (root / "metadata" / "readme" / "README.md").read_bytes() == b"hi"
    assert (root / "bin" / "tool").read_bytes() == b"#!/bin/sh\n"
    kinds = [e["artifact_type"] for e in deployed.metadata["loaded_file_artifact_universes"]]
    assert kinds == ["environment_universe", "cli"]
