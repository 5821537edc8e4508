"""`agentenv task create|get|list|validate|run` end to end, and their bad-input paths."""

from __future__ import annotations

import json


def put_greeting(project, artifact_id: str = "greet") -> None:
    project.copy_hello("src")
    project.cli("artifact", "put", "src/artifacts/greeting", "--id", artifact_id)


def test_create_get_list_validate_and_versions(project, steps_factory):
    put_greeting(project)
    task = project.write_json("t.json", steps_factory("greet"))
    out = project.cli("task", "create", task, "--id", "T").stdout
    assert "Created task T v1 (3 steps)." in out
    assert json.loads(project.cli("task", "get", "--id", "T").stdout) == steps_factory("greet")

    assert "Created task T v2" in project.cli("task", "create", task, "--id", "T").stdout
    listed = project.json("task", "list")
    assert [(t["id"], t["version"], t["steps"]) for t in listed] == [("T", 2, 3)]
    assert ("tasks", "T", 1) in project.stored()["documents"]
    assert "TASK" in project.cli("task", "list").stdout

    assert "3 steps, no problems found" in project.cli("task", "validate", task).stdout
    assert "T v2: 3 steps, no problems found" in project.cli("task", "validate", "--id", "T").stdout
    assert "T v1" in project.cli("task", "validate", "--id", "T", "--version", "1").stdout


def test_run_passing_failing_k_and_json(project, steps_factory):
    put_greeting(project)
    project.cli("task", "create", project.write_json("ok.json", steps_factory("greet")), "--id", "ok")
    project.cli("task", "create", project.write_json("bad.json", steps_factory("greet", "goodbye")), "--id", "bad")

    out = project.cli("task", "run", "--id", "ok").stdout
    assert "[ok] step hello passed" in out and "ok v1: passed" in out and "Tore down 1 sandbox." in out

    out = project.cli("task", "run", "--id", "bad", code=1).stdout
    assert "bad v1: failed (hello: 0)" in out and "See why with: agentenv runs show bad-" in out

    proc = project.cli("task", "run", "--id", "ok", "--k", "2", "--json")
    runs = json.loads(proc.stdout)
    assert [r["status"] for r in runs] == ["passed", "passed"]
    assert all(r["task_id"] == "ok" and r["task_version"] == 1 for r in runs)
    assert len(project.json("runs", "list", "--task", "ok")) == 3


def test_validate_lists_every_problem_and_create_writes_nothing(project):
    bad = project.write_json("bad.json", [
        {"id": "a", "type": "deploy_sandbox", "sandbox_name": "b", "depends_on": ["c"]},
        {"id": "a", "type": "verify_sandbox", "sandbox_name": "b"},
        {"id": "c", "type": "deploy_sandboxx"},
        {"id": "d", "type": "deploy_sandbox", "sandbox_nme": "b"},
    ])
    proc = project.cli("task", "validate", bad, code=1)
    err = proc.stderr
    assert "bad.json" in err and "problem(s)" in err
    assert "step 'a': duplicate step id" in err
    assert "step 'a' (verify_sandbox): field 'criteria'" in err
    assert "step 'c': field 'type': 'deploy_sandboxx' is not a known step type; known:" in err
    assert "step 'd' (deploy_sandbox): field 'sandbox_nme': unknown field (typo?); did you mean 'sandbox_name'?" in err

    proc = project.cli("task", "create", bad, "--id", "B", code=1)
    assert "duplicate step id" in proc.stderr
    assert project.stored()["documents"] == set()
    assert project.json("task", "list") == []


def test_missing_artifact_is_refused(project, steps_factory):
    task = project.write_json("t.json", steps_factory("nope"))
    for args in (["validate", task], ["create", task, "--id", "T"]):
        proc = project.cli("task", *args, code=1)
        assert "step 'load': field 'artifact_id': artifact 'nope' is not in the store" in proc.stderr
        assert "agentenv artifact put" in proc.stderr
    assert project.stored()["documents"] == set()


def test_malformed_and_non_utf8_files(project):
    project.write("broken.json", '[\n  {"id": "a",\n   "type": }\n]\n')
    proc = project.cli("task", "validate", "broken.json", code=1)
    assert "broken.json: not valid JSON (line 3, column 12" in proc.stderr
    (project.root / "binary.json").write_bytes(b"\xff\xfe[]")
    proc = project.cli("task", "create", "binary.json", "--id", "X", code=1)
    assert "binary.json: not UTF-8 text" in proc.stderr
    project.write("obj.json", '{"name": "x"}')
    assert "a task is a JSON list of steps" in project.cli("task", "validate", "obj.json", code=1).stderr
    project.write("empty.json", '[]')
    assert "the task has no steps" in project.cli("task", "validate", "empty.json", code=1).stderr
    assert project.stored()["documents"] == set()


def test_missing_task_ids(project):
    for args in (["get", "--id", "nope"], ["run", "--id", "nope"], ["validate", "--id", "nope"]):
        proc = project.cli("task", *args, code=1)
        assert "nope not found" in proc.stderr and "task list" in proc.stderr
    assert project.stored()["runs"] == 0


def test_a_missing_artifact_in_an_artifacts_list_is_refused(project, steps_factory):
    steps = steps_factory()
    load = next(s for s in steps if s["type"] == "load_artifact")
    load.pop("artifact_id")
    load["artifacts"] = [{"id": "nope"}, "nope-either"]
    project.write_json("t.json", steps)
    for args in (("task", "create", "t.json", "--id", "t"), ("task", "validate", "t.json")):
        proc = project.cli(*args, code=1)
        assert "field 'artifacts': artifact 'nope' is not in the store" in proc.stderr
        assert "artifact 'nope-either' is not in the store" in proc.stderr
    assert project.stored()["documents"] == set()
