"""What `agentenv runs resume` runs again (the rule is argued in docs/tasks/running.md, "Resume").

A completed step is kept, unless what it did lived only in a process that is gone:

- a deploying step whose deployment is gone (an env instance or an agent that died with the hub that
  ran it, or anything of a run whose teardown already ran) is *lost* and runs again;
- so does every completed step that depends on a lost one, directly or not, and changed what it
  deployed: loading data, env clock, trigger and tool-access steps, run_code, other deploys (they were
  wired to the lost one's URL). A `prompt_agent` step runs again only when an env it depends on is
  lost (its agent's tool calls changed that env); when only its agent is lost, its answer is kept;
- steps that only read and record (verifiers, judges, snapshots: `Step.records_only`) keep their
  recorded results.
"""

from __future__ import annotations

import contextlib
import os
import signal
from typing import Any

from agentenv_local.procs import cmdline

from .model import Task, ancestors

# Built-in steps that only read and record (plugins set `records_only = True` on their class).
RECORDS_ONLY = frozenset({
    "review", "env_outcome_verifier", "verify_sandbox", "rubrics_verifier", "run_container_unit_tests_verifier",
    "agent_prompt_response_verifier", "aggregate_verifiers", "snapshot_env", "collect_artifacts",
    "snapshot_agent_state", "deploy_human_agent", "teardown_sandboxes",
})


def records_only(step: Any) -> bool:
    return bool(getattr(step, "records_only", False)) or step.type in RECORDS_ONLY


def plan(task: Task, state: dict, done: set[str], services: Any, torn_down: bool) -> tuple[list[str], set[str]]:
    """(lost deploying steps, every completed step to run again) for a run being resumed."""
    lost = [s.id for s in task.steps
            if s.id in done and s.deploys and (torn_down or s.lost_on_resume(state, services))]
    env_steps = {r.get("step_id") for r in state.get("deployed_envs", [])}
    redo = set(lost)
    for step in task.steps:
        if step.id not in done or step.id in redo or records_only(step):
            continue
        above = ancestors(task.edges, step.id)
        hit = [d for d in lost if d in above]
        if not hit or (step.type == "prompt_agent" and not env_steps & set(hit)):
            continue
        redo.add(step.id)
    return lost, redo


def forget(state: dict, lost: list[str], redo: set[str]) -> None:
    """Take out of the run's state what is gone, so the steps run again start clean: the records of lost
    deployments (marked torn down; an agent process a dead hub left is stopped) and the answers of
    prompt steps that run again."""
    gone = set(lost)
    for record in state.get("deployed_envs", []) + state.get("deployed_agents", []):
        if record.get("step_id") in gone and not record.get("torn_down"):
            record.update(torn_down=True, lost_on_resume=True)
            pid = int(record.get("pid") or 0)
            # only if that pid still is an agent server: the number may belong to another process by now
            if record.get("runtime") == "subprocess" and pid and b"agentenv_local.agents" in cmdline(pid):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGTERM)
    torn = state.setdefault("metadata", {}).setdefault("torn_down_sandbox_ids", [])
    for record in state.get("deployed_sandboxes", []):
        if record.get("step_id") in gone and record.get("sandbox_id") not in torn:
            torn.append(record.get("sandbox_id"))
    state["prompt_responses"] = [r for r in state.get("prompt_responses", []) if r.get("step_id") not in redo]
