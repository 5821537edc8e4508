"""tests/kits/warm_cli.py forks the kits' `agentenv` commands from a warm process: each must be what a fresh
`agentenv` process is to the test (the same output, exit status, working folder and environment), and a command
past its timeout is killed as subprocess.run kills one."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from kits.hub import clean_env
from kits.servers import agentenv_exe
from kits.warm_cli import run_agentenv


def _cold(args: list[str], cwd, env) -> subprocess.CompletedProcess:
    return subprocess.run([agentenv_exe(), *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("args", [["--version"], ["nosuchcommand"], ["task", "list"], ["task", "get", "@x/y/z"],
                                  ["config", "show", "--json"], ["run", "hello", "--json"]])
def test_a_warm_command_answers_as_a_fresh_process_does(tmp_path, args):
    (tmp_path / ".agentenv").mkdir()
    # an environment of the test's own: the project's config home, a setting only the environment gives
    env = clean_env({"HOME": str(tmp_path / "home"), "AGENTENV_RUNNER_CONCURRENCY": "3", "TZ": "Asia/Tokyo"})
    warm = run_agentenv(args, cwd=tmp_path, env=env, timeout=120)
    cold = _cold(args, tmp_path, env)
    assert warm.returncode == cold.returncode, (warm, cold)
    if args[0] == "run":  # run ids and times differ between two runs; the shape and the verdict do not
        assert "passed" in warm.stdout and "passed" in cold.stdout, (warm, cold)
    else:
        assert (warm.stdout, warm.stderr) == (cold.stdout, cold.stderr)
    if args[:2] == ["config", "show"]:  # the environment's setting, seen by the command
        assert '"runner.concurrency": {\n      "value": 3,\n      "source": "env' in warm.stdout, warm.stdout


def test_a_command_past_its_timeout_is_killed(tmp_path):
    (tmp_path / ".agentenv").mkdir()
    with pytest.raises(subprocess.TimeoutExpired):
        run_agentenv(["up"], cwd=tmp_path, env=clean_env(), timeout=2)  # a hub in the foreground: never ends
    hub = (tmp_path / ".agentenv" / "hub.json").read_text()
    pid = int(hub.split('"pid":')[1].split(",")[0])
    assert not Path(f"/proc/{pid}").exists() or "State:\tZ" in Path(f"/proc/{pid}/status").read_text()
