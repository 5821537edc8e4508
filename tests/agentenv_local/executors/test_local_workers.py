"""Runs in the hub's worker processes (`--executor workers`, `[executor] kind = "workers"`): hello and support on
two workers; a worker's run recorded as the hub's own is; a worker killed mid-run and its run finishing on
another; a cancelled run torn down; a stopped hub leaving its workers' runs resumable."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from kits.hub import (
    Background,
    clean_env,
    cli,
    runs_json,
    show_json,
    slow_bundle,
    wait_until,
)

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[3]
SUPPORT = ROOT / "examples" / "support"
VOLATILE = {"run_id", "created_at", "started_at", "finished_at", "duration_s", "owner", "rev", "executor",
            "resumed_at", "overrides"}


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "proj"
    (root / ".agentenv").mkdir(parents=True)
    (root / ".agentenv" / "config.toml").write_text('[executor]\nworkers = 2\n')
    return root


WORKERS = ("--executor", "workers")


def test_hello_and_support_run_on_two_worker_processes(project):
    for bundle in ("hello", str(SUPPORT)):  # each command here is its own hub, with its own two workers
        out = cli(project, "run", bundle, "--k", "6", "--concurrency", "6", *WORKERS, "--json", timeout=240)
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        runs = json.loads(out.stdout)
        assert len(runs) == 6 and all(r["status"] == "passed" for r in runs)
        records = [show_json(project, r["run_id"]) for r in runs]
        assert all(r["executor"]["kind"] == "workers" for r in records)
        assert len({r["executor"]["pid"] for r in records}) == 2  # both workers ran some
    shown = cli(project, "runs", "show", records[0]["run_id"], check=True).stdout
    assert f"worker process pid {records[0]['executor']['pid']}" in shown


def normalized(run: dict) -> dict:
    out = {k: v for k, v in run.items() if k not in VOLATILE}
    out["steps"] = {sid: {k: v for k, v in info.items() if k in ("status", "type", "error")}
                    for sid, info in (run.get("steps") or {}).items()}
    out.pop("context", None)
    out.pop("env_end", None)
    out["verifications"] = {step: v.get("score") for step, v in (run.get("verifications") or {}).items()}
    return out


def test_a_workers_run_is_recorded_as_the_hubs_own_is(project):
    """The same support episode in the hub and in a worker process: the same record, journal, state and events."""
    from agentenv_local.hub import connect
    from agentenv_local.tasks.journal import journal_state

    local = json.loads(cli(project, "run", str(SUPPORT), "--json", check=True, timeout=240).stdout)[0]
    remote = json.loads(cli(project, "run", str(SUPPORT), *WORKERS, "--json", check=True, timeout=240).stdout)[0]
    local_run, remote_run = show_json(project, local["run_id"]), show_json(project, remote["run_id"])
    assert normalized(local_run) == normalized(remote_run)
    assert remote_run["executor"]["kind"] == "workers" and "executor" not in local_run
    session = connect(project, defer_linger=False)
    try:
        journals = [session.store.runs.journal(r["run_id"]) for r in (local_run, remote_run)]
        kinds = [sorted(e["kind"] for e in session.store.events.query(run_id=r["run_id"]))
                 for r in (local_run, remote_run)]
    finally:
        session.close()
    assert sorted((e["step_id"], e["status"]) for e in journals[0]) == \
        sorted((e["step_id"], e["status"]) for e in journals[1])
    states = [journal_state(j) for j in journals]
    assert [{step: v["score"] for step, v in s["metadata"]["verifications"].items()} for s in states] == \
        [{"grade": 1.0, "outcome": 1.0}] * 2
    assert [r["agent_name"] for r in states[0]["prompt_responses"]] == \
        [r["agent_name"] for r in states[1]["prompt_responses"]]
    assert kinds[0] == kinds[1]


def _running_on_a_worker(project: Path):
    rows = runs_json(project)
    if not rows:
        return None
    run = show_json(project, rows[0]["run_id"])
    if (run.get("steps") or {}).get("wait", {}).get("status") == "running" and run.get("executor"):
        return run["run_id"], run["executor"]["pid"]
    return None


def test_a_run_whose_worker_is_killed_finishes_on_another(project, tmp_path):
    marker = tmp_path / "go"
    bundle = slow_bundle(tmp_path, marker)
    bg = Background(project, "run", str(bundle), *WORKERS, env=clean_env())
    try:
        bg.wait_to_be_hub()
        run_id, pid = wait_until(lambda: _running_on_a_worker(project), 120, what="the slow step on a worker")
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: (show_json(project, run_id).get("executor") or {}).get("attempts"), 60,
                   what="the lost attempt to be recorded")
        marker.touch()
        bg.expect(0, timeout=180)
    finally:
        bg.stop()
    run = show_json(project, run_id)
    assert run["status"] == "passed" and run["generation"] >= 1
    assert run["executor"]["attempts"][0]["attempt"] == 0 and run["executor"]["pid"] != pid
    shown = cli(project, "runs", "show", run_id, check=True).stdout
    assert "attempt 2 (1 lost)" in shown


def test_cancelling_a_workers_run_tears_it_down(project, tmp_path):
    bundle = slow_bundle(tmp_path, tmp_path / "never")
    bg = Background(project, "run", str(bundle), *WORKERS, env=clean_env())
    try:
        bg.wait_to_be_hub()
        run_id, _ = wait_until(lambda: _running_on_a_worker(project), 120, what="the slow step on a worker")
        out = cli(project, "runs", "cancel", run_id)
        assert out.returncode == 0, out.stdout + out.stderr
        bg.wait(120)
    finally:
        bg.stop()
    run = show_json(project, run_id)
    assert run["status"] == "cancelled" and run["torn_down"] is True
    assert not (project / ".agentenv" / "sandboxes").exists() or \
        not list((project / ".agentenv" / "sandboxes").iterdir())  # the worker removed its sandbox


def test_a_stopped_hub_leaves_its_workers_runs_resumable(project, tmp_path):
    marker = tmp_path / "go"
    bundle = slow_bundle(tmp_path, marker)
    cli(project, "up", "--detach", check=True)
    try:
        bg = Background(project, "run", str(bundle), *WORKERS, env=clean_env())
        run_id, worker_pid = wait_until(lambda: _running_on_a_worker(project), 120, what="the slow step on a worker")
        cli(project, "down", check=True, timeout=120)
        bg.wait(120)
        run = show_json(project, run_id)
        assert run["status"] == "interrupted"
        wait_until(lambda: not Path(f"/proc/{worker_pid}").exists(), 30, what="the worker to exit")
        marker.touch()
        out = cli(project, "runs", "resume", run_id, timeout=180)
        assert out.returncode == 0, out.stdout + out.stderr
    finally:
        cli(project, "down", timeout=120)
    assert show_json(project, run_id)["status"] == "passed"


def test_by_default_a_hub_that_stays_runs_in_workers_and_a_one_shot_hub_itself(tmp_path):
    project = tmp_path / "proj"
    (project / ".agentenv").mkdir(parents=True)
    one_shot = json.loads(cli(project, "run", "hello", "--json", check=True).stdout)[0]
    cli(project, "up", "--detach", check=True)
    try:
        warm = json.loads(cli(project, "run", "hello", "--json", check=True).stdout)[0]
        assert show_json(project, warm["run_id"])["executor"]["kind"] == "workers"
    finally:
        cli(project, "down", timeout=120)
    assert "executor" not in show_json(project, one_shot["run_id"])
