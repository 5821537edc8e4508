"""A finished run read into what replay compares: per agent turn its tool calls, the env's calls in order,
the criteria, the triggers that fired, status and score."""

from __future__ import annotations

import json
from typing import Any

from agentenv_local.episodes.record import LoadObject, _full_trajectory


def split_turns(response: dict, load_object: LoadObject | None) -> list[list[dict]] | None:
    """The tool calls of each turn of a prompt response, from its trajectory's `turn` markers; None when no
    trajectory was recorded (the agent offers no trajectory/v1): what tools it called is not known."""
    events = [e for e in _full_trajectory(response, load_object) if isinstance(e, dict)]
    turns = list(response.get("turns") or [])
    if not events:
        return None if turns else []
    per_turn: list[list[dict]] = []
    for event in events:
        if event.get("type") == "turn":
            per_turn.append([])
        elif event.get("type") == "tool_call":
            if not per_turn:
                per_turn.append([])
            per_turn[-1].append(event)
    return per_turn


def _parsed(value: Any) -> Any:
    """A tool result as JSON when its text is JSON (the tool loop keeps text, the scripted agent values)."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def run_view(run: dict, events: list[dict], load_object: LoadObject | None,
             env_state: dict[str, Any] | None = None, env_changes: dict[str, Any] | None = None,
             env_end_state: dict[str, Any] | None = None) -> dict[str, Any]:
    """The comparable view of one run (`events`: its stored events, for the env's own call log; `env_state`:
    the env state its snapshot steps stored, by snapshot and file; `env_changes` and `env_end_state`: the
    envs' changelogs and gateway `/state` as the episode left them, None where the run did not capture them)."""
    context = run.get("context") or {}
    agent_calls: dict[str, Any] = {}
    triggers: dict[str, Any] = {}
    for response in context.get("prompt_responses") or []:
        where = f"step {response.get('step_id')} (agent {response.get('agent_name')})"
        per_turn = split_turns(response, load_object) or []
        for t, calls in enumerate(per_turn):
            for i, call in enumerate(calls):
                agent_calls[f"{where} turn {t + 1} tool call {i + 1}"] = {
                    "tool": call.get("tool") or call.get("name"), "args": call.get("args"),
                    "result": _parsed(call.get("result")), "is_error": bool(call.get("is_error"))}
        for turn in response.get("turns") or []:
            if turn.get("triggers_fired"):
                triggers[f"{where} turn {int(turn.get('turn', 0)) + 1}"] = turn["triggers_fired"]
    if fired := firings(events):
        triggers["env triggers fired"] = fired
    criteria: dict[str, Any] = {}
    for verifier, verification in (run.get("verifications") or {}).items():
        if not isinstance(verification, dict):
            continue
        criteria[f"verifier {verifier} score"] = verification.get("score")
        for index, row in enumerate(verification.get("results") or []):
            if isinstance(row, dict):
                name = row.get("id") or row.get("name") or f"#{index + 1}"
                criteria[f"verifier {verifier} criterion {name}"] = {"result": row.get("result"),
                                                                     "score": row.get("score")}
    span = [float(run.get("started_at") or run.get("created_at") or 0),
            float(run.get("finished_at") or run.get("started_at") or run.get("created_at") or 0)]
    return {"status": run.get("status"), "score": run.get("score"), "criteria": criteria, "wall_span": span,
            "replay_clocks": replay_clocks(run, events), "tool_calls": agent_calls, "env_calls": env_calls(events),
            "triggers": triggers,
            "env_state": env_state or {}, "env_changes": env_changes, "env_end_state": env_end_state}


CLOCK_STEP = "replay-clock-"  # the id prefix of the sync_env_clock step the replay adds after each deploy_env


def call_times(run: dict, events: list[dict]) -> dict[str, list[str | None]]:
    """deploy step id -> the wall-clock time of each call the env's gateway proxied to it, in order (the stamp of
    its `tool_call` event, taken as the call went out: the time a wall-clock env read for it, to well under a
    millisecond); None for a call whose event holds no stamp. Calls RBAC refused moved no clock: not counted."""
    step_of = {str(e.get("instance_id")): str(e.get("step_id")) for e in (run.get("context") or {}).get(
        "deployed_envs") or [] if isinstance(e, dict) and e.get("step_id")}
    times: dict[str, list[str | None]] = {}
    for event in events:
        body = event.get("body")
        if event.get("kind") != "env.tool_call" or not isinstance(body, dict):
            continue
        step = step_of.get(str(body.get("instance_id")))
        if step is not None:
            stamp = body.get("timestamp_utc")
            times.setdefault(step, []).append(stamp if isinstance(stamp, str) else None)
    return times


def replay_clocks(run: dict, events: list[dict]) -> dict[str, dict[str, Any]]:
    """A replay's clocks, by deploy step: the mode replay armed the env's clock in (`schedule`: each call's recorded
    time; `frozen`: a recording without them), and in `schedule` mode how many times it held and how many calls the
    replay made (more calls than times: the last ones got the last time). {} for a run that is not a replay."""
    made = call_times(run, events)
    clocks: dict[str, dict[str, Any]] = {}
    for config in ((run.get("context") or {}).get("metadata") or {}).get("clock_configurations") or []:
        step = str(config.get("step_id") or "") if isinstance(config, dict) else ""
        if step.startswith(CLOCK_STEP):
            env_step = step[len(CLOCK_STEP):]
            clocks[env_step] = {"mode": config.get("mode"), "times": config.get("schedule_length"),
                                "calls": len(made.get(env_step, []))}
    return clocks


def env_calls(events: list[dict]) -> dict[str, Any]:
    """Every call the env's gateway logged (agents' and verifiers' alike), in order, with its result: what the
    env held as the run went, the final state included where a verifier read it."""
    results = {(e["body"].get("instance_id"), e["body"].get("tool_call_event_id")): e["body"]
               for e in events if e.get("kind") == "env.tool_call_result" and isinstance(e.get("body"), dict)}
    calls: dict[str, Any] = {}
    for event in events:
        body = event.get("body")
        if event.get("kind") not in ("env.tool_call", "env.tool_call_denied") or not isinstance(body, dict):
            continue
        call = body.get("tool_call") or {}
        if event["kind"] == "env.tool_call_denied":  # refused by RBAC: the refusal is its result
            calls[f"env call {len(calls) + 1} ({call.get('function_name')}, role {body.get('role')}, denied)"] = {
                "tool": call.get("function_name"), "args": call.get("arguments"), "error": body.get("error")}
            continue
        answer = results.get((body.get("instance_id"), body.get("event_id"))) or {}
        result = answer.get("tool_call_result") or {}
        texts = [c.get("text") for c in result.get("content") or [] if isinstance(c, dict) and "text" in c]
        calls[f"env call {len(calls) + 1} ({call.get('function_name')}, role {body.get('role')})"] = {
            "tool": call.get("function_name"), "args": call.get("arguments"),
            "result": _parsed("\n".join(t for t in texts if isinstance(t, str))),
            "is_error": bool(result.get("isError") or result.get("is_error"))}
    return calls


# what identifies a firing and what it did; not its wall-clock timestamps, nor event ids
_FIRING_KEYS = ("trigger_id", "provoking_tool", "mark", "tool", "action_index", "as", "ok", "result_sha256")


def firings(events: list[dict]) -> list[dict]:
    """The env triggers that fired and the calls they made (the gateway's trigger_fired and
    internal_tool_call events), in order."""
    return [{"event": e["body"]["event_type"], **{k: e["body"][k] for k in _FIRING_KEYS if k in e["body"]}}
            for e in events if isinstance(e.get("body"), dict)
            and e["body"].get("event_type") in ("trigger_fired", "internal_tool_call")]


def snapshot_state(files: dict[str, bytes]) -> dict[str, Any]:
    """An env snapshot's service files (JSON where they are), its metadata (the trajectory log, with its
    wall-clock timestamps) left out."""
    return {name: _parsed(data.decode("utf-8", "replace")) for name, data in sorted(files.items())
            if not name.startswith("metadata/")}


# what a change row says happened; not its wall-clock stamp, nor the gateway's event ids in its actors
_ACTOR_KEYS = ("event_type", "role", "tool", "source")


def changelog_rows(env_step: str, files: dict[str, bytes]) -> dict[str, Any]:
    """The rows of a snapshot's `changes` record (changes.jsonl), keyed as change_rows does."""
    text = next((data.decode("utf-8", "replace") for name, data in files.items() if name.endswith("changes.jsonl")),
                "")
    return change_rows(env_step, [_parsed(line) for line in text.splitlines()])


def change_rows(env_step: str, rows_in: list[Any]) -> dict[str, Any]:
    """Changelog rows keyed by what they changed (`env ENV_STEP change TABLE OP KEY`, `#2` on for the same change
    again) without their position in the log, so a change one run lacks is one difference, not a shift of every
    row after it."""
    rows: dict[str, Any] = {}
    for row in rows_in:
        if not isinstance(row, dict):
            continue
        kept = {k: v for k, v in row.items() if k not in ("id", "timestamp_utc", "actors")}
        if any(isinstance(a, dict) and a.get("source") == "trigger_engine" for a in row.get("actors") or []):
            # when a trigger's action ran on a stepped clock depends on whether the agent's next call came first
            # (the trigger fires after the call that provoked it): when, as for its firing, is not compared
            kept.pop("virtual_time", None)
        kept["actors"] = [{k: a[k] for k in _ACTOR_KEYS if k in a} | (
            {"caused_by": [c.get("trigger_id") for c in a["caused_by"] if isinstance(c, dict)]}
            if isinstance(a.get("caused_by"), list) else {}) for a in row.get("actors") or [] if isinstance(a, dict)]
        where = f"env {env_step} change {row.get('table')} {row.get('op')} {row.get('key')}"
        nth = sum(1 for k in rows if k == where or k.startswith(f"{where} #"))
        rows[f"{where} #{nth + 1}" if nth else where] = kept
    return rows


def env_end(captured: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(changelog rows, gateway states) of the envs a run captured at its end (the run's `env_end`, by deploy
    step): the rows keyed as change_rows does, a cut changelog as `env STEP changelog` {"cut": true}, each
    `/state` as `env STEP state`. An env without a changelog, or one that failed to answer, adds nothing."""
    changes: dict[str, Any] = {}
    states: dict[str, Any] = {}
    for env_step, entry in sorted((captured or {}).items()):
        if not isinstance(entry, dict):
            continue
        if isinstance(entry.get("changes"), list):
            changes.update(change_rows(env_step, entry["changes"]))
            if entry.get("changes_cut"):
                changes[f"env {env_step} changelog"] = {"cut": True}
        if isinstance(entry.get("state"), dict):
            states[f"env {env_step} state"] = entry["state"]
    return changes, states
