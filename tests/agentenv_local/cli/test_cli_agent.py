"""`agentenv agent list|put|get|validate|deploy|instances|teardown`, and an agent written with the reference's
SDK validated and prompted in a run, unchanged."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from kits.hub import cli, runs_json, show_json, write_bundle

HERE = Path(__file__).resolve().parent


PLAN = {"plan": [{"reply": "bot says {input}"}]}


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    yield root
    cli(root, "down")


def test_list_put_get_and_validate(project):
    listed = json.loads(cli(project, "agent", "list", "--json", check=True).stdout)
    assert [r["id"] for r in listed][:3] == ["scripted", "tool-loop", "human"]
    out = cli(project, "agent", "put", "--id", "bot", "--spec", "scripted", "--config", json.dumps(PLAN), check=True)
    assert "agent bot: v1 (stored)" in out.stdout
    again = cli(project, "agent", "put", "--id", "bot", "--spec", "scripted", "--config", json.dumps(PLAN), check=True)
    assert "v1 (unchanged)" in again.stdout
    got = json.loads(cli(project, "agent", "get", "bot", check=True).stdout)
    assert got["spec"] == "scripted" and got["config"] == PLAN
    report = json.loads(cli(project, "agent", "validate", "bot", "--json", check=True).stdout)
    assert report["failed"] == 0 and report["passed"] == 8
    bad = cli(project, "agent", "put", "--id", "x", "--spec", "scripted", "--url", "http://h")
    assert bad.returncode != 0 and "exactly one of" in bad.stdout + bad.stderr
    unknown = cli(project, "agent", "get", "nope")
    assert unknown.returncode == 1 and "agent 'nope' not found" in unknown.stdout + unknown.stderr


def test_validate_reports_a_broken_agent(project):
    # The scripted agent without a plan fails its task: the core-protocol check still passes (the task
    # ends, failed), so break the protocol instead: nothing listens at this URL.
    out = cli(project, "agent", "validate", "http://127.0.0.1:9")
    assert out.returncode == 1 and "FAIL  card" in out.stdout


def test_deploy_instances_teardown_behind_a_long_lived_hub(project):
    cli(project, "up", "--detach", check=True)
    cli(project, "agent", "put", "--id", "bot", "--spec", "scripted", "--config", json.dumps(PLAN), check=True)
    record = json.loads(cli(project, "agent", "deploy", "bot", "--json", check=True).stdout)
    assert record["status"] == "running" and record["runtime"] == "in_hub"
    rows = json.loads(cli(project, "agent", "instances", "--json", check=True).stdout)
    assert [r["instance_id"] for r in rows] == [record["instance_id"]]
    report = json.loads(cli(project, "agent", "validate", record["a2a_url"], "--json", check=True).stdout)
    assert report["failed"] == 0
    cli(project, "agent", "teardown", record["instance_id"], check=True)
    assert json.loads(cli(project, "agent", "instances", "--json", check=True).stdout) == []
    gone = cli(project, "agent", "validate", record["a2a_url"])
    assert gone.returncode == 1


def _reference_agent_available() -> bool:
    from kits.agents import REF_PYTHON

    if not REF_PYTHON.exists():
        return False
    return subprocess.run([str(REF_PYTHON), "-c", "import a2a, agentenv_protocol.a2a_agent"], check=False,
                          capture_output=True, timeout=60).returncode == 0


@pytest.mark.skipif(not _reference_agent_available(), reason=".venv-ref lacks agentenv-framework-protocol[agent]")
def test_a_reference_sdk_agent_is_validated_and_prompted_in_a_run(project):
    from kits.agents import REF_PYTHON, subprocess_server, wait_healthy

    from agentenv_local.env.serve import bind_socket

    sock = bind_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    sock.close()
    with subprocess_server([str(HERE.parent / "agents" / "reference_agent.py"), str(port)],
                           python=str(REF_PYTHON)) as (base, _proc):
        wait_healthy(base)
        report = json.loads(cli(project, "agent", "validate", base, "--json").stdout)
        statuses = {c["check"]: c["status"] for c in report["checks"]}
        assert statuses["core protocol"] == "pass"
        # its card's JSON-RPC URL is relative: the unknown-method check must still reach it
        assert statuses["unknown method refused"] == "pass" and report["failed"] == 0, report
        write_bundle(project, "ref", {"t": [
            {"id": "agent", "type": "deploy_agent", "agent_name": "ref", "a2a_url": base},
            {"id": "ask", "type": "prompt_agent", "agent_name": "ref", "prompt": "hello"},
            {"id": "check", "type": "agent_prompt_response_verifier", "prompt_id": "ask",
             "criteria": [{"type": "response_contains", "needles": ["ref says hello"]}]},
        ]})
        out = cli(project, "run", "./ref", check=True)
    assert "passed (check: 1)" in out.stdout
    response = show_json(project, runs_json(project)[0]["run_id"])["context"]["prompt_responses"][0]
    assert response["response"] == "ref says hello" and response["structured_output"] == {"n": 1}
