"""A task run with deploy_env: a bundle's env is deployed for the run and torn down at its end."""

from __future__ import annotations

import shutil

from kits.env_deploy import EXAMPLES, hub_session
from kits.hub import cli, runs_json, show_json, write_bundle


def test_bundle_task_deploys_its_env_and_tears_it_down(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    bundle = write_bundle(project, "b", {"uses-echo": [
        {"id": "env", "type": "deploy_env", "env_id": "echo", "gateway_mode": "consistent"}]})
    env_dir = bundle / "envs" / "echo"
    env_dir.mkdir(parents=True)
    shutil.copy(EXAMPLES / "echo" / "server.py", env_dir / "server.py")
    (env_dir / "env.toml").write_text('module = "server.py:Echo"\n')

    proc = cli(project, "run", "./b", "--task", "uses-echo", timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [run] = runs_json(project)
    assert run["status"] == "passed"
    shown = show_json(project, run["run_id"])
    deployed = shown["context"]["deployed_envs"]

    with hub_session(project) as s:
        from agentenv_local.query import Query

        records = [r["body"] for r in s.store.records.query(Query("env_instances"))]
        assert len(records) == 1
        [record] = records
        assert record["status"] == "terminated" and record["run_id"] == run["run_id"]
        assert record["gateway_mode"] == "consistent" and record["mcp_server_name"] == "echo"
        assert record["env_id"].endswith("echo")
        kinds = [e["kind"] for e in s.store.events.query(run_id=run["run_id"])]
        assert "env.deployed" in kinds and "env.terminated" in kinds
        assert not (s.paths.state_dir / "envs" / record["instance_id"]).exists()
    assert deployed[0]["instance_id"] == record["instance_id"] and deployed[0]["torn_down"] is True
    assert deployed[0]["step_id"] == "env"
