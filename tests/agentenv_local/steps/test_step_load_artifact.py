"""load_artifact into a process sandbox from the real artifact store."""

from __future__ import annotations

import asyncio

import pytest

from agentenv_local.errors import StepError
from agentenv_local.steps.load_artifact import LoadArtifactStep


def test_loads_a_bundle_keeping_relative_paths(deployed):
    deployed.put_artifact("@local/hello/greeting", {"hello.txt": b"hello world\n", "sub/data.json": b"{}"})
    deployed.execute(deployed.step({"id": "load", "type": "load_artifact", "artifact_id": "@local/hello/greeting",
                                    "destination_path": "/app/greeting"}))
    sandbox = deployed.sandbox()
    assert (sandbox.root / "greeting" / "hello.txt").read_bytes() == b"hello world\n"
    assert (sandbox.root / "greeting" / "sub" / "data.json").read_bytes() == b"{}"
    [loaded] = deployed.metadata["loaded_file_artifact_universes"]
    assert loaded == {"id": "@local/hello/greeting", "version": 1, "artifact_type": "file_artifact_universe",
                      "sandbox_name": "sandbox", "destination_path": "/app/greeting",
                      "files": ["hello.txt", "sub/data.json"]}


def test_loads_several_artifacts_and_pinned_versions(deployed):
    deployed.put_artifact("notes", {"notes.md": b"v1"})
    deployed.put_artifact("notes", {"notes.md": b"v2"})
    deployed.put_artifact("conf", {"a.ini": b"[a]", "b.ini": b"[b]"})
    deployed.execute(deployed.step({"id": "load", "type": "load_artifact", "destination_path": "data",
                                    "artifacts": [{"id": "notes", "version": 1}, "conf"]}))
    root = deployed.sandbox().root / "data"
    assert (root / "notes.md").read_bytes() == b"v1"  # a file artifact: its filename under destination_path
    assert sorted(p.name for p in root.iterdir()) == ["a.ini", "b.ini", "notes.md"]
    types = [(e["id"], e["version"], e["artifact_type"]) for e in deployed.metadata["loaded_file_artifact_universes"]]
    assert types == [("notes", 1, "file"), ("conf", 1, "file_artifact_universe")]


def test_missing_artifact_fails_before_anything_is_written(deployed):
    deployed.put_artifact("present", {"p.txt": b"p"})
    step = deployed.step({"id": "load", "type": "load_artifact", "artifacts": [{"id": "present"}, {"id": "absent"}]})
    with pytest.raises(StepError, match="artifact 'absent' not found") as info:
        deployed.execute(step)
    assert "agentenv artifact put" in info.value.hint
    assert not (deployed.sandbox().root / "p.txt").exists()
    with pytest.raises(StepError, match="v9 not found"):
        deployed.execute(deployed.step({"id": "l2", "type": "load_artifact", "artifact_id": "present",
                                        "artifact_version": 9}))


def test_needs_a_sandbox(run):
    run.put_artifact("a", {"a.txt": b"a"})
    with pytest.raises(StepError, match="no sandbox is deployed"):
        run.execute(run.step({"id": "load", "type": "load_artifact", "artifact_id": "a"}))
    with pytest.raises(StepError, match="no sandbox named 'other'"):
        run.execute(run.step({"id": "load", "type": "load_artifact", "artifact_id": "a", "sandbox_name": "other"}))
    run.execute(run.step({"id": "s1", "type": "deploy_sandbox", "sandbox_name": "one"}))
    run.execute(run.step({"id": "s2", "type": "deploy_sandbox", "sandbox_name": "two"}))
    with pytest.raises(StepError, match="2 sandboxes are deployed"):
        run.execute(run.step({"id": "load", "type": "load_artifact", "artifact_id": "a"}))
    run.execute(run.step({"id": "load", "type": "load_artifact", "artifact_id": "a", "sandbox_name": "two"}))
    assert (run.sandbox("two").root / "a.txt").exists() and not (run.sandbox("one").root / "a.txt").exists()


def test_destination_outside_the_sandbox_is_refused(deployed):
    deployed.put_artifact("a", {"a.txt": b"a"})
    with pytest.raises(StepError, match="only has /app"):
        deployed.execute(deployed.step({"id": "load", "type": "load_artifact", "artifact_id": "a",
                                        "destination_path": "/etc"}))


def test_agent_target_is_not_there_yet_and_an_env_must_be_deployed(deployed):
    deployed.put_artifact("a", {"a.txt": b"a"})
    with pytest.raises(StepError, match="env 'mail' is not deployed in this run"):
        deployed.execute(deployed.step({"id": "l", "type": "load_artifact", "artifact_id": "a", "env_id": "mail"}))
    with pytest.raises(StepError, match="agents"):
        deployed.execute(deployed.step({"id": "l", "type": "load_artifact", "artifact_id": "a", "agent_name": "x"}))


def test_config_problems(run):
    def problems(**fields):
        return run.step({"id": "l", "type": "load_artifact", **fields}).config_problems()

    assert problems(artifact_id="a") == []
    assert problems(artifacts=[{"id": "a"}]) == []
    assert problems() == ["artifact_id: name the artifact to load (or list several in artifacts)"]
    assert problems(artifact_id="a", artifacts=[{"id": "b"}]) == ["artifact_id, artifacts: give one of them, not both"]
    assert problems(artifacts=[]) == ["artifacts: the list is empty"]
    assert "artifact_version" in problems(artifacts=["a"], artifact_version=2)[0]
    assert problems(artifact_id="a", sandbox_name="s", env_id="e") == [
        "sandbox_name, env_id: load into one target per step"]
    with pytest.raises(ValueError):
        run.step({"id": "l", "type": "load_artifact", "artifacts": [{"id": "a", "vesion": 1}]})


def test_artifact_refs_for_the_bundle_loader():
    assert LoadArtifactStep.artifact_ref_fields == ("artifact_id",)
    raw = {"id": "l", "type": "load_artifact", "artifacts": ["x", {"id": "y", "version": 2}]}
    out = LoadArtifactStep.rewrite_artifact_refs(raw, lambda name: f"@local/b/{name}")
    assert out["artifacts"] == ["@local/b/x", {"id": "@local/b/y", "version": 2}]
    assert raw["artifacts"][0] == "x"  # the input is not changed
    single = LoadArtifactStep.rewrite_artifact_refs({"artifact_id": "g"}, lambda n: n.upper())
    assert single == {"artifact_id": "G"}


def test_written_files_are_visible_to_commands(deployed):
    deployed.put_artifact("s", {"run.sh": b"echo from-artifact"})
    deployed.execute(deployed.step({"id": "load", "type": "load_artifact", "artifact_id": "s"}))
    assert asyncio.run(deployed.sandbox().exec("bash /app/run.sh")).stdout == "from-artifact\n"
