"""`agentenv bundle init FOLDER [--from-task ID | --from-eval ID [--version N]]` through the console script.

A new bundle runs as it is; an exported task or eval runs in another project with an empty store (its
artifacts and envs came along as folders); setup fields and secrets are left out; a refused or failed
export writes no folder and nothing to the store.
"""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
TOKEN = "sk-live-" + "a1" * 12


def test_a_new_bundle_runs_as_it_is(project):
    out = project.cli("bundle", "init", "fresh").stdout
    assert "Run it with: agentenv run ./fresh" in out
    files = sorted(p.relative_to(project.root / "fresh").as_posix()
                   for p in (project.root / "fresh").rglob("*") if p.is_file())
    assert files == ["README.md", "artifacts/note/check.sh", "artifacts/note/note.txt", "tasks/check-note.json"]
    assert "passed" in project.cli("run", "./fresh", "--sandbox", "process").stdout
    # an empty folder is taken; a non-empty one is refused
    (project.root / "empty").mkdir()
    project.cli("bundle", "init", "empty")
    err = project.cli("bundle", "init", "fresh", code=1).stderr
    assert "fresh is not empty; nothing was written" in err


def stored_task_with_env(project) -> None:
    project.copy_hello("src")
    project.cli("artifact", "put", "src/artifacts/greeting", "--id", "team/greet")
    echo = project.root / "echo"
    echo.mkdir()
    shutil.copy(EXAMPLES / "envs" / "echo" / "server.py", echo / "server.py")
    (echo / "env.toml").write_text('module = "server.py:Echo"\nrun_as = "subprocess"\n'
                                   f'env_vars = {{GREETING = "hi", API_TOKEN = "{TOKEN}"}}\n')
    project.cli("env", "put", "echo", "--id", "team/echo")
    steps = [
        {"id": "box", "type": "deploy_sandbox", "sandbox_name": "box", "sandbox_type": "process"},
        {"id": "load", "type": "load_artifact", "artifact_id": "team/greet", "artifact_version": 1,
         "sandbox_name": "box", "destination_path": "/app/greeting"},
        {"id": "env", "type": "deploy_env", "env_id": "team/echo"},
        {"id": "hello", "type": "verify_sandbox", "sandbox_name": "box",
         "criteria": [{"type": "probe_file_contains", "paths": ["greeting/hello.txt"], "expected": "hello"},
                      {"type": "bash_cmd_succeeds", "bash_cmd": f"test -n '{TOKEN}' || true"}]},
    ]
    project.cli("task", "create", project.write_json("t.json", {"description": "greet", "steps": steps}),
                "--id", "team/hello")


def test_an_exported_task_runs_with_no_store(project, make_project, tmp_path):
    stored_task_with_env(project)
    before = project.stored()
    out = project.cli("bundle", "init", "out", "--from-task", "team/hello").stdout
    assert project.stored() == before  # nothing written to the store
    assert "Wrote task team/hello v1 into out:" in out
    folder = project.root / "out"
    task = json.loads((folder / "tasks" / "hello.json").read_text())
    assert task["description"] == "greet"
    box, load, env, check = task["steps"]
    assert "sandbox_type" not in box and "tasks/hello.json: step 'box': sandbox_type" in out
    assert load["artifact_id"] == "greet" and "artifact_version" not in load
    assert env["env_id"] == "echo"
    assert (folder / "artifacts" / "greet" / "hello.txt").read_text() == \
        (EXAMPLES / "hello" / "artifacts" / "greeting" / "hello.txt").read_text()
    env_toml = tomllib.loads((folder / "envs" / "echo" / "env.toml").read_text())
    assert env_toml["module"] == "server.py:Echo" and env_toml["env_vars"] == {"GREETING": "hi"}
    server = EXAMPLES / "envs" / "echo" / "server.py"
    assert (folder / "envs" / "echo" / "server.py").read_bytes() == server.read_bytes()
    assert "envs/echo/env.toml.env_vars.API_TOKEN" in out
    everything = b"".join(p.read_bytes() for p in folder.rglob("*") if p.is_file())
    assert TOKEN.encode() not in everything
    assert check["criteria"][1]["bash_cmd"] == "test -n '***' || true"  # masked where a value is needed
    assert "tasks/hello.json: step 'hello'.criteria[1].bash_cmd: masked, its value holds an API key" in out
    assert not [p for p in project.root.iterdir() if "agentenv-partial" in p.name]

    kept = project.cli("bundle", "init", "kept", "--from-task", "team/hello", "--include-scope", "user").stdout
    box = json.loads((project.root / "kept" / "tasks" / "hello.json").read_text())["steps"][0]
    assert box["sandbox_type"] == "process" and "sandbox_type" not in kept
    assert "API_TOKEN" in kept  # secrets are left out all the same

    other = make_project(tmp_path / "elsewhere")
    other.root.mkdir()
    shutil.copytree(folder, other.root / "copy")
    done = other.cli("run", "./copy", "--sandbox", "process", timeout=120)
    assert "tasks/hello.json v1: passed" in done.stdout


def test_an_exported_eval_names_its_tasks(project, steps_factory):
    project.copy_hello("src")
    project.cli("artifact", "put", "src/artifacts/greeting", "--id", "greet")
    for name in ("a", "b"):
        project.cli("task", "create", project.write_json(f"{name}.json", steps_factory("greet")), "--id", f"x/{name}")
    project.write_json("e.json", [{"task_id": "x/a"}])
    project.cli("eval", "create", "e.json", "--id", "suite")
    project.write_json("more.json", [{"task_id": "x/b"}])
    project.cli("eval", "add-tasks", "more.json", "--id", "suite")
    project.cli("bundle", "init", "v1", "--from-eval", "suite", "--version", "1")
    assert tomllib.loads((project.root / "v1" / "evals" / "suite.toml").read_text()) == {"tasks": ["a"]}
    project.cli("bundle", "init", "v2", "--from-eval", "suite")
    assert tomllib.loads((project.root / "v2" / "evals" / "suite.toml").read_text()) == {"tasks": ["a", "b"]}
    assert sorted(p.name for p in (project.root / "v2" / "artifacts").iterdir()) == ["greet"]  # written once
    done = project.cli("run", "./v2", "--sandbox", "process").stdout
    assert "tasks/a.json v1: passed" in done and "tasks/b.json v1: passed" in done


def test_a_failed_export_leaves_no_folder(project, steps_factory):
    project.copy_hello("src")
    project.cli("artifact", "put", "src/artifacts/greeting", "--id", "greet")
    project.cli("task", "create", project.write_json("a.json", steps_factory("greet")), "--id", "a")
    before = project.stored()
    err = project.cli("bundle", "init", "out", "--from-task", "ghost", code=1).stderr
    assert "ghost not found" in err
    err = project.cli("bundle", "init", "out", "--from-task", "a", "--version", "3", code=1).stderr
    assert "v3 not found" in err
    err = project.cli("bundle", "init", "out", "--from-task", "a", "--from-eval", "e", code=2).stderr
    assert "not both" in err
    assert not (project.root / "out").exists()
    assert not [p for p in project.root.iterdir() if "agentenv-partial" in p.name]
    assert project.stored() == before
