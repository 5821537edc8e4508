"""`agentenv env deploy|instances|teardown` with a long-lived hub, and state that survives a hub restart."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time

import httpx2
from kits.env_deploy import EXAMPLES, call_tool, pid_alive, result_text
from kits.hub import Background, cli, hub_info


def _echo_env(project, run_as: str | None = None):
    folder = project / "echo-env"
    folder.mkdir(exist_ok=True)
    shutil.copy(EXAMPLES / "echo" / "server.py", folder / "server.py")
    toml = 'module = "server.py:Echo"\nenvironment_name = "echo"\n'
    if run_as:
        toml += f'run_as = "{run_as}"\n'
    (folder / "env.toml").write_text(toml)
    cli(project, "env", "put", "echo-env", "--id", "echo", check=True)


def test_deploy_instances_teardown_with_a_long_lived_hub(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    cli(project, "up", "--detach", check=True)
    try:
        _echo_env(project, "subprocess")
        deployed = cli(project, "env", "deploy", "--id", "echo", "--json", check=True, timeout=120)
        record = json.loads(deployed.stdout)  # stdout is the JSON only; the next step goes to stderr
        assert "agentenv env teardown" in deployed.stderr
        _names, result = call_tool(record["mcp_url"], "echo", {"text": "via the hub"})
        assert result_text(result) == "via the hub"
        listed = json.loads(cli(project, "env", "instances", "--json", check=True).stdout)
        assert [r["instance_id"] for r in listed] == [record["instance_id"]]
        table = cli(project, "env", "instances", check=True).stdout
        assert record["instance_id"] in table and record["mcp_url"] in table
        done = cli(project, "env", "teardown", record["instance_id"], check=True).stdout
        assert "terminated" in done
        assert not pid_alive(record["children"][0]["pid"])
        assert json.loads(cli(project, "env", "instances", "--json", check=True).stdout) == []
        every = json.loads(cli(project, "env", "instances", "--all", "--json", check=True).stdout)
        assert every[0]["status"] == "terminated"
        missing = cli(project, "env", "teardown", "envi-000000000000")
        assert missing.returncode == 1 and "no env instance" in missing.stderr
    finally:
        cli(project, "down")


def test_deploy_in_the_foreground_when_it_is_the_hub(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    _echo_env(project)
    bg = Background(project, "env", "deploy", "--id", "echo", default_sigint=True)
    try:
        deadline = time.monotonic() + 60
        while "MCP:" not in bg.stdout:
            assert bg.proc.poll() is None, bg.stdout + bg.stderr
            assert time.monotonic() < deadline, bg.stdout + bg.stderr
            time.sleep(0.1)
        mcp_url = next(line.split()[-1] for line in bg.stdout.splitlines() if "MCP:" in line)
        _names, result = call_tool(mcp_url, "echo", {"text": "foreground"})
        assert result_text(result) == "foreground"
        os.kill(bg.pid, signal.SIGINT)
        bg.wait(60)
    finally:
        bg.stop()
    assert "Tore down" in bg.stderr
    listed = json.loads(cli(project, "env", "instances", "--all", "--json", check=True).stdout)
    assert [r["status"] for r in listed] == ["terminated"]


def test_rbac_and_triggers_survive_a_hub_restart(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    cli(project, "up", "--detach", check=True)
    _echo_env(project, "subprocess")
    out = cli(project, "env", "deploy", "--id", "echo", "--json", check=True, timeout=120).stdout
    record = json.loads(out[: out.rindex("}") + 1])
    gw = record["gateway_url"]
    token = cli(project, "env", "instances", record["instance_id"], "--admin-token", check=True).stdout.strip()
    admin = {"Authorization": f"Bearer {token}"}  # the control plane's credential
    r = httpx2.post(gw + "/tools/disable", json={"role": "intern", "tools": ["fail"]}, timeout=10, headers=admin)
    assert r.status_code == 200, r.text
    spec = {"triggers": [{"id": "mirror", "when": {"type": "action", "tool": "whoami"},
                          "actions": [{"type": "tool", "tool": "echo", "args": {"text": "seen"}}]}]}
    r = httpx2.post(gw + "/triggers/register", json=spec, timeout=10, headers=admin)
    assert r.status_code == 200 and r.json()["ok"], r.text
    child_pid = record["children"][0]["pid"]
    hub_pid = hub_info(project)["pid"]
    os.kill(hub_pid, signal.SIGKILL)  # the hub dies without tearing anything down
    deadline = time.monotonic() + 10
    while pid_alive(hub_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        cli(project, "up", "--detach", check=True)  # the new hub: the instance is marked, its server killed
        assert not pid_alive(child_pid)
        listed = json.loads(cli(project, "env", "instances", "--all", "--json", check=True).stdout)
        assert [(r["instance_id"], r["status"], r.get("status_reason")) for r in listed] == [
            (record["instance_id"], "terminated", "hub stopped")]
        out = cli(project, "env", "deploy", "--resume", record["instance_id"], "--json", check=True,
                  timeout=120).stdout
        again = json.loads(out[: out.rindex("}") + 1])
        assert again["instance_id"] == record["instance_id"]
        state = httpx2.get(again["gateway_url"] + "/state", timeout=10).json()
        assert "fail" in state["roles"]["intern"]["disabled"], state["roles"]
        triggers = httpx2.get(again["gateway_url"] + "/triggers/state", timeout=10).json()
        assert "mirror" in json.dumps(triggers), triggers
        cli(project, "env", "teardown", record["instance_id"], check=True)
    finally:
        cli(project, "down")


def test_bind_role_makes_a_role_need_its_bearer_token(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    cli(project, "up", "--detach", check=True)
    try:
        _echo_env(project)
        out = cli(project, "env", "deploy", "--id", "echo", "--json", check=True, timeout=120).stdout
        record = json.loads(out[: out.rindex("}") + 1])
        bound = cli(project, "env", "bind-role", record["instance_id"], "admin", check=True)
        token = bound.stdout.strip()
        assert len(token) >= 24 and "Bearer" in bound.stderr
        step = record["gateway_url"] + "/step"
        body = {"action": "call_tool", "tool_name": "echo", "arguments": {"text": "hi"}}
        with httpx2.Client(timeout=30) as http:
            claimed = http.post(step, json=body, headers={"AgentEnv-Role": "admin"})
            assert claimed.status_code == 401 and "requires its bearer token" in claimed.text
            with_token = http.post(step, json=body, headers={"Authorization": f"Bearer {token}"})
            assert with_token.status_code == 200, with_token.text
            wrong = http.post(step, json=body, headers={"Authorization": "Bearer not-the-token"})
            assert wrong.status_code == 401
            other = http.post(step, json=body, headers={"AgentEnv-Role": "bob"})  # unbound roles unchanged
            assert other.status_code == 200
        state_dir = project / ".agentenv"
        stored = b"".join(p.read_bytes() for p in state_dir.rglob("*") if p.is_file())
        assert token.encode() not in stored  # only a digest is kept
        assert cli(project, "env", "bind-role", "envi-000000000000", "admin").returncode == 1
    finally:
        cli(project, "down")
