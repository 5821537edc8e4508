"""`agentenv eval add-tasks FILE --id ID [--version]`: a new eval version with the tasks added (duplicates replaced)."""

from __future__ import annotations

import json

import duckdb


def eval_tasks(project, eval_id: str, version: int) -> list[dict]:
    con = duckdb.connect(str(project.root / ".agentenv" / "store.duckdb"), read_only=True)
    try:
        row = con.execute("SELECT body FROM documents WHERE collection = 'evals' AND id = ? AND version = ?",
                          [eval_id, version]).fetchone()
    finally:
        con.close()
    assert row is not None, f"no eval {eval_id} v{version}"
    return json.loads(row[0])["tasks"]


def make_eval(project, steps_factory) -> None:
    project.copy_hello("src")
    project.cli("artifact", "put", "src/artifacts/greeting", "--id", "greet")
    for name in ("a", "b", "c"):
        project.cli("task", "create", project.write_json(f"{name}.json", steps_factory("greet")), "--id", name)
    project.cli("task", "create", project.write_json("a2.json", steps_factory("greet", "hell")), "--id", "a")
    project.write_json("e.json", [{"task_id": "a", "task_version": 1}, {"task_id": "b"}])
    project.cli("eval", "create", "e.json", "--id", "E")


def test_add_tasks_makes_a_new_version_and_replaces_duplicates(project, steps_factory):
    make_eval(project, steps_factory)
    project.write_json("more.json", [{"task_id": "c"}, {"task_id": "a", "task_version": 2}])
    out = project.cli("eval", "add-tasks", "more.json", "--id", "E").stdout
    assert "Created eval E v2 from v1: 3 task(s) (1 added, 1 replaced)." in out
    assert eval_tasks(project, "E", 1) == [{"task_id": "a", "task_version": 1}, {"task_id": "b", "task_version": None}]
    assert eval_tasks(project, "E", 2) == [{"task_id": "a", "task_version": 2}, {"task_id": "b", "task_version": None},
                                           {"task_id": "c", "task_version": None}]
    # --version starts from an older version; TOML files are read as for `eval create`.
    project.write("one.toml", 'tasks = ["c"]\n')
    project.cli("eval", "add-tasks", "one.toml", "--id", "E", "--version", "1")
    assert eval_tasks(project, "E", 3) == [{"task_id": "a", "task_version": 1}, {"task_id": "b", "task_version": None},
                                           {"task_id": "c", "task_version": None}]
    assert "eval E v3: 3 of 3 passed" in project.cli("eval", "run", "--id", "E").stdout


def test_add_tasks_refuses_unknown_tasks_and_evals_writing_nothing(project, steps_factory):
    make_eval(project, steps_factory)
    before = project.stored()
    project.write_json("ghost.json", [{"task_id": "c"}, {"task_id": "ghost"}])
    err = project.cli("eval", "add-tasks", "ghost.json", "--id", "E", code=1).stderr
    assert "ghost.json: unknown task(s) in 'tasks': ghost; nothing was written" in err
    assert "agentenv task create" in err
    err = project.cli("eval", "add-tasks", "ghost.json", "--id", "nope", code=1).stderr
    assert "nope not found" in err
    err = project.cli("eval", "add-tasks", "ghost.json", "--id", "E", "--version", "9", code=1).stderr
    assert "v9 not found" in err
    project.write_json("bad.json", {"tasks": "c"})
    assert "non-empty list of tasks" in project.cli("eval", "add-tasks", "bad.json", "--id", "E", code=1).stderr
    assert project.stored() == before
