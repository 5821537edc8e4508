"""install_agent (steps/install_agent.py) with the real process provider and store: codex's CLI lands in the named
sandbox, a later command there runs it, the run records it; the run's --agent replaces the agent of the solver's
install_agent step (one a prompt_agent prompts), as the reference's solver_steps does; a non-CLI agent fails with a
hint and the reference's cloud fields are accepted and noted."""

from __future__ import annotations

import asyncio

import pytest

from agentenv_local.agents.registry import solver_step_ids
from agentenv_local.errors import StepError
from agentenv_local.hosting.agents.cli_image import CLI_CACHE

needs_codex = pytest.mark.skipif(not (CLI_CACHE / "codex" / "node_modules" / ".bin" / "codex").exists(),
                                 reason="the codex CLI is not in .cache/agent-clis (scripts/setup-agent-clis.sh)")
SOLVER_TASK = [
    {"id": "sb", "type": "deploy_sandbox", "sandbox_name": "work"},
    {"id": "inst", "type": "install_agent", "sandbox_name": "work", "a2a_agent_id": "claude-code",
     "agent_name": "solver"},
    {"id": "ask", "type": "prompt_agent", "agent_name": "solver", "prompt": "hi"},
]


@needs_codex
def test_codex_is_installed_into_the_named_sandbox_and_runs_there(run):
    run.execute(run.step({"id": "sb", "type": "deploy_sandbox", "sandbox_name": "work"}))
    step = run.step({"id": "inst", "type": "install_agent", "sandbox_name": "work", "a2a_agent_id": "codex",
                     "agent_name": "solver", "a2a_port": 8000, "container_name": "task-container"})
    assert len(step.cloud_only_notes()) == 2  # a2a_port and container_name: accepted, noted
    run.execute(step)
    [record] = run.state["installed_agents"]
    assert (record["a2a_agent_id"], record["sandbox_name"], record["command"], record["version"]) == \
        ("codex", "work", "/app/.agents/bin/codex", "codex-cli 0.169.0")
    ran = asyncio.run(run.sandbox("work").exec(".agents/bin/codex --version", cwd="/app"))
    assert ran.exit_code == 0 and ran.stdout.strip() == "codex-cli 0.169.0"
    run.execute(step)  # a retry of the step replaces its record
    assert [r["step_id"] for r in run.state["installed_agents"]] == ["inst"]


def test_the_solvers_install_agent_step_is_one_run_agent_swaps() -> None:
    assert solver_step_ids(SOLVER_TASK) == {"inst"}
    assert solver_step_ids([{**s, "agent_name": "helper"} if s["id"] == "inst" else s for s in SOLVER_TASK]) == set()


@needs_codex
def test_the_runs_agent_replaces_the_solvers_agent(run):
    run.store.documents.put("tasks", "t", {"steps": SOLVER_TASK})
    run.store.runs.create({"run_id": run.run_id, "task_id": "t", "task_version": 1, "status": "running"})
    run.state["metadata"]["user_overrides"] = {"agent": "codex"}
    run.execute(run.step(SOLVER_TASK[0]))
    run.execute(run.step(SOLVER_TASK[1]))
    [record] = run.state["installed_agents"]
    assert (record["a2a_agent_id"], record["version"]) == ("codex", "codex-cli 0.169.0")


def test_an_agent_that_is_no_cli_is_refused_with_a_hint(run):
    run.execute(run.step({"id": "sb", "type": "deploy_sandbox", "sandbox_name": "work"}))
    with pytest.raises(StepError) as err:
        run.execute(run.step({"id": "inst", "type": "install_agent", "sandbox_name": "work",
                              "a2a_agent_id": "scripted"}))
    assert "not a coding-CLI agent" in err.value.message and "claude-code" in (err.value.hint or "")
    assert "installed_agents" not in run.state


def test_a_sandbox_the_run_has_not_deployed_fails_the_step(run):
    with pytest.raises(StepError) as err:
        run.execute(run.step({"id": "inst", "type": "install_agent", "sandbox_name": "nowhere",
                              "a2a_agent_id": "codex"}))
    assert "nowhere" in err.value.message
    assert "installed_agents" not in run.state
