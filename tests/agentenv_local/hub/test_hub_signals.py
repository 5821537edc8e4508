"""Ctrl-C of a command running a task, and kill -9 of a long-lived hub under a client."""

from __future__ import annotations

import os
import signal

import pytest
from kits.hub import (
    Background,
    bash_check,
    cli,
    deploy,
    gate,
    hub_info,
    run_id_of,
    runs_json,
    sandbox_folders,
    show_json,
    step_status,
    wait_until,
    write_bundle,
)


def _slow_bundle(project, release):
    write_bundle(project, "slow", {"slow": [
        deploy(),
        bash_check("wait", gate(release, 60), sandbox_name="box"),
        bash_check("after", "true", sandbox_name="box"),
    ]})


def _wait_for_slow_step(project, run):
    run_id = run_id_of(run, project, "slow")
    wait_until(lambda: step_status(show_json(project, run_id), "wait") == "running", what="the slow step")
    return run_id


@pytest.mark.parametrize("long_lived", [False, True], ids=["run-is-the-hub", "run-is-a-client"])
def test_ctrl_c_cancels_the_run_tears_down_and_exits_130(tmp_path, long_lived):
    project = tmp_path / "proj"
    project.mkdir()
    release = tmp_path / "release"
    _slow_bundle(project, release)
    if long_lived:
        cli(project, "up", "--detach", check=True)
    run = Background(project, "run", "./slow", default_sigint=True)
    try:
        run_id = _wait_for_slow_step(project, run)
        assert ((hub_info(project) or {}).get("pid") == run.pid) is not long_lived
        os.kill(run.pid, signal.SIGINT)
        rc = run.wait(60)
    finally:
        release.touch()
        run.stop()
        if long_lived:
            cli(project, "down")
    assert rc == 130, run.stdout + run.stderr
    final = show_json(project, run_id)
    assert final["status"] == "cancelled"
    assert sandbox_folders(project) == []


def test_kill9_of_a_long_lived_hub_under_a_running_client(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    release = tmp_path / "release"
    _slow_bundle(project, release)
    cli(project, "up", "--detach", check=True)
    hub_pid = hub_info(project)["pid"]
    run = Background(project, "run", "./slow")
    try:
        run_id = _wait_for_slow_step(project, run)
        os.kill(hub_pid, signal.SIGKILL)
        rc = run.wait(60)  # the client notices its hub is gone and says what to do
    finally:
        release.touch()
        run.stop()
        try:
            os.kill(hub_pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert rc == 1
    assert "agentenv runs resume" in run.stderr or "hub" in run.stderr.lower()
    assert "Traceback" not in run.stderr
    rows = runs_json(project)  # a new hub: the run is interrupted, nothing lost
    assert [(r["run_id"], r["status"]) for r in rows] == [(run_id, "interrupted")]
    resumed = cli(project, "runs", "resume", run_id)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert show_json(project, run_id)["status"] == "passed"
    assert sandbox_folders(project) == []
