"""A module env's env_vars never touch the hub's own environment: such an env runs as a subprocess that gets
them, and asking for it in the hub anyway is refused with the fix."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kits.env_deploy import call_tool, on_hub, pid_alive, put_env, result_text

PROBE = '''
import os

from agentenv_local.env import Env, tool

SEEN_AT_IMPORT = os.environ.get("PROBE_VAR", "")


class Probe(Env):
    def __init__(self) -> None:
        self.built_with = os.environ.get("PROBE_VAR", "")

    @tool()
    def seen(self) -> str:
        """What PROBE_VAR was when the env was imported and built."""
        return f"{SEEN_AT_IMPORT}|{self.built_with}"
'''


def _probe_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "probe"
    folder.mkdir()
    (folder / "server.py").write_text(PROBE)
    return folder


def test_module_env_with_env_vars_runs_as_a_subprocess_that_gets_them(session, tmp_path):
    put_env(session.store, "probe", _probe_folder(tmp_path), module="server.py:Probe",
            env_vars={"PROBE_VAR": "from-env-toml"})
    assert "PROBE_VAR" not in os.environ
    record = on_hub(session, session.hub.envs.deploy("probe"))
    try:
        [child] = record["children"]
        assert child["kind"] == "subprocess" and pid_alive(child["pid"])
        _names, result = call_tool(record["mcp_url"], "seen")
        assert result_text(result) == "from-env-toml|from-env-toml"
        assert "PROBE_VAR" not in os.environ  # the hub's environment is never changed
    finally:
        on_hub(session, session.hub.envs.teardown(record["instance_id"]))


def test_module_env_without_env_vars_still_loads_in_the_hub(session, tmp_path):
    put_env(session.store, "probe", _probe_folder(tmp_path), module="server.py:Probe")
    record = on_hub(session, session.hub.envs.deploy("probe"))
    try:
        assert record["children"] == [{"name": "probe", "kind": "in_process"}]
    finally:
        on_hub(session, session.hub.envs.teardown(record["instance_id"]))


def test_in_process_env_with_env_vars_is_refused_with_the_fix(session, tmp_path):
    from agentenv_local.hosting.envs.instance import DeployError

    put_env(session.store, "probe", _probe_folder(tmp_path), module="server.py:Probe", run_as="in_process",
            env_vars={"PROBE_VAR": "x"})
    with pytest.raises(DeployError) as info:
        on_hub(session, session.hub.envs.deploy("probe"))
    assert "cannot have env_vars" in info.value.message and 'run_as = "subprocess"' in (info.value.hint or "")
    assert "PROBE_VAR" not in os.environ
    assert session.hub.envs.instances("running") == []
