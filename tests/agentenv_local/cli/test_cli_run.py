"""`agentenv run` end to end: real subprocesses in a fresh project, state in <project>/.agentenv."""

from __future__ import annotations

import json

import pytest


def test_no_argument_lists_the_known_bundles(project):
    out = project.cli("run").stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("hello "))
    assert "1 task" in line and "greeting" in line  # the README's first line describes it
    assert "agentenv run NAME" in out

    listed = project.json("run")
    hello = next(b for b in listed if b["name"] == "hello")
    assert hello["tasks"] == 1 and hello["description"].startswith("The smallest bundle")
    assert hello["path"].endswith("hello")
    assert not (project.root / ".agentenv").exists()  # listing bundles opens no store


def test_run_hello_then_again_unchanged(project):
    first = project.cli("run", "hello")
    out = first.stdout
    assert "artifacts/greeting: v1 (new)" in out
    assert "tasks/hello.json: v1 (new)" in out
    for step in ("box (deploy_sandbox)", "load (load_artifact)", "hello (verify_sandbox)"):
        assert step in out
    assert "step hello passed" in out
    assert "hello: 2/2 criteria, score 1" in out
    assert "tasks/hello.json v1: passed (hello: 1)" in out
    assert "Tore down 1 sandbox." in out
    before = project.stored()

    again = project.cli("run", "hello").stdout
    assert "artifacts/greeting: v1, unchanged" in again
    assert "tasks/hello.json: v1, unchanged" in again
    after = project.stored()
    assert after["documents"] == before["documents"]  # no new version of anything
    assert after["runs"] == before["runs"] + 1

    runs = project.json("runs", "list")
    assert [r["status"] for r in runs] == ["passed", "passed"]


def test_changed_artifact_makes_a_new_version(project):
    bundle = project.copy_hello()
    project.cli("run", "./mybundle")
    (bundle / "artifacts" / "greeting" / "hello.txt").write_text("hello again\n")
    out = project.cli("run", "./mybundle").stdout
    assert "artifacts/greeting: v2 (changed)" in out
    assert "tasks/hello.json: v2 (changed)" in out  # it pins the artifact version it uses
    arts = project.json("artifact", "list")
    assert [(a["version"], a["files"]) for a in arts] == [(2, 2)]


def test_dry_run_writes_nothing(project):
    out = project.cli("run", "hello", "--dry-run").stdout
    assert "Dry run" in out and "Would run: tasks/hello.json v1" in out
    assert "artifacts/greeting: v1 (new)" in out
    stored = project.stored()
    assert stored["documents"] == set() and stored["runs"] == 0 and stored["objects"] == 0
    assert project.json("task", "list") == []
    assert project.json("artifact", "list") == []

    plan = project.json("run", "hello", "--dry-run")
    assert plan["dry_run"] is True
    assert [(p["kind"], p["status"]) for p in plan["plan"]] == [("artifacts", "new"), ("tasks", "new")]
    assert plan["would_run"][0]["task"] == "tasks/hello.json"


def test_task_option(project):
    project.cli("run", "hello", "--task", "hello")
    project.cli("run", "hello", "--task", "tasks/hello.json")
    assert len(project.json("runs", "list")) == 2

    bad = project.cli("run", "hello", "--task", "nope", code=1)
    assert "no task named nope" in bad.stderr and "tasks here: hello" in bad.stderr
    assert len(project.json("runs", "list")) == 2


def test_k_makes_that_many_runs_and_json_is_pure(project):
    proc = project.cli("run", "hello", "--k", "3", "--json")
    runs = json.loads(proc.stdout)  # plan and progress lines go to stderr
    assert len(runs) == 3 and {r["status"] for r in runs} == {"passed"}
    assert "tasks/hello.json: v1 (new)" in proc.stderr
    listed = project.json("runs", "list")
    assert len(listed) == 3 and {r["run_id"] for r in listed} == {r["run_id"] for r in runs}


SEEDED_TASK = [
    {"id": "box", "type": "deploy_sandbox", "sandbox_name": "box"},
    {"id": "load", "type": "load_artifact", "artifact_id": "greeting", "sandbox_name": "box",
     "destination_path": "/app/greeting"},
    {"id": "hello", "type": "verify_sandbox", "sandbox_name": "box",
     "criteria": [{"type": "probe_file_contains", "paths": ["greeting/hello.txt"], "expected": "<word>"}]},
]


def test_seeds_one_run_per_row(project):
    bundle = project.copy_hello()
    project.write_json("mybundle/tasks/hello.json", SEEDED_TASK)
    seeds = project.write("seeds.csv", "word\nhello\nzebra\n")
    proc = project.cli("run", "./mybundle", "--seeds", seeds, code=1)  # one row fails
    assert "1 of 2 runs passed" in proc.stdout
    assert "See why with: agentenv runs show" in proc.stdout
    runs = project.json("runs", "list")
    by_word = {r["seed"]["word"]: r["status"] for r in
               (project.json("runs", "show", r["run_id"]) for r in runs)}
    assert by_word == {"hello": "passed", "zebra": "failed"}
    assert bundle.exists()


def test_seed_column_matching_no_placeholder_is_noted(project):
    project.copy_hello()
    project.write_json("mybundle/tasks/hello.json", SEEDED_TASK)
    seeds = project.write("seeds.csv", "wrod\nhello\n")
    proc = project.cli("run", "./mybundle", "--seeds", seeds, code=1)
    assert "seed column(s) 'wrod' fill no <placeholder>" in proc.stderr and "<word>" in proc.stderr


def test_bad_seeds_file(project):
    project.copy_hello()
    empty = project.write("empty.csv", "word\n")
    proc = project.cli("run", "./mybundle", "--seeds", empty, code=1)
    assert "empty.csv" in proc.stderr and "no seed rows" in proc.stderr
    (project.root / "bin.csv").write_bytes(b"\xff\xfeword\n")
    proc = project.cli("run", "./mybundle", "--seeds", "bin.csv", code=1)
    assert "bin.csv" in proc.stderr and "UTF-8" in proc.stderr
    assert project.stored()["documents"] == set()


def test_evals_are_run(project):
    bundle = project.copy_hello()
    project.write_json("mybundle/tasks/other.json", SEEDED_TASK)  # not in the eval: not run
    project.write("mybundle/evals/all.toml", 'tasks = ["hello"]\n')
    proc = project.cli("run", "./mybundle")
    assert "evals/all.toml: v1 (new)" in proc.stdout
    assert "tasks/hello.json v1: passed" in proc.stdout
    runs = project.json("runs", "list")
    assert [r["task_name"] for r in runs] == ["hello"]
    assert bundle.is_dir()

    bad = project.cli("run", "./mybundle", "--eval", "nope", code=1)
    assert "no eval named nope" in bad.stderr and "evals here: all" in bad.stderr


def test_bundle_with_no_tasks_writes_nothing(project):
    project.write("only/artifacts/a/x.txt", "x")
    proc = project.cli("run", "./only", code=1)
    assert "has no tasks to run" in proc.stderr
    assert project.stored()["documents"] == set()


def test_unknown_bundle_name_and_missing_folder(project):
    proc = project.cli("run", "nosuchbundle", code=1)
    assert "no bundle or folder named 'nosuchbundle'" in proc.stderr
    assert "known bundles: accounts-payable, escalation, hello, office, support;" in proc.stderr
    proc = project.cli("run", "./missing", code=1)
    assert "no such folder" in proc.stderr


@pytest.mark.parametrize("args", [
    ["run", "--k", "0", "hello"],
    ["run", "--no-such-option"],
    ["run", "hello", "--concurrency", "0"],
    ["run", "hello", "--seeds", "missing.csv"],
    ["task", "validate"],
    ["nosuchcommand"],
])
def test_usage_errors_exit_2(project, args):
    proc = project.cli(*args, code=2)
    assert "Usage:" in proc.stderr or "Error:" in proc.stderr
    assert not (project.root / ".agentenv" / "store.duckdb").exists()


def test_version(project):
    assert project.cli("--version").stdout.strip() == "agentenv 0.1.0"
