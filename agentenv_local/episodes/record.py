"""A finished run as one episode record: the row `agentenv export runs` writes and the rollouts API yields.

Fields (documented in docs/training.md, checked field by field by tests/agentenv_local/episodes):
ids and versions, the seed, status and score (the reward), every verifier's per-criterion results, the
prompted agents' conversations as OpenAI-style messages, their trajectories, model usage and timings.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .messages import conversation_messages

# The record's fields in the order the export writes them.
EPISODE_FIELDS = ("run_id", "task_id", "task_version", "task_name", "group_id", "eval_id", "eval_version", "seed",
                  "status", "score", "error", "agent", "model", "criteria", "verifier_scores", "messages",
                  "conversations", "trajectory", "usage", "timings")

USAGE_KEYS = ("input_tokens", "output_tokens", "total_tokens")

LoadObject = Callable[[str], bytes | None]  # object key -> bytes, None when it is gone


def episode_record(run: dict, load_object: LoadObject | None = None) -> dict[str, Any]:
    """The episode of a run record read with its context (`runs.get`).

    `load_object` reads the full agent trajectory a prompt step kept in the object store (the run's context
    keeps only its first events inline); without it, the inline events are used.
    """
    context = run.get("context") or {}
    labels = run.get("labels") or {}
    overrides = run.get("overrides") or {}
    conversations: list[dict[str, Any]] = []
    trajectory: list[dict[str, Any]] = []
    for response in context.get("prompt_responses") or []:
        events = _full_trajectory(response, load_object)
        conversations.append({"step_id": response.get("step_id"), "prompt_id": response.get("prompt_id"),
                              "agent_name": response.get("agent_name"), "state": response.get("state"),
                              "messages": conversation_messages(list(response.get("turns") or []), events)})
        trajectory.extend({"step_id": response.get("step_id"), "agent_name": response.get("agent_name"), **e}
                          for e in events if isinstance(e, dict))
    criteria, verifier_scores = _criteria(run.get("verifications") or {})
    return {
        "run_id": run["run_id"], "task_id": run["task_id"], "task_version": run.get("task_version"),
        "task_name": run.get("task_name"), "group_id": run.get("group_id"),
        "eval_id": labels.get("eval_id"), "eval_version": labels.get("eval_version"),
        "seed": run.get("seed") or {}, "status": run.get("status"), "score": run.get("score"),
        "error": run.get("error"), "agent": overrides.get("agent"),
        "model": overrides.get("agent_model") or _first_model(context), "criteria": criteria,
        "verifier_scores": verifier_scores,
        "messages": [m for c in conversations for m in c["messages"]], "conversations": conversations,
        "trajectory": trajectory, "usage": _usage(trajectory), "timings": _timings(run),
    }


def _full_trajectory(response: dict, load_object: LoadObject | None) -> list[dict]:
    key = response.get("agent_trajectory_object_key")
    if key and load_object is not None:
        data = load_object(key)
        if data is not None:
            events = json.loads(data)
            if isinstance(events, list):
                return events
    return list(response.get("trajectory") or [])


def _criteria(verifications: dict) -> tuple[list[dict], dict[str, float | None]]:
    """Every verifier's criteria as flat rows, and each verifier's own score."""
    rows: list[dict] = []
    scores: dict[str, float | None] = {}
    for step_id, verification in verifications.items():
        if not isinstance(verification, dict):
            continue
        scores[step_id] = verification.get("score")
        for index, result in enumerate(verification.get("results") or []):
            if not isinstance(result, dict):
                continue
            rows.append({"verifier": step_id, "id": result.get("id"), "criterion": result.get("criterion"),
                         "index": result.get("criterion_index", index), "score": result.get("score"),
                         "passed": result.get("result"), "weight": result.get("weight"),
                         "skipped": bool(result.get("skipped")), "justification": result.get("justification")})
    return rows, scores


def _usage(trajectory: list[dict]) -> dict[str, int]:
    """Token usage summed over the model calls the trajectories recorded, with the tool calls counted."""
    total = {key: 0 for key in USAGE_KEYS}
    for event in trajectory:  # the tool loop records usage per model call, the coding CLIs per turn
        usage = event.get("usage")
        if not isinstance(usage, dict):
            continue
        total["input_tokens"] += int(usage.get("input_tokens") or 0)
        total["output_tokens"] += int(usage.get("output_tokens") or 0)
        total["total_tokens"] += int(usage.get("total_tokens") or usage.get("total") or 0)
    return {**total, "model_calls": sum(1 for e in trajectory if e.get("type") == "model_call"),
            "tool_calls": sum(1 for e in trajectory if e.get("type") == "tool_call")}


def _timings(run: dict) -> dict[str, Any]:
    steps = {step_id: info.get("duration_s") for step_id, info in (run.get("steps") or {}).items()
             if isinstance(info, dict)}
    return {"created_at": run.get("created_at"), "started_at": run.get("started_at"),
            "finished_at": run.get("finished_at"), "duration_s": run.get("duration_s"), "steps": steps}


def _first_model(context: dict) -> str | None:
    for response in context.get("prompt_responses") or []:
        if response.get("model"):
            return str(response["model"])
    return None
