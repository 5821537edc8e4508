"""`agentenv env snapshot --instance-id` behind a real long-lived hub: a deployed instance's state (its server's
data/get through the gateway, with the instance's admin token) stored as an environment_universe; and the
errors for an unknown or stopped instance, which write nothing."""

from __future__ import annotations

import json
import shutil

import httpx2
from kits.env_deploy import EXAMPLES
from kits.hub import cli

NOTES = {"notes": [{"title": "groceries", "body": "milk, eggs", "tags": ["home"]}]}


def test_snapshot_a_deployed_instance_and_get_its_files(tmp_path):
    project = tmp_path / "proj"
    (project / ".agentenv").mkdir(parents=True)  # this project's own state, whatever lies above tmp_path
    cli(project, "up", "--detach", check=True)
    try:
        folder = project / "notes-env"
        folder.mkdir()
        shutil.copy(EXAMPLES / "notes" / "server.py", folder / "server.py")
        (folder / "env.toml").write_text('module = "server.py:Notes"\nenvironment_name = "notes"\n')
        cli(project, "env", "put", "notes-env", "--id", "notes", check=True)
        record = json.loads(cli(project, "env", "deploy", "--id", "notes", "--json", check=True, timeout=120).stdout)
        iid = record["instance_id"]
        token = cli(project, "env", "instances", iid, "--admin-token", check=True).stdout.strip()
        added = httpx2.post(record["gateway_url"] + "/svc/mcp-notes/agentenv", timeout=30,
                            headers={"Authorization": f"Bearer {token}"},
                            json={"jsonrpc": "2.0", "id": 1, "method": "data/add",
                                  "params": {"parts": [{"kind": "data", "data": NOTES}]}})
        assert "result" in added.json(), added.text

        out = cli(project, "env", "snapshot", "--instance-id", iid, check=True).stdout
        assert f"stored as environment_universe {iid}__env-snapshot v1" in out
        doc = json.loads(cli(project, "env", "snapshot", "--instance-id", iid, "--id", "snap", "--json",
                             check=True).stdout)
        assert doc["id"] == "snap" and doc["body"]["type"] == "environment_universe"
        assert doc["body"]["env_snapshot"]["instance_id"] == iid
        cli(project, "artifact", "environment-universe", "get", "--id", "snap", "--output-dir", "out", check=True)
        saved = json.loads((project / "out" / "notes" / "notes.json").read_text())
        assert saved["service"] == "notes"
        assert [n["title"] for n in saved["parts"][0]["data"]["notes"]] == ["groceries"]

        before = json.loads(cli(project, "artifact", "list", "--json", check=True).stdout)
        missing = cli(project, "env", "snapshot", "--instance-id", "envi-nope")
        assert missing.returncode == 1 and "no env instance 'envi-nope'" in missing.stdout + missing.stderr
        cli(project, "env", "teardown", iid, check=True)
        stopped = cli(project, "env", "snapshot", "--instance-id", iid)
        assert stopped.returncode == 1 and "not running" in stopped.stdout + stopped.stderr
        assert json.loads(cli(project, "artifact", "list", "--json", check=True).stdout) == before
    finally:
        cli(project, "down")
