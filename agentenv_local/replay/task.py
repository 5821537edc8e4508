"""The replay task: the recorded task's steps with every agent swapped for its replay agent (agents.py) but a
scripted judge with its plan in the task (it judges again), the env pinned at the recorded (or a given) version,
a wall-clock env's clock armed with the recorded time of each call (clock mode `schedule`). (The runner itself
keeps each env's changelog and `/state` at the episode's end: tasks/env_capture.py.)"""

from __future__ import annotations

import copy
import time

from agentenv_local.episodes.record import LoadObject
from agentenv_local.errors import ValidationError

from .agents import conversations_plan, judge_plan, solver_plan, user_plan
from .record import CLOCK_STEP, call_times

REPLAY_AGENT = "scripted"


def replay_steps(steps: list[dict], run: dict, events: list[dict], load_object: LoadObject | None,
                 env_versions: dict[str, int]) -> tuple[list[dict], list[str]]:
    """(the replay task's steps, notes on what is not replayed exactly). `env_versions`: env id -> version."""
    context = run.get("context") or {}
    responses = [r for r in context.get("prompt_responses") or [] if isinstance(r, dict)]
    verifications = run.get("verifications") or {}
    notes: list[str] = []
    solver_of: dict[str, list[dict]] = {}
    for response in responses:
        solver_of.setdefault(str(response.get("agent_name")), []).append(response)
    continued = {str(s.get("agent_name")) for s in steps if s.get("type") == "prompt_agent" and s.get("context_id")}
    user_of = {str(s.get("user_agent_name")): next((r for r in responses if r.get("step_id") == s.get("id")), None)
               for s in steps if s.get("type") == "prompt_agent" and s.get("user_agent_name")}
    live_judges = {str(s.get("agent_name")) for s in steps if s.get("type") == "deploy_agent" and judges_the_same(s)
                   and s.get("agent_name") not in solver_of and s.get("agent_name") not in user_of}
    out: list[dict] = []
    for raw in steps:
        step = copy.deepcopy(raw)
        kind = step.get("type")
        if kind == "deploy_agent" and step.get("agent_name") in live_judges:
            pass  # a judge that judges the same input the same way: it judges the replay's episode again
        elif kind == "deploy_agent":
            step = _replay_agent_step(step, solver_of, user_of, continued, notes, load_object)
        elif kind == "deploy_env":
            env_id = step.get("env_id")
            if env_id in env_versions:
                step["env_version"] = env_versions[env_id]
        elif kind == "prompt_agent" and step.get("user_model") and not step.get("user_agent_name"):
            notes.append(f"step {step.get('id')}: the user simulator is a live model call (user_model); its replies "
                         "are asked again, not fed back")
        elif kind == "rubrics_verifier" and step.get("use_agent_judge") and step.get("judge_agent_name") in live_judges:
            pass  # its judge is deployed as recorded
        elif kind == "rubrics_verifier":
            verification = verifications.get(step.get("verifier_id") or step.get("id"))
            plan = judge_plan(verification) if isinstance(verification, dict) else None
            if plan is None and verification is not None:  # it judged, but its verdict is not in the record
                notes.append(f"step {step.get('id')}: the judge's verdict was not recorded; it judges live again")
            elif plan is not None:
                judge = f"replay-judge-{step.get('id')}"
                asked = step.get("judge_agent_name") if step.get("use_agent_judge") else None
                notes.append(f"step {step.get('id')}: its judge ({asked or 'the [model]'}) is not asked again (only "
                             "the scripted agent with its plan in the task is): the recorded verdict is fed back, so "
                             "its criteria are those it gave the recorded episode")
                out.append({"id": judge, "type": "deploy_agent", "a2a_agent_id": REPLAY_AGENT, "agent_name": judge,
                            "config": {"plan": plan}, "depends_on": list(step.get("depends_on") or [])})
                step.update(use_agent_judge=True, judge_agent_name=judge,
                            depends_on=[*(step.get("depends_on") or []), judge])
        out.append(step)
    if not any(s.get("type") == "sync_env_clock" for s in steps):
        out = _arm_clocks(out, run, events, notes)
    return out, notes


# the id prefix of the snapshot steps a replay made before the runner captured each env's end itself (a replay
# of such a replay runs them as its task has them; their snapshots are read as the changelog, not as env state)
END_CAPTURE = "replay-end-"


def judges_the_same(step: dict) -> bool:
    """Whether a deploy_agent step's agent is the built-in scripted agent with its plan written in the step: no
    model and no file behind it, so it answers the same input the same way. As a judge it judges the replay
    again (its verdict follows what the agents did now; on an unchanged env it is the recorded one) rather
    than answering a recorded verdict that judged the recorded episode."""
    plan = (step.get("config") or {}).get("plan") if isinstance(step.get("config"), dict) else None
    return step.get("a2a_agent_id") == REPLAY_AGENT and isinstance(plan, (dict, list))


def _replay_agent_step(step: dict, solver_of: dict[str, list[dict]], user_of: dict[str, dict | None],
                       continued: set[str], notes: list[str], load_object: LoadObject | None) -> dict:
    name = str(step.get("agent_name") or "default-agent")
    if name in solver_of and len(solver_of[name]) > 1 and name not in continued:
        plan, why = conversations_plan(solver_of[name], load_object)  # each conversation replays its own turns
        notes.extend(why)
    elif name in solver_of:
        responses = solver_of[name]
        if len(responses) > 1:  # a conversation continued (context_id): the agent counts on through its turns
            notes.append(f"agent {name} was prompted by steps {', '.join(str(r.get('step_id')) for r in responses)}"
                         " continuing one conversation; its replay plan follows their turns in the recorded order")
        plan, why = solver_plan({**responses[-1], "turns": [t for r in responses for t in r.get("turns") or []]},
                                load_object)
        notes.extend(why)
    elif name in user_of and user_of[name] is not None:
        plan = user_plan(user_of[name] or {})
    else:  # a judge (its verifier gets its own replay judge) or an agent never prompted
        plan = {"turns": [], "after_last": "end"}
    kept = {k: step[k] for k in ("id", "type", "agent_name", "env_ids", "role", "env_step_id", "depends_on",
                                 "metadata", "agent_description") if k in step}
    return {**kept, "a2a_agent_id": REPLAY_AGENT, "runtime": "in_hub", "config": {"plan": plan}}


def _arm_clocks(steps: list[dict], run: dict, events: list[dict], notes: list[str]) -> list[dict]:
    """After each deploy_env step, a `sync_env_clock` step arming the env's clock in mode `schedule` with the time
    the recorded run's env saw on each call to it (a wall-clock env dates what it writes: each replayed call is
    dated as its recorded call was). A recording that lacks a call's time freezes the clock at its first call
    instead, with a note: dates the env wrote later then differ (compare.py notes them, not counted)."""
    recorded = call_times(run, events)
    started = float(run.get("started_at") or time.time())
    out: list[dict] = []
    clock_of: dict[str, str] = {}
    for step in steps:
        out.append(step)
        if step.get("type") != "deploy_env":
            continue
        clock = f"{CLOCK_STEP}{step['id']}"
        clock_of[step["id"]] = clock
        times = recorded.get(str(step["id"]), [])
        arm: dict = {"id": clock, "type": "sync_env_clock", "env_id": step["env_id"], "depends_on": [step["id"]]}
        if all(isinstance(t, str) for t in times) and times:
            arm.update(virtual_time=times[0], mode="schedule", schedule=times)
        else:
            first = next((t for t in times if isinstance(t, str)), None)
            frozen = first or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started))
            arm.update(virtual_time=frozen, mode="frozen")
            if times:
                notes.append(f"env {step['id']}: the recording holds no time for {sum(t is None for t in times)} of "
                             f"its {len(times)} calls, so its clock is frozen at {frozen}, not set per call: a date "
                             "it wrote otherwise is a note, not a difference")
        out.append(arm)
    for step in out:  # whatever needed the env deployed needs its clock set too
        needs = step.get("depends_on") or []
        extra = [clock_of[d] for d in needs if d in clock_of and step["id"] != clock_of[d]]
        if extra:
            step["depends_on"] = [*needs, *extra]
    return out


def recorded_env_versions(run: dict, override: list[str]) -> dict[str, int]:
    """env id -> the version to replay against: the recorded one, or `--env-version [ENV=]V`."""
    deployed = {str(e.get("env_id")): int(e["env_version"]) for e in (run.get("context") or {}).get("deployed_envs")
                or [] if isinstance(e, dict) and e.get("env_version") is not None}
    for spec in override:
        name, _, version = spec.rpartition("=")
        if not version.isdigit() or int(version) < 1:
            raise ValidationError(f"--env-version {spec!r}: a version is a number >= 1",
                                  hint="--env-version 2, or --env-version ENV=2 when the run deployed several envs")
        matches = [e for e in deployed if not name or e == name or e.rsplit("/", 1)[-1] == name]
        if len(matches) != 1:
            raise ValidationError(f"--env-version {spec!r} names {'none' if not matches else 'several'} of the "
                                  f"envs the run deployed ({', '.join(deployed) or 'none'})",
                                  hint="say which: --env-version ENV=V (its id or last path segment)")
        deployed[matches[0]] = int(version)
    return deployed
