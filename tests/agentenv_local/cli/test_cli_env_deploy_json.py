"""`agentenv env deploy --json` with no long-lived hub (the command is the hub, in the foreground): stdout holds
only the instance record's JSON, from its deploy to its teardown on SIGTERM; every other line goes to stderr."""

from __future__ import annotations

import json
import shutil
import signal

from kits.env_deploy import EXAMPLES
from kits.hub import Background, cli, hub_info, wait_until


def test_foreground_deploy_json_keeps_stdout_pure_json(tmp_path):
    project = tmp_path / "proj"
    (project / ".agentenv").mkdir(parents=True)  # this project's own state, whatever lies above tmp_path
    (project / "echo-env").mkdir(parents=True)
    shutil.copy(EXAMPLES / "echo" / "server.py", project / "echo-env" / "server.py")
    (project / "echo-env" / "env.toml").write_text('module = "server.py:Echo"\nenvironment_name = "echo"\n')
    cli(project, "env", "put", "echo-env", "--id", "echo", check=True)
    wait_until(lambda: hub_info(project) is None, timeout=60, what="the put's lingering hub to stop")
    deploy = Background(project, "env", "deploy", "--id", "echo", "--ttl-seconds", "600", "--json")
    try:
        wait_until(lambda: "Serving until Ctrl-C." in deploy.stderr or not deploy.alive(), timeout=100,
                   what="the foreground deploy")
        assert deploy.alive(), deploy.stdout + deploy.stderr
        deploy.proc.send_signal(signal.SIGTERM)
        assert deploy.wait(60) == 0
    finally:
        if deploy.alive():
            deploy.kill9()
    record = json.loads(deploy.stdout)  # the whole of stdout, nothing before or after
    assert record["env_id"] == "echo" and record["ttl_seconds"] == 600
    assert f"Tore down {record['instance_id']}." in deploy.stderr
