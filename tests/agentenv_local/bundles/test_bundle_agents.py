"""A bundle's `agents/<name>/` folders and `aliases.toml [agents]`, through real `agentenv` subprocesses in a fresh
project: stored as agent records `<id root>/<name>`, named by a task by folder name, alias or id; `agent list`
shows them with their aliases; an unknown name fails listing the names there are; a bad folder fails the load and
stores nothing; the reference's `agents` bundle loads with its six coding-CLI agents on our built-in harnesses.
Deploying them (--agent, command agents, config refs): test_bundle_agents_deploy.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kits.hub import cli
from kits.reference_bundles import copy_reference_bundle


def _plan(*replies: str) -> dict:
    return {"plan": {"turns": [[{"reply": r}] for r in replies]}}


def _task(solver_agent: str | None, needle: str, *, user: bool = False) -> list[dict]:
    solver: dict[str, Any] = {"id": "solver", "type": "deploy_agent", "agent_name": "solver",
                              "config": _plan("from the task")}
    if solver_agent:
        solver = {**solver, "a2a_agent_id": solver_agent}
        solver.pop("config")
    steps = [solver]
    ask = {"id": "ask", "type": "prompt_agent", "agent_name": "solver", "prompt_id": "ask", "prompt": "hi",
           "depends_on": ["solver"]}
    if user:
        steps.append({"id": "user", "type": "deploy_agent", "a2a_agent_id": "scripted", "agent_name": "user",
                      "config": _plan("USER SAYS HI", "")})
        ask = {**ask, "user_agent_name": "user", "depends_on": ["solver", "user"]}
    steps += [ask, {"id": "check", "type": "agent_prompt_response_verifier", "prompt_id": "ask", "verifier_id": "v",
                    "criteria": [{"type": "response_contains", "needles": [needle]}], "depends_on": ["ask"]}]
    return steps


def _agent(root: Path, name: str, toml: str) -> None:
    (root / "agents" / name).mkdir(parents=True)
    (root / "agents" / name / "agent.toml").write_text(toml)


def _bundle(tmp_path: Path, tasks: dict[str, list[dict]]) -> Path:
    root = tmp_path / "b"
    (root / "tasks").mkdir(parents=True)
    for name, steps in tasks.items():
        (root / "tasks" / f"{name}.json").write_text(json.dumps(steps))
    _agent(root, "helper", 'spec = "scripted"\ndescription = "says HELPED"\n[config.plan]\n'
                           'turns = [[{reply = "HELPED"}]]\n')
    (root / "aliases.toml").write_text('[agents]\nhelper = ["aide"]\n')
    (tmp_path / "proj" / ".agentenv").mkdir(parents=True)
    return root


def _runs(project: Path) -> list[dict]:
    return json.loads(cli(project, "runs", "list", "--json", check=True).stdout)


def _show(project: Path, run_id: str) -> dict:
    return json.loads(cli(project, "runs", "show", run_id, "--json", check=True).stdout)


def test_a_task_names_a_bundle_agent_by_folder_alias_or_id_and_agent_list_shows_it(tmp_path):
    root = _bundle(tmp_path, {"by-folder": _task("helper", "HELPED"), "by-alias": _task("aide", "HELPED")})
    project = tmp_path / "proj"
    root_id = json.loads(cli(project, "run", str(root), "--dry-run", "--json", check=True).stdout)["plan"][0]["id"]
    assert root_id.endswith("/b/helper")
    (root / "tasks" / "by-id.json").write_text(json.dumps(_task(root_id, "HELPED")))
    out = cli(project, "run", str(root), "--sandbox", "process", check=True)
    assert "agents/helper: v1 (new)" in out.stdout and "not used yet" not in out.stdout + out.stderr
    assert out.stdout.count("passed") >= 3, out.stdout
    for run in _runs(project):
        [solver] = _show(project, run["run_id"])["context"]["deployed_agents"]
        assert solver["a2a_agent_id"] == root_id and solver["a2a_agent_version"] == 1
    listed = {r["id"]: r for r in json.loads(cli(project, "agent", "list", "--json", check=True).stdout)}
    assert listed[root_id]["aliases"] == ["aide"] and listed[root_id]["kind"] == "scripted"
    assert listed[root_id]["description"] == "says HELPED"
    assert {"claude-code", "codex", "gemini", "opencode", "pi", "openhands", "tool-loop"} <= set(listed)
    table = cli(project, "agent", "list", check=True).stdout
    assert "ALIASES" in table and any(root_id in ln and "aide" in ln for ln in table.splitlines())
    again = cli(project, "run", str(root), "--sandbox", "process", "--task", "by-folder", check=True)
    assert "agents/helper: v1, unchanged" in again.stdout


def test_an_unknown_agent_name_fails_listing_the_names_a_task_can_use(tmp_path):
    root = _bundle(tmp_path, {"t": _task("ghost", "x")})
    project = tmp_path / "proj"
    out = cli(project, "run", str(root), "--dry-run")
    assert out.returncode == 1
    line = next(ln for ln in out.stderr.splitlines() if "agent 'ghost' not found" in ln)
    assert "this bundle's agents: helper, aide" in line and "claude-code" in line
    (root / "tasks" / "t.json").write_text(json.dumps(_task(None, "from the task")))
    bad = cli(project, "run", str(root), "--agent", "nobody")
    assert bad.returncode == 1 and "agent 'nobody' not found (from --agent)" in bad.stderr
    assert "this bundle's agents: helper, aide" in bad.stderr and "nothing was written or run" in bad.stderr
    assert not (project / ".agentenv" / "store.duckdb").exists() or not json.loads(
        cli(project, "agent", "list", "--json", check=True).stdout)[-1]["id"].endswith("/helper")


def test_a_bad_agent_folder_fails_the_load_naming_the_folder_and_stores_nothing(tmp_path):
    root = _bundle(tmp_path, {"t": _task("helper", "HELPED")})
    project = tmp_path / "proj"
    _agent(root, "two", 'spec = "scripted"\nurl = "http://127.0.0.1:1"\n')
    _agent(root, "odd", 'spec = "scripted"\ncolour = "red"\n')
    _agent(root, "cmd", 'command = "python server.py"\n')
    (root / "agents" / "bare").mkdir()
    (root / "agents" / "mine").mkdir()
    (root / "agents" / "mine" / "a2a_server.py").write_text("print('hi')\n")
    out = cli(project, "run", str(root), "--sandbox", "process")
    assert out.returncode == 1 and "nothing was written or run" in out.stderr
    err = out.stderr
    assert "agents/two/agent.toml: name exactly one of spec, url, command, image (it names spec, url)" in err
    assert "agents/odd/agent.toml: unknown key(s) colour; valid: spec, url, command, image" in err
    assert "agents/cmd/agent.toml: 'command' must be a non-empty list of strings" in err
    assert "agents/bare: no agent.toml; add one naming exactly one of spec, url, command or image" in err
    assert "agents/mine: a reference-layout agent (a2a_server.py)" in err and "command = [" in err
    assert "agents/helper" not in cli(project, "agent", "list", "--json", check=True).stdout


def test_the_reference_agents_bundle_loads_with_its_six_agents_and_aliases(tmp_path):
    bundle = copy_reference_bundle("agents", tmp_path)
    project = tmp_path / "proj"
    (project / ".agentenv").mkdir(parents=True)
    out = cli(project, "run", str(bundle), "--dry-run")
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    assert "not used yet" not in text and "agents/proxy: ignored" in text
    six = ("claude-code", "codex", "gemini", "opencode", "openhands", "pi")
    for name in six:
        assert f"agents/{name}: v1 (new)" in text
    cli(project, "run", str(bundle), "--task", "pi-smoke", "--dry-run", check=True)
    written = cli(project, "run", str(bundle), "--task", "pi-smoke", "--agent", "no-such")
    assert written.returncode == 1
    listed = json.loads(cli(project, "agent", "list", "--json", check=True).stdout)
    assert not [r for r in listed if r["version"]]  # dry runs and refused runs store nothing
    cli(project, "run", str(bundle), "--task", "pi-smoke", "--agent", "scripted")  # stores it; fails: no answer
    listed = json.loads(cli(project, "agent", "list", "--json", check=True).stdout)
    stored = {r["id"].rsplit("/", 1)[-1]: r for r in listed if r["version"]}
    assert set(stored) == set(six)
    assert all(stored[n]["aliases"] == [n] and stored[n]["kind"] == n for n in six)
