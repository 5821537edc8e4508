"""`agentenv agent instances INSTANCE`: the reference's lookup by id, behind a real long-lived hub."""

from __future__ import annotations

import json

import pytest
from kits.hub import cli

PLAN = {"plan": [{"reply": "bot says {input}"}]}


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "proj"
    (root / ".agentenv").mkdir(parents=True)  # this project's own state, whatever lies above tmp_path
    yield root
    cli(root, "down")


def test_agent_instances_looks_one_up_by_id_running_or_stopped(project):
    cli(project, "up", "--detach", check=True)
    cli(project, "agent", "put", "--id", "bot", "--spec", "scripted", "--config", json.dumps(PLAN), check=True)
    record = json.loads(cli(project, "agent", "deploy", "bot", "--json", check=True).stdout)
    found = json.loads(cli(project, "agent", "instances", record["instance_id"], check=True).stdout)
    assert found["instance_id"] == record["instance_id"] and found["status"] == "running"
    assert found["a2a_url"] == record["a2a_url"]
    cli(project, "agent", "teardown", record["instance_id"], check=True)
    stopped = json.loads(cli(project, "agent", "instances", record["instance_id"], check=True).stdout)
    assert stopped["instance_id"] == record["instance_id"] and stopped["status"] != "running"
    missing = cli(project, "agent", "instances", "agi-nope")
    assert missing.returncode == 1 and "no agent instance 'agi-nope'" in missing.stdout + missing.stderr
    assert "agentenv agent instances --all" in missing.stdout + missing.stderr
