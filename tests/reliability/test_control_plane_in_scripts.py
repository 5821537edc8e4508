"""Task scripts and the control plane (issue 12): a `run_code` script on the host that names an env gets the
instance's admin token, as `env_outcome_verifier` scripts do, so a task's own script can read and write the
env's data plane (without it, the data plane answers 401). A step with an env_id never runs in a sandbox."""

from __future__ import annotations

import json
from pathlib import Path

from kits.hub import cli, write_bundle

ROOT = Path(__file__).resolve().parents[2]

PEEK = '''
import json, urllib.request, urllib.error

def run(input):
    env = input["env"]
    token = env.get("admin_token")
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "data/get", "params": {}}).encode()
    headers = {"content-type": "application/json"}
    if token:
        headers["Authorization"] = "Bearer " + token
    request = urllib.request.Request(env["url"].rstrip("/") + "/agentenv", data=body, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return {"has_token": bool(token), "status": answer.status, "ok": "result" in json.load(answer)}
    except urllib.error.HTTPError as e:
        return {"has_token": bool(token), "status": e.code, "ok": False}
'''


def test_run_code_that_names_an_env_gets_its_admin_token(tmp_path):
    project = tmp_path / "proj"
    (project / ".agentenv").mkdir(parents=True)
    bundle = write_bundle(project, "peek", {"peek": [
        {"id": "env", "type": "deploy_env", "env_id": "notes"},
        {"id": "host", "type": "run_code", "env_id": "notes", "script_artifact_id": "peek", "depends_on": ["env"]},
    ]}, artifacts={"peek": {"peek.py": PEEK}})
    (bundle / "envs" / "notes").mkdir(parents=True)
    (bundle / "envs" / "notes" / "env.toml").write_text('module = "server.py:Notes"\n')
    (bundle / "envs" / "notes" / "server.py").write_bytes((ROOT / "examples/envs/notes/server.py").read_bytes())

    done = cli(project, "run", "./peek", "--sandbox", "process", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads(done.stdout)[0]["context"]["metadata"]["script_results"]
    assert results["host"] == {"has_token": True, "status": 200, "ok": True}
