"""`--sandbox` on `run`, `task run` and `eval run` overrides a step's own sandbox_type (as the reference's
does), and the reference's spellings (`sandbox_type: "local"`) map onto our providers: real `agentenv`
subprocesses in a fresh project, the runs' records read back from the store."""

from __future__ import annotations

import json
import shutil

import pytest
from kits.reference_bundles import copy_reference_bundle

CHECK = {"id": "check", "type": "verify_sandbox", "sandbox_name": "box",
         "criteria": [{"type": "bash_cmd_succeeds", "bash_cmd": "test -d /app"}]}


def _bundle(project, name: str, sandbox_type: str, **deploy: str):
    project.write(f"{name}/README.md", f"# {name}\n")
    steps = [{"id": "box", "type": "deploy_sandbox", "sandbox_name": "box", "sandbox_type": sandbox_type, **deploy},
             CHECK]
    project.write(f"{name}/tasks/t.json", json.dumps(steps))
    return project.root / name


def _sandbox_types(run: dict) -> list[str]:
    return [s["sandbox_type"] for s in run["context"]["deployed_sandboxes"]]


def _sandbox_records(project) -> list[tuple[str, str]]:
    """(run_id, sandbox_type) of every sandbox the project's store recorded."""
    import duckdb

    con = duckdb.connect(str(project.root / ".agentenv" / "store.duckdb"), read_only=True)
    try:
        rows = con.execute("select body from records where collection = 'sandboxes'").fetchall()
    finally:
        con.close()
    bodies = [json.loads(r[0]) if isinstance(r[0], str) else r[0] for r in rows]
    return sorted((b["run_id"], b["sandbox_type"]) for b in bodies)


@pytest.mark.podman
@pytest.mark.skipif(shutil.which("podman") is None, reason="needs podman for the step's own provider")
def test_sandbox_flag_overrides_a_steps_own_sandbox_type(project):
    _bundle(project, "own", "podman")
    [overridden] = project.json("run", "./own", "--sandbox", "process")
    assert overridden["status"] == "passed", overridden
    assert _sandbox_types(overridden) == ["process"]  # the run happened on the process provider

    [own] = project.json("run", "./own")  # without the flag: the step's own
    assert own["status"] == "passed", own
    assert _sandbox_types(own) == ["podman"]
    assert _sandbox_records(project) == sorted([(overridden["run_id"], "process"), (own["run_id"], "podman")])


def test_sandbox_flag_overrides_a_provider_that_does_not_exist(project):
    _bundle(project, "b", "no-such-provider")
    [run] = project.json("run", "./b", "--sandbox", "process")
    assert run["status"] == "passed", run
    assert _sandbox_types(run) == ["process"]


def test_task_run_and_eval_run_take_sandbox_too(project):
    bundle = _bundle(project, "b", "no-such-provider")
    project.cli("task", "create", str(bundle / "tasks" / "t.json"), "--id", "t1")
    failed = project.cli("task", "run", "--id", "t1", "--json", code=1)
    assert "no sandbox provider named 'no-such-provider'" in failed.stdout + failed.stderr

    [run] = project.json("task", "run", "--id", "t1", "--sandbox", "process")
    assert run["status"] == "passed" and _sandbox_types(run) == ["process"]

    project.write("e.json", json.dumps([{"task_id": "t1"}]))
    project.cli("eval", "create", "e.json", "--id", "e1")
    runs = project.json("eval", "run", "--id", "e1", "--sandbox", "process")
    assert [(r["status"], _sandbox_types(r)) for r in runs] == [("passed", ["process"])]


def test_dry_run_fails_when_a_step_names_a_provider_that_does_not_exist(project):
    _bundle(project, "b", "no-such-provider")
    out = project.cli("run", "./b", "--dry-run", code=1)
    assert "tasks/t.json: step 'box': field 'sandbox_type': no sandbox provider named 'no-such-provider'" in out.stderr
    assert "installed: " in out.stderr and "process" in out.stderr
    assert project.stored()["documents"] == set()  # nothing was written

    bad_flag = project.cli("run", "./b", "--dry-run", "--sandbox", "nah", code=1)
    assert "--sandbox: no sandbox provider named 'nah'" in bad_flag.stderr

    project.cli("run", "./b", "--dry-run", "--sandbox", "process")  # the flag overrides the step's: fine


def test_a_reference_cloud_provider_is_a_clear_error(project):
    _bundle(project, "b", "modal")
    out = project.cli("run", "./b", "--dry-run", code=1)
    assert "'modal' is a cloud provider of the reference and does not run here" in out.stderr
    assert "--sandbox process" in out.stderr
    assert project.stored()["documents"] == set()


def test_reference_hello_runs_unchanged(project):
    hello = copy_reference_bundle("hello", project.root)
    task = json.loads((hello / "tasks" / "hello.json").read_text())
    assert task[0]["sandbox_type"] == "local" and task[0]["sandbox_mode"] == "vm"  # as the reference ships it

    project.cli("run", "./hello", "--dry-run")
    [run] = project.json("run", "./hello")  # no flags: the reference's local vm is our process provider
    assert run["status"] == "passed", run
    assert _sandbox_types(run) == ["process"]


@pytest.mark.podman
@pytest.mark.skipif(shutil.which("podman") is None, reason="needs podman")
def test_reference_hello_runs_on_podman(project):
    copy_reference_bundle("hello", project.root)
    [run] = project.json("run", "./hello", "--sandbox", "podman")
    assert run["status"] == "passed", run
    assert _sandbox_types(run) == ["podman"]
