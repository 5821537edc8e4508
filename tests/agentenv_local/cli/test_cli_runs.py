"""`agentenv runs list|show` end to end over a project with a passing and a failing run."""

from __future__ import annotations

import json

import pytest


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, make_project):
    project = make_project(tmp_path_factory.mktemp("runs"))
    project.copy_hello()
    project.cli("run", "./mybundle")
    (project.root / "mybundle" / "artifacts" / "greeting" / "hello.txt").write_text("bye\n")
    project.cli("run", "./mybundle", code=1)
    runs = project.json("runs", "list")
    return project, {r["status"]: r["run_id"] for r in runs}


def test_list_filters_by_status(two_runs):
    project, ids = two_runs
    assert set(ids) == {"passed", "failed"}
    passed = project.json("runs", "list", "--status", "passed")
    assert [r["run_id"] for r in passed] == [ids["passed"]]
    assert project.json("runs", "list", "--status", "cancelled") == []
    assert len(project.json("runs", "list", "--limit", "1")) == 1
    text = project.cli("runs", "list").stdout
    assert "RUN" in text and ids["failed"] in text and ids["passed"] in text


def test_show_by_unique_prefix(two_runs):
    project, ids = two_runs
    failed = ids["failed"]
    out = project.cli("runs", "show", failed[:-3]).stdout
    assert f"run       {failed}" in out
    assert "status    failed" in out
    assert "[FAIL] probe_file_contains" in out
    record = json.loads(project.cli("runs", "show", failed, "--json").stdout)
    # the second run used the changed greeting, which made task v2 (tasks pin their artifacts)
    assert record["run_id"] == failed and record["status"] == "failed" and record["task_version"] == 2


def test_unknown_and_ambiguous_runs(two_runs):
    project, _ = two_runs
    proc = project.cli("runs", "show", "zzz-nope", code=1)
    assert "run 'zzz-nope' not found" in proc.stderr and "agentenv runs list" in proc.stderr
    proc = project.cli("runs", "show", "hello-", code=1)
    assert "ambiguous" in proc.stderr


def test_no_runs_yet(project):
    assert "No runs yet" in project.cli("runs", "list").stdout
    assert project.json("runs", "list") == []


def test_filters_that_match_nothing(two_runs):
    project, _ = two_runs
    assert "No runs match" in project.cli("runs", "list", "--status", "cancelled").stdout
    assert "No runs match" in project.cli("runs", "list", "--task", "ghost").stdout
    proc = project.cli("runs", "list", "--status", "bogus", code=2)
    assert "'bogus' is not one of" in proc.stderr
