"""Reading a bundle folder: ids, bare-name resolution, and every problem reported at once."""

from __future__ import annotations

import pytest

from agentenv_local.bundles import load_bundle
from agentenv_local.bundles.loader import id_root_for
from agentenv_local.errors import ValidationError


def problems_of(path, package=None) -> tuple[str, list[str]]:
    with pytest.raises(ValidationError) as info:
        load_bundle(path, package)
    return info.value.message, info.value.problems


def test_hello_copy_loads(hello_copy):
    b = load_bundle(hello_copy.root)
    root = id_root_for(hello_copy.root)
    assert b.name == "hello" and b.id_root == root and root.startswith("@local/")
    assert b.description.startswith("The smallest bundle")
    assert set(b.artifacts) == {"greeting"} and set(b.tasks) == {"hello"} and b.evals == {}
    assert b.artifacts["greeting"].id == f"{root}/greeting"
    assert set(b.artifacts["greeting"].files) == {"hello.txt", "check.sh"}
    load = next(s for s in b.tasks["hello"].steps if s["type"] == "load_artifact")
    assert load["artifact_id"] == f"{root}/greeting"  # the bare name resolved to the bundle's own id
    assert b.ignored == []  # README-like files are for people: not listed as ignored


def test_installed_bundle_ids(hello_copy):
    b = load_bundle(hello_copy.root, "some-dist")
    assert b.tasks["hello"].id == "@local/some-dist/hello/hello"


def test_bare_names_in_artifact_lists_resolve(bundle):
    bundle.artifact("a", {"x.txt": "x"})
    bundle.task("t", [
        {"id": "box", "type": "deploy_sandbox", "sandbox_name": "box"},
        {"id": "load", "type": "load_artifact", "sandbox_name": "box", "destination_path": "/app/a",
         "artifacts": ["a", {"id": "a"}, "@local/elsewhere/z"]},
    ])
    b = load_bundle(bundle.root)
    load = b.tasks["t"].steps[1]
    aid = b.artifacts["a"].id
    assert load["artifacts"] == [aid, {"id": aid}, "@local/elsewhere/z"]


def test_artifact_toml_settings(bundle, steps):
    bundle.artifact("g", {"hello.txt": "hi", "artifact.toml": 'id = "@local/mine/g"\ndescription = "d"\n'})
    bundle.task("t", steps("g"))
    b = load_bundle(bundle.root)
    art = b.artifacts["g"]
    assert art.id == "@local/mine/g" and art.description == "d" and set(art.files) == {"hello.txt"}
    assert b.tasks["t"].steps[1]["artifact_id"] == "@local/mine/g"


def test_eval_toml(bundle, steps):
    bundle.artifact("greeting", {"hello.txt": "hi"})
    bundle.task("a", steps())
    bundle.task("b", steps())
    bundle.file("evals/all.toml", 'tasks = ["b", "a"]\ndescription = "both"\n')
    b = load_bundle(bundle.root)
    assert b.evals["all"].task_names == ["b", "a"]


def test_not_a_bundle(tmp_path):
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "notes.txt").write_text("x")
    message, problems = problems_of(tmp_path / "plain")
    assert "not a bundle" in message and "tasks/" in message and problems == []

    (tmp_path / "file.txt").write_text("x")
    assert "not a folder" in problems_of(tmp_path / "file.txt")[0]


def test_misspelled_kind_is_named(tmp_path, steps):
    (tmp_path / "b" / "taskz").mkdir(parents=True)
    message, problems = problems_of(tmp_path / "b")
    assert "not a bundle" in message
    assert problems == ["taskz/: not a bundle folder kind; did you mean tasks/?"]


def test_every_problem_at_once(bundle, steps):
    bundle.file("bundle.toml", 'name = "x"\n')
    bundle.file("artifact/readme.txt", "typo'd kind")
    bundle.artifact("skill", {"SKILL.md": "# a skill"})
    bundle.artifact("badtoml", {"x.txt": "x", "artifact.toml": "type = \n"})
    bundle.artifact("badkey", {"x.txt": "x", "artifact.toml": 'tpye = "file"\n'})
    bundle.artifact("badtype", {"x.txt": "x", "artifact.toml": 'type = "image"\n'})
    bundle.file("artifacts/loose.txt", "not in a folder")
    (bundle.root / "artifacts" / "empty").mkdir()
    bundle.file("tasks/broken.json", '[\n {"id": "a",\n  "type": }\n]')
    bundle.file("tasks/notes.txt", "x")
    bundle.task("cycle", [
        {"id": "a", "type": "deploy_sandbox", "sandbox_name": "s", "depends_on": ["b"]},
        {"id": "b", "type": "deploy_sandbox", "sandbox_name": "t", "depends_on": ["a"]},
    ])
    bundle.task("typo", [{"id": "a", "type": "deploy_sandbox", "sandbox_nam": "s"}])
    bundle.file("evals/bad.toml", "tasks = [\n")
    bundle.file("evals/unknown.toml", 'tasks = ["ghost"]\nextra = 1\n')
    bundle.file("evals/notes.md", "x")
    message, problems = problems_of(bundle.root)
    assert f"bundle {bundle.root}" in message and "nothing was written or run" in message
    expected = [
        "bundle.toml: reserved",
        "artifact/: not a bundle folder kind; did you mean artifacts/?",
        "artifacts/skill: this looks like a skill (it has SKILL.md); put it under skills/skill/",
        "artifacts/badtoml/artifact.toml: not valid TOML",
        "artifacts/badkey/artifact.toml: unknown key(s) tpye",
        "artifacts/badtype/artifact.toml: type 'image' is not supported",
        "artifacts/loose.txt: each artifact is a folder",
        "artifacts/empty: empty artifact folder",
        "tasks/broken.json: not valid JSON (line 3, column 11",
        "tasks/notes.txt: tasks are JSON files",
        "tasks/cycle.json: step 'a': field 'depends_on': 'b' comes later in the task (cycle)",
        ("tasks/typo.json: step 'a' (deploy_sandbox): field 'sandbox_nam': unknown field (typo?); "
         "did you mean 'sandbox_name'?"),
        "evals/bad.toml: not valid TOML",
        "evals/unknown.toml: unknown key(s) extra",
        "evals/unknown.toml: unknown task(s) ghost",
        "evals/notes.md: evals are TOML files",
    ]
    for want in expected:
        assert any(p.startswith(want) for p in problems), f"{want!r} not in {problems}"
    assert len(problems) == len(expected)


def test_non_utf8_files_are_problems_not_crashes(bundle):
    bundle.file("tasks/t.json", b"\xff\xfe[]")
    bundle.file("evals/e.toml", b"tasks = ['\xff']")
    bundle.file("artifacts/a/x.bin", b"\xff")  # artifact files are bytes: fine
    bundle.file("artifacts/a/artifact.toml", b"\xfe = 1")
    _, problems = problems_of(bundle.root)
    assert sorted(p.split(":")[0] for p in problems) == ["artifacts/a/artifact.toml", "evals/e.toml", "tasks/t.json"]
    assert all("not UTF-8 text" in p for p in problems)


def test_file_artifact_with_several_files_is_refused(bundle, steps):
    bundle.artifact("greeting", {"a.txt": "a", "b.txt": "b", "artifact.toml": 'type = "file"\n'})
    bundle.task("t", steps())
    _, problems = problems_of(bundle.root)
    assert problems == [("artifacts/greeting/artifact.toml: type 'file' holds exactly one file; this folder has 2 "
                         "(use file_artifact_universe, or leave type out)")]


def test_bad_artifact_ids(bundle, steps):
    bundle.artifact("a", {"x": "x", "artifact.toml": "id = 5\n"})
    bundle.artifact("b", {"x": "x", "artifact.toml": 'id = "@local/same"\n'})
    bundle.artifact("c", {"x": "x", "artifact.toml": 'id = "@local/same"\n'})
    _, problems = problems_of(bundle.root)
    assert any(p.startswith("artifacts/a/artifact.toml: 'id' must be a string starting with @local/") for p in problems)
    assert any(p.startswith("artifacts/c/artifact.toml: id '@local/same' is also the id of artifacts/b")
               for p in problems)


def test_bad_eval_id(bundle, steps):
    bundle.artifact("greeting", {"hello.txt": "hi"})
    bundle.task("a", steps())
    bundle.file("evals/e.toml", 'tasks = ["a"]\nid = 3\n')
    _, problems = problems_of(bundle.root)
    assert problems == ["evals/e.toml: 'id' must be a string, got 3"]


def test_broken_task_is_not_reported_again_by_its_eval(bundle):
    bundle.task("a", [{"id": "x", "type": "nope"}])
    bundle.file("evals/e.toml", 'tasks = ["a", "ghost"]\n')
    _, problems = problems_of(bundle.root)
    assert len(problems) == 2
    assert problems[0].startswith("tasks/a.json: step 'x': field 'type'")
    assert problems[1].startswith("evals/e.toml: unknown task(s) ghost in 'tasks';")
