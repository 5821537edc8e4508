"""Runs on a real two-node Ray cluster on 127.0.0.1 (`--executor ray`): hello and support at --k 20, watched
live from a second process; a Ray run recorded as a local run of the same task and seed is; a worker killed
mid-run and the run finishing elsewhere; a cancelled Ray run; an unreachable cluster failing fast."""

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
from kits.ray_cluster import require_ray, short_temp_dir, start_cluster, stop_cluster

pytestmark = pytest.mark.timeout(600)  # a test's own waits (a run starting, a worker lost) add up past the default

ROOT = Path(__file__).resolve().parents[2]
SUPPORT = ROOT / "examples" / "support"
VOLATILE = {"run_id", "created_at", "started_at", "finished_at", "duration_s", "owner", "rev", "executor",
            "resumed_at", "overrides"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    require_ray()
    started = start_cluster(short_temp_dir())
    try:
        yield started
    finally:
        stop_cluster(started)


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    return root


def env() -> dict[str, str]:
    return clean_env({"RAY_USAGE_STATS_ENABLED": "0"})


def ray_flags(cluster) -> list[str]:
    return ["--executor", "ray", "--ray-address", cluster.address]


def test_hello_and_support_at_k20_run_on_both_nodes(cluster, project):
    for bundle in ("hello", str(SUPPORT)):
        out = cli(project, "run", bundle, "--k", "20", "--concurrency", "4", *ray_flags(cluster), "--json",
                  env=env(), timeout=900)
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        runs = json.loads(out.stdout)
        assert len(runs) == 20 and all(r["status"] == "passed" for r in runs)
    records = [show_json(project, r["run_id"], env=env()) for r in runs_json(project, env=env())]
    assert all(r["executor"]["kind"] == "ray" for r in records)
    assert len({r["executor"]["node_id"] for r in records}) == 2  # both nodes ran some


def normalized(run: dict) -> dict:
    """A run record without what differs between any two runs (ids, times, hosts)."""
    out = {k: v for k, v in run.items() if k not in VOLATILE}
    out["steps"] = {sid: {k: v for k, v in info.items() if k in ("status", "type", "error")}
                    for sid, info in (run.get("steps") or {}).items()}
    out.pop("context", None)
    return out


def test_a_ray_run_is_recorded_as_a_local_run_is(cluster, project):
    local = json.loads(cli(project, "run", "hello", "--json", env=env(), check=True).stdout)[0]
    remote = json.loads(cli(project, "run", "hello", *ray_flags(cluster), "--json", env=env(), check=True,
                            timeout=300).stdout)[0]
    local_run, remote_run = show_json(project, local["run_id"], env=env()), show_json(project, remote["run_id"],
                                                                                     env=env())
    assert normalized(local_run) == normalized(remote_run)
    assert remote_run["executor"]["kind"] == "ray" and "executor" not in local_run
    from agentenv_local.hub import connect

    session = connect(project, defer_linger=False)
    try:
        journals = [[(e["step_id"], e["status"]) for e in session.store.runs.journal(r["run_id"])]
                    for r in (local_run, remote_run)]
        kinds = [[e["kind"] for e in session.store.events.query(run_id=r["run_id"])]
                 for r in (local_run, remote_run)]
    finally:
        session.close()
    assert journals[0] == journals[1]
    assert [k for k in kinds[0]] == [k for k in kinds[1]]


def test_a_run_whose_worker_is_killed_finishes_on_another(cluster, project, tmp_path):
    marker = tmp_path / "go"
    bundle = slow_bundle(tmp_path, marker)
    bg = Background(project, "run", str(bundle), *ray_flags(cluster), env=env())
    try:
        bg.wait_to_be_hub()

        def worker_pid():
            rows = runs_json(project, env=env())
            if not rows:
                return None
            run = show_json(project, rows[0]["run_id"], env=env())
            if (run.get("steps") or {}).get("wait", {}).get("status") == "running":
                return run["run_id"], run["executor"]["pid"]
            return None
        run_id, pid = wait_until(worker_pid, 180, what="the slow step to run on a worker")
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: (show_json(project, run_id, env=env()).get("executor") or {}).get("attempts"), 120,
                   what="the lost attempt to be recorded")
        marker.touch()
        bg.expect(0, timeout=300)
    finally:
        bg.stop()
    run = show_json(project, run_id, env=env())
    assert run["status"] == "passed" and run["generation"] >= 1
    assert run["executor"]["attempts"][0]["attempt"] == 0 and run["executor"]["pid"] != pid
    shown = cli(project, "runs", "show", run_id, env=env(), check=True).stdout
    assert f"where     Ray node {run['executor']['node_id'][:8]}" in shown and "attempt 2 (1 lost)" in shown


def test_cancelling_a_ray_run_tears_it_down(cluster, project, tmp_path):
    marker = tmp_path / "never"
    bundle = slow_bundle(tmp_path, marker)
    bg = Background(project, "run", str(bundle), *ray_flags(cluster), env=env())
    try:
        bg.wait_to_be_hub()
        run_id = wait_until(lambda: next((r["run_id"] for r in runs_json(project, env=env())
                                          if r["status"] == "running"), None), 180, what="the run to start")
        wait_until(lambda: (show_json(project, run_id, env=env()).get("steps") or {}).get("wait", {})
                   .get("status") == "running", 120, what="the slow step")
        out = cli(project, "runs", "cancel", run_id, env=env())
        assert out.returncode == 0, out.stdout + out.stderr
        bg.wait(180)
    finally:
        bg.stop()
    run = show_json(project, run_id, env=env())
    assert run["status"] == "cancelled" and run["torn_down"] is True
    import tempfile

    assert not list(Path(tempfile.gettempdir()).glob(f"agentenv-ray-{run_id}-*"))  # the worker's folder is gone


def test_an_unreachable_cluster_fails_with_what_to_do(project):
    out = cli(project, "run", "hello", "--executor", "ray", "--ray-address", "127.0.0.1:9", env=env(), timeout=60)
    assert out.returncode != 0
    assert "no Ray cluster answers at 127.0.0.1:9" in out.stderr and "ray start --head" in out.stderr


def test_rollouts_on_ray_yield_episodes_like_local_ones(cluster, project, monkeypatch):
    import agentenv_local

    for name in [n for n in os.environ if n.startswith("AGENTENV_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    episodes = list(agentenv_local.rollouts_sync(SUPPORT, k=2, concurrency=2, sandbox="process", executor="ray",
                                                 ray_address=cluster.address, project=project))
    assert len(episodes) == 2 and all(e["status"] == "passed" and e["score"] == 1.0 for e in episodes)
    assert all(e["messages"][0]["role"] == "user" for e in episodes)
    assert all(show_json(project, e["run_id"], env=env())["executor"]["kind"] == "ray" for e in episodes)
