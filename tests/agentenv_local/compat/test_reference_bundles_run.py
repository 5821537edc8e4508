"""The reference's echo-mcp and mail-mcp bundles, copied unchanged, pass under `agentenv run` without Podman:
their env (server.py with the stand-in for agentenv_protocol) loads into the hub, and their verifier
scripts (mcp 1.x) grade it. (With Podman, and with no flags for echo-mcp, whose deploy_env asks for the
reference's "local": test_reference_env_podman.py.)"""

from __future__ import annotations

import json

import pytest
from kits.hub import cli
from kits.reference_bundles import copy_reference_bundle


@pytest.mark.parametrize(("name", "flags"), [("mail-mcp", ()), ("echo-mcp", ("--sandbox", "process"))])
def test_the_reference_bundle_runs_unchanged(tmp_path, name, flags):
    copy_reference_bundle(name, tmp_path)
    done = cli(tmp_path, "run", f"./{name}", "--json", *flags, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    [run] = json.loads(done.stdout)
    assert run["status"] == "passed", run
    [env] = run["context"]["deployed_envs"]
    assert env["env_id"].endswith(f"/{name}/{name.removesuffix('-mcp')}")
    assert [child["kind"] for child in env["children"]] == ["in_process"]  # issue 16: in the hub where it can be
    # The verifier's mcp 1.x client gets SSE answers; the watcher task sse_starlette starts for them is cancelled
    # when the hub stops, not destroyed pending with an error on stderr.
    assert "Task was destroyed" not in done.stderr, done.stderr
