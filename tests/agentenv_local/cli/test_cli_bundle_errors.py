"""Bad bundles through `agentenv run ./FOLDER`: a clear error naming the file, the step and the field,
exit 1, no traceback, and nothing written to the project's store.

One project (module scope) holds a good run of hello first, so "nothing written" is checked against a
store that has content; each case is a fresh copy of hello broken in one way.
"""

from __future__ import annotations

import json

import pytest

GOOD = [
    {"id": "box", "type": "deploy_sandbox", "sandbox_name": "box"},
    {"id": "load", "type": "load_artifact", "artifact_id": "greeting", "sandbox_name": "box",
     "destination_path": "/app/greeting"},
    {"id": "hello", "type": "verify_sandbox", "sandbox_name": "box",
     "criteria": [{"type": "probe_file_contains", "paths": ["greeting/hello.txt"], "expected": "hello"}]},
]


def steps_with(index: int, **changes) -> list[dict]:
    out = json.loads(json.dumps(GOOD))
    out[index].update(changes)
    return [{k: v for k, v in s.items() if v is not None} for s in out]


@pytest.fixture(scope="module")
def used(tmp_path_factory, make_project):
    project = make_project(tmp_path_factory.mktemp("errors"))
    project.cli("run", "hello")
    return project


@pytest.fixture
def broken(used, request):
    """A fresh copy of hello inside the shared project; yields (project, folder name)."""
    name = f"b{len(list(used.root.glob('b*')))}"
    project = used
    project.copy_hello(name)
    before = project.stored()
    yield project, name
    after = project.stored()
    assert after == before, "something was written despite the error"


def write_task(project, name, steps, file="hello.json"):
    project.write(f"{name}/tasks/{file}", steps if isinstance(steps, str) else json.dumps(steps, indent=1))


CASES = {
    "cycle": (
        lambda p, n: write_task(p, n, steps_with(0, depends_on=["hello"])),
        ["tasks/hello.json", "step 'box'", "field 'depends_on'", "'hello' comes later in the task (cycle)"]),
    "forward reference": (
        lambda p, n: write_task(p, n, steps_with(1, depends_on=["hello"]) [:2]
                                + [steps_with(2, depends_on=[])[2]]),
        ["tasks/hello.json", "step 'load'", "field 'depends_on'", "(forward reference)"]),
    "unknown step type": (
        lambda p, n: write_task(p, n, steps_with(2, type="verify_sandboxes")),
        ["tasks/hello.json", "step 'hello'", "field 'type'", "'verify_sandboxes' is not a known step type",
         "known: ", "deploy_sandbox", "verify_sandbox"]),
    "missing required field": (
        lambda p, n: write_task(p, n, steps_with(2, criteria=None)),
        ["tasks/hello.json", "step 'hello' (verify_sandbox)", "field 'criteria'", "Field required"]),
    "unknown field": (
        lambda p, n: write_task(p, n, steps_with(1, destination_pth="/app/x")),
        ["tasks/hello.json", "step 'load' (load_artifact)", "field 'destination_pth'", "unknown field",
         "did you mean 'destination_path'?"]),
    "duplicate ids": (
        lambda p, n: write_task(p, n, steps_with(2, id="load")),
        ["tasks/hello.json", "step 'load'", "duplicate step id"]),
    "malformed JSON": (
        lambda p, n: write_task(p, n, '[\n  {"id": "box",\n   "type": "deploy_sandbox",}\n]'),
        ["tasks/hello.json", "not valid JSON (line 3, column 29"]),
    "malformed eval TOML": (
        lambda p, n: p.write(f"{n}/evals/all.toml", 'tasks = ["hello"]\nid = \n'),
        ["evals/all.toml", "not valid TOML", "line 2, column 6"]),
    "malformed artifact.toml": (
        lambda p, n: p.write(f"{n}/artifacts/greeting/artifact.toml", "description = hello\n"),
        ["artifacts/greeting/artifact.toml", "not valid TOML", "line 1"]),
    "missing artifact": (
        lambda p, n: write_task(p, n, steps_with(1, artifact_id="greetings")),
        ["tasks/hello.json", "step 'load'", "field 'artifact_id'", "artifact 'greetings' is not in this bundle",
         "artifacts/: greeting"]),
    "misspelled kind": (
        lambda p, n: (p.root / n / "tasks").rename(p.root / n / "taskz"),
        ["taskz/", "did you mean tasks/?"]),
    "bundle.toml": (
        lambda p, n: p.write(f"{n}/bundle.toml", 'name = "x"\n'),
        ["bundle.toml: reserved"]),
    "skill under artifacts": (
        lambda p, n: p.write(f"{n}/artifacts/helper/SKILL.md", "# a skill\n"),
        ["artifacts/helper", "SKILL.md", "skills/helper/"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_bundle(broken, case):
    project, name = broken
    breaker, expected = CASES[case]
    breaker(project, name)
    proc = project.cli("run", f"./{name}", code=1)
    assert proc.stderr.startswith("Error: "), proc.stderr
    for text in expected:
        assert text in proc.stderr, f"{text!r} not in:\n{proc.stderr}"
    if case != "misspelled kind":  # that one is not a bundle at all: no bundle path to name twice
        assert str(project.root / name) in proc.stderr
    assert "nothing was written" in proc.stderr or "not a bundle" in proc.stderr
    assert proc.stdout == ""


def test_not_a_bundle(broken):
    project, _ = broken
    project.write("plain/notes.txt", "x")
    proc = project.cli("run", "./plain", code=1)
    assert f"{project.root / 'plain'}: not a bundle" in proc.stderr and "tasks/" in proc.stderr


def test_several_problems_at_once(broken):
    project, name = broken
    write_task(project, name, [
        {"id": "box", "type": "deploy_sandbox", "sandbox_name": "box", "depends_on": ["late"]},
        {"id": "box", "type": "deploy_sandbox", "sandbox_nme": "b"},
        {"id": "x", "type": "nope"},
        {"id": "hello", "type": "verify_sandbox", "sandbox_name": "box"},
        {"id": "late", "type": "deploy_sandbox", "sandbox_name": "z", "depends_on": []},
    ])
    project.write(f"{name}/tasks/other.json", "[")
    project.write(f"{name}/evals/all.toml", "tasks = [")
    project.write(f"{name}/bundle.toml", "")
    proc = project.cli("run", f"./{name}", code=1)
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("  - ")]
    assert f"bundle {project.root / name}: {len(lines)} problem(s); nothing was written or run" in proc.stderr
    for text in ("bundle.toml", "step 'box': field 'depends_on'", "step 'box': duplicate step id",
                 "field 'sandbox_nme'", "'nope' is not a known step type",
                 "step 'hello' (verify_sandbox): field 'criteria'", "tasks/other.json: not valid JSON",
                 "evals/all.toml: not valid TOML"):
        assert sum(text in ln for ln in lines) == 1, f"{text!r} once in:\n{proc.stderr}"
    assert len(lines) == 8
    # the brief's own check: the listings show only what the first good run wrote
    assert [t["id"] for t in project.json("task", "list")] == ["@local/agentenv-local/hello/hello"]
    assert [a["version"] for a in project.json("artifact", "list")] == [1]
