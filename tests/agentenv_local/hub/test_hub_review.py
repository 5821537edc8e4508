"""A `review` step waits for an operator; another process answers it with `agentenv runs review`."""

from __future__ import annotations

import pytest
from kits.hub import (
    Background,
    bash_check,
    cli,
    deploy,
    run_id_of,
    runs_json,
    sandbox_folders,
    show_json,
    step_status,
    wait_until,
    write_bundle,
)


@pytest.fixture
def gated(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    after = tmp_path / "after"
    write_bundle(project, "gated", {"gated": [
        deploy(),
        {"id": "approve", "type": "review", "label": "ship it?", "timeout_seconds": 120},
        bash_check("after", f"touch {after}", sandbox_name="box"),
    ]})
    return project, after


def _start_and_wait_for_review(project):
    run = Background(project, "run", "./gated")
    run_id = run_id_of(run, project, "gated")
    wait_until(lambda: step_status(show_json(project, run_id), "approve") == "running", what="the review step")
    # The pending review shows in `runs show`, and the run's own (non-TTY) output says how to answer.
    wait_until(lambda: "review waiting: ship it?" in cli(project, "runs", "show", run_id).stdout,
               what="runs show to list the pending review")
    wait_until(lambda: f"agentenv runs review {run_id} --continue" in run.stderr,
               what="the run to print the review hint")
    return run, run_id


def test_review_continue_from_another_process(gated):
    project, after = gated
    run, run_id = _start_and_wait_for_review(project)
    try:
        answered = cli(project, "runs", "review", run_id, "--continue", check=True)
        assert f"{run_id}:approve: continue" in answered.stdout
        run.expect(0, timeout=60)
    finally:
        run.stop()
    final = show_json(project, run_id)
    assert final["status"] == "passed"
    assert final["context"]["metadata"]["reviews"] == {"approve": "continue"}
    assert after.exists()
    assert sandbox_folders(project) == []
    # Nothing waits any more.
    again = cli(project, "runs", "review", run_id, "--continue")
    assert again.returncode == 1 and "no review waiting" in again.stderr


def test_review_abort_ends_the_run_in_error_naming_the_review(gated):
    project, after = gated
    run, run_id = _start_and_wait_for_review(project)
    try:
        cli(project, "runs", "review", run_id[:-2], "--abort", check=True)
        run.expect(1, timeout=60)
    finally:
        run.stop()
    final = show_json(project, run_id)
    assert final["status"] == "error"
    assert "ship it?" in final["error"] and "aborted" in final["error"]
    assert step_status(final, "after") == "skipped"
    assert not after.exists()
    assert sandbox_folders(project) == []
    assert runs_json(project)[0]["status"] == "error"


def test_review_needs_a_decision(gated):
    project, _ = gated
    cli(project, "run", "hello", check=True)
    run_id = runs_json(project)[0]["run_id"]
    usage = cli(project, "runs", "review", run_id)
    assert usage.returncode == 2 and "--continue or --abort" in usage.stderr
    none = cli(project, "runs", "review", run_id, "--abort")
    assert none.returncode == 1 and "no review waiting" in none.stderr
