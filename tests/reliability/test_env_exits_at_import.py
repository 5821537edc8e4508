"""An env server or agent that exits (or raises) while it is imported (issue 12): the run used to hang
when the module ran in the hub (sys.exit stopped the hub's event loop). Each case must fail its
deploy step at once, with the reason and a hint, and `agentenv run` must exit 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kits.hub import cli

EXITS = "import sys\nprint('about to fail', file=sys.stderr)\nsys.exit(3)\n"
RAISES = "raise RuntimeError('no database configured')\n"


def _bundle(root: Path, env_toml: str, server: str, steps: list[dict]) -> Path:
    folder = root / "bundle"
    (folder / "envs" / "boom").mkdir(parents=True)
    (folder / "tasks").mkdir()
    (folder / "envs" / "boom" / "env.toml").write_text(env_toml)
    (folder / "envs" / "boom" / "server.py").write_text(server)
    (folder / "tasks" / "t.json").write_text(json.dumps(steps))
    return folder


ENV_CASES = {
    "in-hub module, sys.exit": ('module = "server.py:Boom"\n', EXITS, "exited while it was imported (sys.exit(3))"),
    "in-hub module, raise": ('module = "server.py:Boom"\n', RAISES, "RuntimeError: no database configured"),
    "subprocess module, sys.exit": ('module = "server.py:Boom"\nrun_as = "subprocess"\n', EXITS,
                                    "exited with code 3 before it was ready"),
    "command, raise": ('command = ["python", "server.py"]\n', RAISES, "exited with code 1 before it was ready"),
}


@pytest.mark.parametrize("case", sorted(ENV_CASES))
def test_an_env_that_exits_at_import_fails_its_deploy_step(tmp_path, case):
    env_toml, server, expected = ENV_CASES[case]
    project = tmp_path / "proj"
    project.mkdir()
    bundle = _bundle(tmp_path, env_toml, server, [{"id": "deploy", "type": "deploy_env", "env_id": "boom"}])
    done = cli(project, "run", str(bundle), timeout=90)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "step 'deploy' failed" in done.stdout and expected in done.stdout, done.stdout
    if "in-hub" in case:
        assert "Traceback" not in done.stdout + done.stderr
    else:  # the child's own output (its traceback too) comes with the error
        assert ("about to fail" if server == EXITS else "RuntimeError: no database configured") in done.stdout
    if "in-hub" in case:
        assert "hint:" in done.stdout


@pytest.mark.parametrize("runtime", ["in_hub", "subprocess"])
def test_an_agent_that_exits_at_import_fails_its_deploy_step(tmp_path, runtime):
    project = tmp_path / "proj"
    project.mkdir()
    agent = tmp_path / "agent.py"
    agent.write_text(EXITS)
    bundle = _bundle(tmp_path, 'module = "server.py:Boom"\n', "", [
        {"id": "agent", "type": "deploy_agent", "a2a_agent_id": f"{agent}:Agent", "runtime": runtime,
         "ready_timeout_seconds": 30}])
    done = cli(project, "run", str(bundle), timeout=90)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "step 'agent' failed" in done.stdout, done.stdout
    assert ("exited while it was imported" if runtime == "in_hub" else "about to fail") in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
