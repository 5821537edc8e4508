"""`agentenv eval create|list|run` end to end."""

from __future__ import annotations

import json


def make_tasks(project, steps_factory) -> None:
    project.copy_hello("src")
    project.cli("artifact", "put", "src/artifacts/greeting", "--id", "greet")
    project.cli("task", "create", project.write_json("ok.json", steps_factory("greet")), "--id", "ok")
    project.cli("task", "create", project.write_json("bad.json", steps_factory("greet", "zebra")), "--id", "bad")


def test_create_with_unknown_task_writes_nothing(project, steps_factory):
    make_tasks(project, steps_factory)
    before = project.stored()
    project.write_json("e.json", [{"task_id": "ok"}, {"task_id": "ghost"}, {"task_id": "ok", "task_version": 7}])
    proc = project.cli("eval", "create", "e.json", "--id", "E", code=1)
    assert "e.json: unknown task(s) in 'tasks': ghost, ok v7; nothing was written" in proc.stderr
    assert "agentenv task create" in proc.stderr
    assert project.stored() == before
    assert project.json("eval", "list") == []


def test_create_list_and_run(project, steps_factory):
    make_tasks(project, steps_factory)
    project.write_json("e.json", [{"task_id": "ok"}])
    assert "Created eval E v1 (1 task)." in project.cli("eval", "create", "e.json", "--id", "E").stdout
    out = project.cli("eval", "run", "--id", "E", "--k", "2").stdout
    assert "eval E v1: 2 of 2 passed" in out

    project.write("mixed.toml", 'tasks = ["ok", "bad"]\n')
    assert "(2 tasks)" in project.cli("eval", "create", "mixed.toml", "--id", "M").stdout
    proc = project.cli("eval", "run", "--id", "M", "--json", code=1)
    runs = json.loads(proc.stdout)
    assert sorted(r["status"] for r in runs) == ["failed", "passed"]
    assert len({r["group_id"] for r in runs}) == 1  # one eval run groups its runs

    listed = project.json("eval", "list")
    assert sorted((e["id"], e["version"], e["tasks"]) for e in listed) == [("E", 1, 1), ("M", 1, 2)]


def test_bad_eval_files(project, steps_factory):
    project.write("bad.toml", "tasks = [\n")
    assert "bad.toml: not valid TOML" in project.cli("eval", "create", "bad.toml", "--id", "E", code=1).stderr
    project.write("bad.json", "[{")
    assert "bad.json: not valid JSON" in project.cli("eval", "create", "bad.json", "--id", "E", code=1).stderr
    project.write_json("noid.json", [{"task": "x"}])
    assert "entry 1: field 'task_id': missing" in project.cli("eval", "create", "noid.json", "--id", "E", code=1).stderr
    project.write_json("ver.json", [{"task_id": "x", "task_version": "one"}])
    err = project.cli("eval", "create", "ver.json", "--id", "E", code=1).stderr
    assert "entry 1: field 'task_version': must be a positive integer" in err
    project.write_json("empty.json", [])
    assert "non-empty list of tasks" in project.cli("eval", "create", "empty.json", "--id", "E", code=1).stderr
    proc = project.cli("eval", "run", "--id", "nope", code=1)
    assert "nope not found" in proc.stderr and "eval list" in proc.stderr
    assert project.stored()["documents"] == set()
