"""Secrets and the host processes a run starts (issue 12): `run_code` on the host inherited agentenv's whole
environment, so the env var behind a `secret:` ref reached the script and was stored unmasked in
script_results and events. Host processes (run_code, subprocess envs, subprocess agents) get a minimal
environment plus what the task passes explicitly, and whatever a step still finds of a secret (a
script can read its parent's /proc/PID/environ) is masked in results, events, the journal and errors."""

from __future__ import annotations

import json
import secrets

from kits.hub import clean_env, cli, show_json, store_text, write_bundle

SNOOP = '''
import os, sys

def found():
    """The planted key as the hub has it: from our environment if we got it, else from our parent's, or its
    parent's (a script forked by the warm script worker: the worker's parent is the hub)."""
    if os.environ.get("PLANTED_KEY"):
        return os.environ["PLANTED_KEY"]
    pid = os.getppid()
    for _ in range(2):
        with open(f"/proc/{pid}/environ", "rb") as f:
            for item in f.read().split(b"\\0"):
                if item.startswith(b"PLANTED_KEY="):
                    return item.split(b"=", 1)[1].decode()
        with open(f"/proc/{pid}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
    return None

def run(input):
    value = found()
    print("the key is", value)
    if input["args"].get("fail"):
        raise RuntimeError(f"refusing to go on with {value}")
    return {"own_env": os.environ.get("PLANTED_KEY"), "found": value, "home_set": bool(os.environ.get("HOME"))}
'''

ENV_SERVER = '''
import os
from pathlib import Path

from agentenv_local.env import Env, environment_card, tool

Path(os.environ["PROBE"]).write_text("present" if os.environ.get("PLANTED_KEY") else "absent")


@environment_card(name="probe")
class Probe(Env):
    @tool()
    def ping(self) -> str:
        """Answer pong."""
        return "pong"
'''

AGENT = '''
import os

from agentenv_local.agents import Agent, TaskResult


class Probe(Agent):
    name = "probe"

    async def run(self, request):
        return TaskResult.text("present" if os.environ.get("PLANTED_KEY") else "absent")
'''


def test_host_processes_get_no_secret_and_what_leaks_is_masked(tmp_path):
    project = tmp_path / "proj"
    state = project / ".agentenv"
    state.mkdir(parents=True)
    planted = f"sk-planted-{secrets.token_hex(12)}"
    (state / "config.toml").write_text('[model]\napi_key = "secret:PLANTED_KEY"\n')
    env = clean_env({"PLANTED_KEY": planted})
    probe = tmp_path / "env-probe"
    agent_file = tmp_path / "probe_agent.py"
    agent_file.write_text(AGENT)
    bundle = write_bundle(project, "sec", {"sec": [
        {"id": "snoop", "type": "run_code", "script_artifact_id": "snoop", "depends_on": []},
        {"id": "snoop_fails", "type": "run_code", "script_artifact_id": "snoop", "args": {"fail": True},
         "fail_task_on_error": False, "depends_on": ["snoop"]},
        {"id": "env", "type": "deploy_env", "env_id": "probe", "depends_on": []},
        {"id": "agent", "type": "deploy_agent", "a2a_agent_id": f"{agent_file}:Probe", "agent_name": "probe",
         "runtime": "subprocess", "depends_on": []},
        {"id": "ask", "type": "prompt_agent", "agent_name": "probe", "prompt": "do you see it?",
         "depends_on": ["agent"]},
    ]}, artifacts={"snoop": {"snoop.py": SNOOP}})
    (bundle / "envs" / "probe").mkdir(parents=True)
    (bundle / "envs" / "probe" / "env.toml").write_text(
        f'module = "server.py:Probe"\nrun_as = "subprocess"\n[env_vars]\nPROBE = "{probe}"\n')
    (bundle / "envs" / "probe" / "server.py").write_text(ENV_SERVER)

    # a fresh process: the snoop reads the hub's /proc/PID/environ, which holds the environment a process was
    # started with (a command forked from the tests' warm process gets its environment after its start)
    done = cli(project, "-vv", "run", "./sec", "--json", env=env, fresh=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert planted not in done.stdout + done.stderr
    run = json.loads(done.stdout)[0]
    run_id = run["run_id"]

    # Not passed on: the script, the env's server and the agent saw no PLANTED_KEY.
    results = run["context"]["metadata"]["script_results"]["snoop"]
    assert results["own_env"] is None and results["home_set"] is True
    assert probe.read_text() == "absent"
    assert run["context"]["prompt_responses"][0]["response"] == "absent"

    # What the script dug up anyway is masked: its result, its printout (an event), its error.
    assert results["found"] == "***"
    failed = run["context"]["metadata"]["failed_steps"]
    assert failed[0]["step_id"] == "snoop_fails" and "refusing to go on with ***" in failed[0]["error"]
    shown = show_json(project, run_id, env=env)
    assert planted not in json.dumps(shown)
    assert "refusing to go on with ***" in shown["steps"]["snoop_fails"]["error"]

    # Nowhere in the store (events, journal, run record) or the project's files.
    assert planted not in store_text(state / "store.duckdb")
    for path in state.rglob("*"):
        if path.is_file() and path.suffix != ".duckdb":
            assert planted.encode() not in path.read_bytes(), path
