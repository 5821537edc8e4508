"""The reference's echo-mcp and mail-mcp bundles, copied unchanged, run with no flags and pass: their env
(server.py with the stand-in for agentenv_protocol) deploys, and their verifier scripts (mcp 1.x) grade it."""

from __future__ import annotations

import json

import pytest
from kits.hub import cli
from kits.reference_bundles import copy_reference_bundle


@pytest.mark.parametrize("name", ["echo-mcp", "mail-mcp"])
def test_the_reference_bundle_runs_unchanged(tmp_path, name):
    copy_reference_bundle(name, tmp_path)
    done = cli(tmp_path, "run", f"./{name}", "--json", timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    [run] = json.loads(done.stdout)
    assert run["status"] == "passed", run
    [env] = run["context"]["deployed_envs"]
    assert env["env_id"].endswith(f"/{name}/{name.removesuffix('-mcp')}")
