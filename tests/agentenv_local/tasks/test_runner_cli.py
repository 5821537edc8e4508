"""The runner through the CLI: `runs cancel` from another process, `--keep`, teardown, exit
codes and statuses, and many runs at once (`--k 100 --concurrency 20`)."""

from __future__ import annotations

import json

import pytest
from kits.hub import (
    Background,
    bash_check,
    cli,
    deploy,
    gate,
    run_id_of,
    runs_json,
    sandbox_folders,
    show_json,
    step_status,
    wait_until,
    write_bundle,
)


@pytest.fixture
def project(tmp_path):
    folder = tmp_path / "proj"
    folder.mkdir()
    return folder


def test_runs_cancel_from_another_process_cancels_and_tears_down(project, tmp_path):
    release = tmp_path / "release"
    write_bundle(project, "slow", {"slow": [
        deploy(),
        bash_check("wait", gate(release, 60), sandbox_name="box"),
        bash_check("after", "true", sandbox_name="box"),
    ]})
    run = Background(project, "run", "./slow")
    try:
        run_id = run_id_of(run, project, "slow")
        wait_until(lambda: step_status(show_json(project, run_id), "wait") == "running", what="the slow step")
        assert len(sandbox_folders(project)) == 1
        cancelled = cli(project, "runs", "cancel", run_id, check=True)
        assert f"{run_id}: cancelled" in cancelled.stdout
        assert run.wait(60) == 1
    finally:
        release.touch()
        run.stop()
    final = show_json(project, run_id)
    assert final["status"] == "cancelled"
    assert step_status(final, "after") == "skipped"
    assert sandbox_folders(project) == []
    assert "cancelled" in run.stdout
    # Nothing left to cancel now: a clear error.
    again = cli(project, "runs", "cancel", run_id)
    assert again.returncode == 1 and "nothing to cancel" in again.stderr


def test_keep_keeps_the_sandboxes_and_teardown_happens_otherwise(project):
    write_bundle(project, "b", {"ok": [deploy(), bash_check("check", "true", sandbox_name="box")],
                                "bad": [deploy(), bash_check("check", "false", sandbox_name="box")]})
    ok = cli(project, "run", "./b", "--task", "ok")
    assert ok.returncode == 0 and "Tore down 1 sandbox" in ok.stdout
    bad = cli(project, "run", "./b", "--task", "bad")
    assert bad.returncode == 1
    assert "failed" in bad.stdout and "See why with: agentenv runs show" in bad.stdout
    assert sandbox_folders(project) == []  # torn down on pass and on failure
    kept = cli(project, "run", "./b", "--task", "ok", "--keep")
    assert kept.returncode == 0
    assert len(sandbox_folders(project)) == 1
    statuses = [r["status"] for r in runs_json(project)]
    assert statuses == ["passed", "failed", "passed"]


def test_a_step_failing_the_task_is_an_error_run(project):
    write_bundle(project, "b", {"broken": [deploy(), bash_check("check", "true", sandbox_name="missing")]})
    proc = cli(project, "run", "./b")
    assert proc.returncode == 1
    run = runs_json(project)[0]
    assert run["status"] == "error"
    shown = cli(project, "runs", "show", run["run_id"], check=True).stdout
    assert "step 'check' failed" in shown and "missing" in shown
    assert sandbox_folders(project) == []


@pytest.mark.timeout(240)
def test_a_hundred_hello_runs_twenty_at_a_time(project):
    proc = cli(project, "run", "hello", "--k", "100", "--concurrency", "20", timeout=220)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "100 of 100 runs passed" in proc.stdout
    rows = runs_json(project)
    assert len(rows) == 100 and {r["status"] for r in rows} == {"passed"}
    assert sandbox_folders(project) == []
    as_json = cli(project, "run", "hello", "--k", "3", "--json", check=True)
    assert [r["status"] for r in json.loads(as_json.stdout)] == ["passed"] * 3
