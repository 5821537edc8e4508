"""Deploying a bundle's agents through real `agentenv` subprocesses: `run --agent NAME` swaps the solver (the
deploy_agent a prompt_agent prompts) for one run, the user simulator left alone, recorded in the run's overrides;
a `command` agent runs in its folder; `env:`/`secret:` refs of `[config]` are stored as written and read when the
agent deploys."""

from __future__ import annotations

import json
import sys

from kits.hub import clean_env, cli
from test_bundle_agents import _agent, _bundle, _runs, _show, _task


def test_run_agent_swaps_the_solver_for_one_run_and_leaves_the_user_simulator(tmp_path):
    root = _bundle(tmp_path, {"chat": _task("orig", "HELPED", user=True)})
    _agent(root, "orig", 'spec = "scripted"\n[config.plan]\nturns = [[{reply = "ORIGINAL"}]]\n')
    project = tmp_path / "proj"
    plain = cli(project, "run", str(root), "--sandbox", "process")
    assert plain.returncode == 1  # the task's own solver never says HELPED
    for name in ("helper", "aide"):
        out = cli(project, "run", str(root), "--sandbox", "process", "--agent", name)
        assert out.returncode == 0, out.stdout + out.stderr
    [latest, by_folder, first] = _runs(project)
    for run in (latest, by_folder):
        shown = _show(project, run["run_id"])
        agents = {a["agent_name"]: a["a2a_agent_id"] for a in shown["context"]["deployed_agents"]}
        assert agents["solver"].endswith("/b/helper") and agents["user"] == "scripted"
        assert shown["context"]["metadata"]["user_overrides"]["agent"] == agents["solver"]  # kept for a resume
    shown = _show(project, first["run_id"])
    assert {a["agent_name"]: a["a2a_agent_id"] for a in shown["context"]["deployed_agents"]}["solver"].endswith(
        "/b/orig")


def test_a_command_agent_runs_in_its_folder_and_serves_the_task(tmp_path):
    root = _bundle(tmp_path, {"t": _task("by-command", "COMMANDED")})
    argv = json.dumps([sys.executable, "-m", "agentenv_local.agents", "scripted", "--port", "0"])
    _agent(root, "by-command", f'command = {argv}\n[config.plan]\nturns = [[{{reply = "COMMANDED"}}]]\n')
    project = tmp_path / "proj"
    out = cli(project, "run", str(root), "--sandbox", "process")
    assert out.returncode == 0, out.stdout + out.stderr
    [run] = _runs(project)
    [solver] = _show(project, run["run_id"])["context"]["deployed_agents"]
    assert solver["runtime"] == "command" and solver["pid"] and solver["a2a_agent_id"].endswith("/by-command")


def test_config_refs_are_stored_as_written_and_read_when_the_agent_deploys(tmp_path):
    from agentenv_local.agents.registry import resolved_config
    from agentenv_local.config import load_config
    from agentenv_local.errors import ConfigError

    root = _bundle(tmp_path, {"t": _task("helper", "HELPED")})
    (root / "agents" / "helper" / "agent.toml").write_text(
        'spec = "scripted"\n[config]\ngreeting = "env:HELPER_GREETING"\ntoken = "secret:HELPER_TOKEN?none"\n'
        '[config.plan]\nturns = [[{reply = "HELPED"}]]\n')
    project = tmp_path / "proj"
    unset = cli(project, "run", str(root), "--sandbox", "process")
    assert unset.returncode == 1 and "the environment variable HELPER_GREETING is not set" in unset.stdout
    cli(project, "run", str(root), "--sandbox", "process", env=clean_env({"HELPER_GREETING": "hello"}), check=True)
    listed = [r for r in json.loads(cli(project, "agent", "list", "--json", check=True).stdout) if r["version"]]
    stored = json.loads(cli(project, "agent", "get", listed[0]["id"], check=True).stdout)
    assert stored["config"]["greeting"] == "env:HELPER_GREETING"  # the reference, never a value
    config = load_config(project, environ={"HELPER_GREETING": "hello"}, secret_store={})
    assert resolved_config(config, "a", stored["config"])["greeting"] == "hello"
    assert resolved_config(config, "a", stored["config"])["token"] == "none"
    try:
        resolved_config(load_config(project, environ={}, secret_store={}), "a", stored["config"])
    except ConfigError as exc:
        assert "HELPER_GREETING is not set" in exc.message
    else:
        raise AssertionError("an unset env: reference must fail the deploy")


def test_task_run_agent_swaps_the_solver_of_a_stored_task(tmp_path):
    root = _bundle(tmp_path, {"chat": _task("orig", "HELPED", user=True)})
    _agent(root, "orig", 'spec = "scripted"\n[config.plan]\nturns = [[{reply = "ORIGINAL"}]]\n')
    project = tmp_path / "proj"
    assert cli(project, "run", str(root), "--sandbox", "process").returncode == 1  # stores the task and agents
    [first] = _runs(project)
    helper = next(a["id"] for a in json.loads(cli(project, "agent", "list", "--json", check=True).stdout)
                  if str(a.get("id", "")).endswith("/b/helper"))
    out = cli(project, "task", "run", "--id", first["task_id"], "--sandbox", "process", "--agent", helper)
    assert out.returncode == 0, out.stdout + out.stderr
    latest = _runs(project)[0]
    deployed = _show(project, latest["run_id"])["context"]["deployed_agents"]
    agents = {a["agent_name"]: a["a2a_agent_id"] for a in deployed}
    assert agents["solver"] == helper and agents["user"] == "scripted"
