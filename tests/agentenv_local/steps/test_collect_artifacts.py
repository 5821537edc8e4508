"""collect_artifacts: files out of a process sandbox into one stored file bundle, and back in with
load_artifact's collected_artifacts_step_id."""

from __future__ import annotations

import asyncio
import hashlib

import pytest

from agentenv_local.artifacts import read_files
from agentenv_local.errors import StepError, ValidationError
from agentenv_local.tasks.model import parse_task


@pytest.fixture
def deployed(run):
    """A run with one process sandbox named "sandbox" (pinned: these tests look into its folder)."""
    run.execute(run.step({"id": "sb", "type": "deploy_sandbox", "sandbox_type": "process"}))
    return run


def write(run, files: dict[str, bytes], name: str = "sandbox") -> None:
    sandbox = run.sandbox(name)
    for path, data in files.items():
        asyncio.run(sandbox.write_file(path, data))


def collect(run, **fields) -> dict:
    run.execute(run.step({"id": "collect", "type": "collect_artifacts", **fields}))
    return run.metadata["collected_artifacts"]["collect"]


def stored(run, entry: dict) -> dict[str, bytes]:
    doc = run.store.documents.find("artifacts", entry["id"], entry["version"])
    assert doc["body"]["type"] == "file_artifact_universe"
    return read_files(run.store, doc)


def test_enumerates_base_path_into_one_bundle(deployed):
    write(deployed, {"/app/artifact/report.md": b"# done\n", "/app/artifact/data/table.csv": b"1,2\n",
                     "/app/elsewhere.txt": b"not collected"})
    entry = collect(deployed)
    assert entry["id"] == "run-0001__collect-artifacts" and entry["version"] == 1
    assert entry["source"] == "base_path" and entry["sandbox_name"] == "sandbox"
    assert stored(deployed, entry) == {"report.md": b"# done\n", "data/table.csv": b"1,2\n"}
    assert entry["files"]["report.md"] == {"path": "/app/artifact/report.md", "size": 7,
                                           "sha256": hashlib.sha256(b"# done\n").hexdigest()}
    assert deployed.metadata["artifacts"] == [{"id": entry["id"], "version": 1, "type": "file_artifact_universe",
                                               "step_id": "collect", "kind": "collected"}]
    # the objects are content-addressed in the object store: the document names their keys and digests
    doc = deployed.store.documents.find("artifacts", entry["id"], 1)
    assert doc["body"]["files"]["report.md"]["sha256"] == entry["files"]["report.md"]["sha256"]


def test_artifact_paths_relative_absolute_and_directories(deployed):
    write(deployed, {"/app/artifact/a.txt": b"a", "/app/out/b.txt": b"b", "/app/artifact/logs/1.log": b"1",
                     "/app/artifact/logs/2.log": b"2", "/app/artifact/unlisted.txt": b"u"})
    entry = collect(deployed, artifact_paths=["a.txt", "/app/out/b.txt", "logs"], artifact_id="my/outputs")
    assert entry["id"] == "my/outputs" and entry["source"] == "artifact_paths"
    # under base_path: relative to it; elsewhere: the absolute path without its leading '/'
    assert stored(deployed, entry) == {"a.txt": b"a", "app/out/b.txt": b"b", "logs/1.log": b"1", "logs/2.log": b"2"}


def test_missing_listed_path_fails_naming_it_unless_allowed(deployed):
    write(deployed, {"/app/artifact/a.txt": b"a"})
    with pytest.raises(StepError,
                       match=r"2 listed path\(s\) missing in sandbox 'sandbox': nope.txt, /app/gone") as info:
        collect(deployed, artifact_paths=["a.txt", "nope.txt", "/app/gone"])
    assert "allow_missing" in info.value.hint
    assert "collect" not in deployed.metadata.get("collected_artifacts", {})
    entry = collect(deployed, artifact_paths=["a.txt", "nope.txt"], allow_missing=True)
    assert entry["missing"] == ["nope.txt"] and stored(deployed, entry) == {"a.txt": b"a"}


def test_exclude_basenames(deployed):
    write(deployed, {"/app/artifact/keep.txt": b"k", "/app/artifact/.DS_Store": b"x",
                     "/app/artifact/sub/.DS_Store": b"x", "/app/artifact/sub/secret.env": b"s"})
    entry = collect(deployed, exclude_basenames=[".DS_Store", "secret.env"])
    assert stored(deployed, entry) == {"keep.txt": b"k"}
    assert sorted(entry["excluded"]) == ["/app/artifact/.DS_Store", "/app/artifact/sub/.DS_Store",
                                         "/app/artifact/sub/secret.env"]


def test_empty_or_missing_base_path_stores_nothing_and_warns(deployed):
    entry = collect(deployed)
    assert entry["id"] is None and entry["files"] == {}
    assert deployed.store.documents.find("artifacts", "run-0001__collect-artifacts") is None
    warnings = [e["body"] for e in deployed.store.events.query(run_id=deployed.run_id, kinds=["step.log"])
                if e["body"].get("level") == "warning"]
    assert any("no files under /app/artifact in sandbox 'sandbox'" in w["message"] for w in warnings)


def test_manifest_from_an_earlier_step_wins_over_seed_and_artifact_paths(deployed):
    write(deployed, {"/app/artifact/x.txt": b"x", "/app/artifact/y.txt": b"y", "/app/artifact/z.txt": b"z"})
    deployed.metadata["seed"]["expected_artifacts"] = "y.txt"
    # a prompt's structured output
    deployed.state["prompt_responses"].append({"prompt_id": "ask", "step_id": "ask", "response": "done",
                                               "structured_output": {"artifacts": {"result": "/app/artifact/x.txt"}}})
    entry = collect(deployed, manifest_step_id="ask", artifact_paths=["z.txt"])
    assert entry["source"] == "manifest" and stored(deployed, entry) == {"x.txt": b"x"}
    assert entry["files"]["x.txt"]["logical_name"] == "result"
    # a run_code result works as a manifest too
    deployed.metadata["script_results"]["list"] = {"artifacts": {"zed": "z.txt"}}
    entry = collect(deployed, manifest_step_id="list")
    assert entry["source"] == "manifest" and stored(deployed, entry) == {"z.txt": b"z"}
    # a step that left no manifest: the seed is next (comma list), then artifact_paths
    entry = collect(deployed, manifest_step_id="nothing-here", artifact_paths=["z.txt"])
    assert entry["source"] == "seed" and stored(deployed, entry) == {"y.txt": b"y"}
    del deployed.metadata["seed"]["expected_artifacts"]
    entry = collect(deployed, artifact_paths=["z.txt"])
    assert entry["source"] == "artifact_paths" and stored(deployed, entry) == {"z.txt": b"z"}
    # a malformed manifest is an error, not a silent fallback
    deployed.metadata["script_results"]["bad"] = {"artifacts": ["x.txt"]}
    with pytest.raises(StepError, match="manifest of step 'bad' must be an object"):
        collect(deployed, manifest_step_id="bad")


def test_file_size_cap(deployed):
    write(deployed, {"/app/artifact/big.bin": b"x" * 2000, "/app/artifact/small.txt": b"s"})
    with pytest.raises(StepError, match=r"big.bin is 2,000 bytes, over the 1,000-byte limit \(max_file_bytes\)"):
        collect(deployed, max_file_bytes=1000)
    entry = collect(deployed, max_file_bytes=1000, exclude_basenames=["big.bin"])
    assert stored(deployed, entry) == {"small.txt": b"s"}


def test_path_outside_the_process_sandbox_is_refused(deployed):
    with pytest.raises(StepError, match="only has /app"):
        collect(deployed, artifact_paths=["/etc/hostname"])


def test_rerun_adds_a_version_and_keeps_one_run_entry(deployed):
    write(deployed, {"/app/artifact/a.txt": b"1"})
    collect(deployed)
    write(deployed, {"/app/artifact/a.txt": b"2"})
    entry = collect(deployed)
    assert entry["version"] == 2 and stored(deployed, entry) == {"a.txt": b"2"}
    assert [a["version"] for a in deployed.metadata["artifacts"]] == [2]


def test_targets(run):
    with pytest.raises(StepError, match="no sandbox is deployed"):
        collect(run)
    run.execute(run.step({"id": "s1", "type": "deploy_sandbox", "sandbox_type": "process", "sandbox_name": "one"}))
    run.execute(run.step({"id": "s2", "type": "deploy_sandbox", "sandbox_type": "process", "sandbox_name": "two"}))
    write(run, {"/app/artifact/t.txt": b"two"}, name="two")
    with pytest.raises(StepError, match="2 sandboxes are deployed"):
        collect(run)
    assert stored(run, collect(run, container_name="two")) == {"t.txt": b"two"}
    with pytest.raises(StepError, match="env 'desktop' is not deployed in this run"):
        collect(run, env_id="desktop")
    with pytest.raises(StepError, match="no deployed agent named 'coder'"):
        collect(run, agent_name="coder")
    # an agent deployed into one of the run's sandboxes is resolved through it
    run.state["deployed_agents"].append({"agent_name": "coder", "sandbox_id": run.record("two")["sandbox_id"],
                                         "sandbox_type": "process"})
    entry = collect(run, agent_name="coder")
    assert entry["sandbox_name"] == "two" and entry["agent_name"] == "coder"


def test_config_problems(run):
    def problems(**fields):
        return run.step({"id": "c", "type": "collect_artifacts", **fields}).config_problems()

    assert problems() == []
    assert problems(artifact_paths="a.txt") == []  # a lone string is a list of one
    assert problems(artifact_paths=[]) == [
        "artifact_paths: the list is empty (leave it out to collect everything under base_path)"]
    assert problems(sandbox_name="a", container_name="b") == []  # the reference's VM and its container: the container
    assert problems(sandbox_name="a", agent_name="x") == ["sandbox_name, agent_name: collect from one target per step"]
    assert problems(exclude_basenames=["a/b"]) == ["exclude_basenames: entries are file names (non-empty, no '/')"]
    assert problems(manifest_step_id="c") == ["manifest_step_id: names this step itself"]
    with pytest.raises(ValueError):
        run.step({"id": "c", "type": "collect_artifacts", "max_file_bytes": 0})
    with pytest.raises(ValidationError) as info:
        parse_task([{"id": "c", "type": "collect_artifacts", "artifact_path": ["x"]}], "t")
    assert "artifact_paths" in " ".join(info.value.problems)


# -- load_artifact from a collection ------------------------------------------------------------
def test_load_artifact_from_collected_artifacts_step_id(run):
    run.execute(run.step({"id": "s1", "type": "deploy_sandbox", "sandbox_type": "process", "sandbox_name": "one"}))
    run.execute(run.step({"id": "s2", "type": "deploy_sandbox", "sandbox_type": "process", "sandbox_name": "two"}))
    write(run, {"/app/artifact/r.md": b"report", "/app/artifact/d/x.json": b"{}"}, name="one")
    entry = collect(run, sandbox_name="one")
    run.execute(run.step({"id": "load", "type": "load_artifact", "collected_artifacts_step_id": "collect",
                          "sandbox_name": "two", "destination_path": "/app/inputs"}))
    root = run.sandbox("two").root / "inputs"
    assert (root / "r.md").read_bytes() == b"report" and (root / "d" / "x.json").read_bytes() == b"{}"
    assert run.metadata["loaded_file_artifact_universes"][-1] == {
        "id": entry["id"], "version": 1, "artifact_type": "file_artifact_universe", "sandbox_name": "two",
        "destination_path": "/app/inputs", "files": ["d/x.json", "r.md"]}


def test_load_artifact_collected_errors_and_empty(deployed):
    with pytest.raises(StepError, match="step 'collect' has collected no artifacts in this run"):
        deployed.execute(deployed.step({"id": "load", "type": "load_artifact",
                                        "collected_artifacts_step_id": "collect"}))
    collect(deployed)  # nothing under /app/artifact
    deployed.execute(deployed.step({"id": "load", "type": "load_artifact", "collected_artifacts_step_id": "collect"}))
    assert deployed.metadata["loaded_file_artifact_universes"] == []
    step = deployed.step({"id": "l", "type": "load_artifact", "collected_artifacts_step_id": "c", "artifact_id": "a"})
    assert step.config_problems() == ["collected_artifacts_step_id, artifact_id: give one source, not both"]


# -- through the real runner ----------------------------------------------------------------------
# (the `hub` fixture, an InProcessHub, is in conftest.py)
def test_collect_then_load_in_a_real_run(hub):
    run = hub.run([
        {"id": "box", "type": "deploy_sandbox", "sandbox_type": "process", "sandbox_name": "box"},
        {"id": "make", "type": "verify_sandbox", "criteria": [
            {"type": "bash_cmd_succeeds", "bash_cmd": "mkdir -p artifact/sub && echo hi > artifact/sub/out.txt"}]},
        {"id": "collect", "type": "collect_artifacts"},
        {"id": "load", "type": "load_artifact", "collected_artifacts_step_id": "collect", "destination_path": "back"},
        {"id": "check", "type": "verify_sandbox", "criteria": [
            {"type": "probe_file_contains", "paths": ["back/sub/out.txt"], "expected": "^hi"}]},
    ])
    assert run["status"] == "passed", run.get("error")
    collected = run["context"]["metadata"]["collected_artifacts"]["collect"]
    assert collected["id"] == f"{run['run_id']}__collect-artifacts"
    doc = hub.store.documents.find("artifacts", collected["id"], collected["version"])
    assert read_files(hub.store, doc) == {"sub/out.txt": b"hi\n"}
    assert run["context"]["metadata"]["loaded_file_artifact_universes"][0]["id"] == collected["id"]
