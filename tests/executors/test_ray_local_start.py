"""`--executor ray` with no cluster running starts a local one for the hub, says so in one line, and the run passes
on it; the hub stops it when it stops."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from kits.hub import clean_env, cli, show_json
from kits.ray_cluster import RAY, require_ray


def test_no_cluster_running_starts_a_local_one(tmp_path):
    require_ray()
    status = subprocess.run([str(RAY), "status"], capture_output=True, text=True, timeout=120,
                            env={**clean_env(), "RAY_USAGE_STATS_ENABLED": "0"})
    assert status.returncode != 0, "a Ray cluster runs on this machine; this test needs none"
    project = tmp_path / "proj"
    (project / ".agentenv").mkdir(parents=True)
    # A local cluster that `ray.init()` starts turns Ray's token authentication on and saves a new token as
    # ~/.ray/auth_token, which every later `ray start` of this user then reads (ciU: the other Ray tests' clusters,
    # started after this test, refused their second node). The hub runs here with a HOME of its own.
    home = tmp_path / "home"
    home.mkdir()
    env = clean_env({"RAY_USAGE_STATS_ENABLED": "0", "HOME": str(home)})
    env.pop("RAY_ADDRESS", None)
    out = cli(project, "run", "hello", "--executor", "ray", "--json", env=env, timeout=300, fresh=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "no Ray cluster runs here: starting a local one" in out.stderr
    run = json.loads(out.stdout)[0]
    assert run["status"] == "passed"
    assert show_json(project, run["run_id"], env=env)["executor"]["kind"] == "ray"
    after = subprocess.run([str(RAY), "status"], capture_output=True, text=True, timeout=120,
                           env={**env, "RAY_USAGE_STATS_ENABLED": "0"})
    assert after.returncode != 0, "the hub's local cluster outlived it:\n" + after.stdout[-2000:]
    assert not (Path.home() / ".ray" / "auth_token").exists() or (home / ".ray" / "auth_token").exists()
