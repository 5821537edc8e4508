"""`task run --output-dir DIR`, `--context-json FILE` and `--start-step N`, as the reference's task run: a
kept run's context written to DIR continues in a second run that starts at step N with the sandbox the
first one deployed; the skipped steps are recorded as such; bad values are refused writing nothing. Real
`agentenv` subprocesses in a fresh project, process sandboxes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture
def hello(project) -> str:
    """The hello bundle run once (stores its task and artifact); returns the task's id."""
    project.copy_hello()
    [run] = project.json("run", "./mybundle", "--sandbox", "process")
    assert run["status"] == "passed", run
    return run["task_id"]


def contexts(folder: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def test_output_dir_writes_each_runs_context(project, hello):
    out = project.cli("task", "run", "--id", hello, "--k", "2", "--sandbox", "process", "--output-dir", "out")
    files = sorted((project.root / "out").glob("*.json"))
    assert len(files) == 2, files
    assert all(f.name.endswith(".json") and f.name[:-len("_12345678.json")].endswith("mybundle-hello")
               and len(f.name) <= 96 + len("_12345678.json") for f in files), files
    assert out.stdout.count("Task context written to: ") == 2
    runs = {r["run_id"]: r for r in project.json("runs", "list")}
    for context in contexts(project.root / "out"):
        assert set(context) >= {"deployed_sandboxes", "prompt_responses", "metadata"}
        assert context["metadata"]["task_id"] == hello
        assert "hello" in context["metadata"]["verifications"]
    assert len(runs) == 3


def test_a_kept_run_continues_from_its_context_at_a_later_step(project, hello):
    project.cli("task", "run", "--id", hello, "--sandbox", "process", "--keep", "--output-dir", "first")
    [first] = contexts(project.root / "first")
    [box] = first["deployed_sandboxes"]
    (project.root / "first" / "x.json").write_text(json.dumps(first))

    [run] = project.json("task", "run", "--id", hello, "--sandbox", "process", "--start-step", "2",
                         "--context-json", "first/x.json")
    assert run["status"] == "passed", run
    assert [s["status"] for s in run["steps"].values()] == ["skipped", "skipped", "passed"]
    assert run["steps"]["box"]["reason"] == "before --start-step 2" and run["start_step"] == 2
    [again] = run["context"]["deployed_sandboxes"]
    assert again["sandbox_id"] == box["sandbox_id"]  # the first run's sandbox, not a new one
    assert run["context"]["metadata"]["start_step"] == 2
    assert again.get("torn_down") or box["sandbox_id"] in run["context"]["metadata"]["torn_down_sandbox_ids"]


def test_start_step_without_a_context_starts_empty_and_says_so(project, hello):
    out = project.cli("task", "run", "--id", hello, "--sandbox", "process", "--start-step", "2", "--json", code=1)
    assert "without --context-json" in out.stderr
    [run] = json.loads(out.stdout)
    assert run["status"] == "error" and "box" in run["error"], run  # no sandbox named box in an empty context


@pytest.mark.parametrize("args, message", [
    (["--start-step", "3"], "--start-step 3 is past the last step of task"),
    (["--context-json", "list.json"], "a context is a JSON object, not list"),
    (["--context-json", "broken.json"], "broken.json"),
])
def test_bad_values_are_refused_writing_nothing(project, hello, args, message):
    project.write("list.json", "[]")
    project.write("broken.json", "{not json")
    before = project.stored()
    out = project.cli("task", "run", "--id", hello, "--sandbox", "process", *args, code=1)
    assert message in out.stderr, out.stderr
    assert project.stored() == before


def test_eval_run_writes_each_runs_context_too(project, hello):
    project.write("e.json", json.dumps([{"task_id": hello}]))
    project.cli("eval", "create", "e.json", "--id", "e1")
    runs = project.json("eval", "run", "--id", "e1", "--k", "2", "--sandbox", "process", "--output-dir", "evout")
    written = contexts(project.root / "evout")
    assert len(written) == 2 and all(r["status"] == "passed" for r in runs)
    assert sorted(c["metadata"]["run_group_id"] for c in written) == sorted(r["group_id"] for r in runs)


def test_a_reference_shaped_context_is_taken_as_it_is(project, hello):
    """The reference's context JSON has keys of its own (agent_model, instance_id, ...): they are kept."""
    project.write("ref.json", json.dumps({"deployed_envs": [], "deployed_agents": [], "deployed_sandboxes": [],
                                          "prompt_responses": [], "metadata": {"seed": {}, "note": "from ref"},
                                          "agent_model": None, "instance_id": "abc"}))
    [run] = project.json("task", "run", "--id", hello, "--sandbox", "process", "--context-json", "ref.json")
    assert run["status"] == "passed", run
    assert run["context"]["instance_id"] == "abc" and run["context"]["metadata"]["note"] == "from ref"
    assert run["context"]["metadata"]["task_id"] == hello  # the run's own metadata over the file's


def test_the_skipped_steps_configuration_is_not_checked(project):
    """A step before --start-step does not run, so what it would need (here a model) is not asked for."""
    project.write_json("t.json", [
        {"id": "solver", "type": "deploy_agent", "a2a_agent_id": "tool-loop", "agent_name": "solver"},
        {"id": "box", "type": "deploy_sandbox", "sandbox_name": "box"},
        {"id": "check", "type": "verify_sandbox", "sandbox_name": "box",
         "criteria": [{"type": "bash_cmd_succeeds", "bash_cmd": "true"}]},
    ])
    project.cli("task", "create", "t.json", "--id", "t2")
    refused = project.cli("task", "run", "--id", "t2", "--sandbox", "process", code=1)
    assert "the tool-loop agent needs a model" in refused.stderr
    [run] = project.json("task", "run", "--id", "t2", "--sandbox", "process", "--start-step", "1")
    assert run["status"] == "passed", run
    assert [s["status"] for s in run["steps"].values()] == ["skipped", "passed", "passed"]
