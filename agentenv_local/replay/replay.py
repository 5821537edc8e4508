"""Replay recorded runs and report what differs (docs/tasks/replay.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentenv_local.errors import ValidationError

from .compare import Difference, differences
from .record import changelog_rows, env_end, run_view, snapshot_state
from .task import END_CAPTURE, recorded_env_versions, replay_steps

FINISHED = ("passed", "failed", "error", "cancelled")


@dataclass
class ReplayReport:
    run_id: str
    replay_run_ids: list[str]
    differences: list[Difference]
    notes: list[str] = field(default_factory=list)  # what could not be replayed exactly, and why

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "replay_run_ids": self.replay_run_ids,
                "differences": [d.to_json() for d in self.differences], "notes": self.notes}


def loader(store: Any):
    def load(key: str) -> bytes | None:
        return store.objects.get(key) if store.objects.exists(key) else None
    return load


def view_of(store: Any, run: dict) -> dict[str, Any]:
    changes, states = end_capture(store, run)
    return run_view(run, store.events.query(run_id=run["run_id"]), loader(store), env_state(store, run),
                    changes, states)


def _snapshots(store: Any, run: dict) -> dict[str, dict]:
    """step id -> the artifact document its snapshot_env step stored."""
    snapshots = ((run.get("context") or {}).get("metadata") or {}).get("env_snapshotted_universes") or {}
    docs: dict[str, dict] = {}
    for step_id, ref in snapshots.items():
        if isinstance(ref, dict) and ref.get("id"):
            doc = store.documents.find("artifacts", ref["id"], ref.get("version"))
            if doc is not None:
                docs[str(step_id)] = doc
    return docs


def env_state(store: Any, run: dict) -> dict[str, Any]:
    """The env state the run's own snapshot_env steps stored (`env snapshot STEP`: file -> content); not an
    older replay's end-of-episode captures (end_capture)."""
    from agentenv_local.artifacts import read_files

    return {f"env snapshot {step_id}": snapshot_state(read_files(store, doc))
            for step_id, doc in _snapshots(store, run).items() if not step_id.startswith(END_CAPTURE)}


def end_capture(store: Any, run: dict) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(each env's changelog rows, each env's gateway `/state`) as the episode left them: what the runner read
    before teardown (the run's `env_end`); (None, None) for a run recorded before it did. A replay made before
    then captured the changelog with its own `replay-end-STEP` snapshot steps: read from there (no `/state`)."""
    from agentenv_local.artifacts import read_files

    if isinstance(run.get("env_end"), dict):
        return env_end(run["env_end"])
    old = {step_id[len(END_CAPTURE):]: doc for step_id, doc in _snapshots(store, run).items()
           if step_id.startswith(END_CAPTURE)}
    if not old:
        return None, None
    out: dict[str, Any] = {}
    for env_step, doc in old.items():
        out.update(changelog_rows(env_step, read_files(store, doc)))
    return out, None


def replay_task_id(task_id: str) -> str:
    return f"{task_id}-replay"


def prepare(store: Any, run: dict, env_version: list[str], task_version: int | None) -> tuple[str, int, list[str]]:
    """Store the replay task of `run` (task id, version, notes)."""
    import hashlib
    import json

    if run.get("status") not in FINISHED:
        raise ValidationError(f"run {run['run_id']} is {run.get('status')}: only a finished run can be replayed",
                              hint="wait for it to finish, or resume it with `agentenv runs resume`")
    doc = store.documents.get("tasks", run["task_id"], task_version or run.get("task_version"))
    steps = (doc.get("body") or {}).get("steps")
    if not isinstance(steps, list):
        raise ValidationError(f"task {run['task_id']} v{doc.get('version')} has no steps list to replay")
    events = store.events.query(run_id=run["run_id"])
    versions = recorded_env_versions(run, env_version)
    for env_id, version in versions.items():
        store.documents.get("envs", env_id, version)  # a version that does not exist fails here, nothing stored
    new_steps, notes = replay_steps(steps, run, events, loader(store), versions)
    body = {"steps": new_steps, "description": f"replay of run {run['run_id']}"}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    stored = store.documents.put("tasks", replay_task_id(run["task_id"]), body, digest=digest, if_changed=True)
    return stored["id"], stored["version"], notes


def compare_replays(recorded: dict[str, Any], replays: list[dict[str, Any]]) -> tuple[list[Difference], list[str]]:
    """The recorded view against each replay's: a difference every replay shows alike is real; one where the
    replays disagree among themselves is the tool's own randomness (a note, not a difference)."""
    if not replays:
        return [], []
    clock: list[str] = []  # wall-clock readings that differ (compare.wall_clock_reading): notes, once each
    first = differences(recorded, replays[0], clock)
    unstable = {d.key for other in replays[1:] for d in differences(replays[0], other)}
    real = [d for d in first if d.key not in unstable]
    for other in replays[1:]:
        real.extend(d for d in differences(recorded, other, clock) if d.key not in unstable
                    and d.key not in {r.key for r in real})
    notes = [f"{where}: {what} differs from replay to replay with no env change (randomness in the tool); "
             "not counted as a difference" for where, what in sorted(unstable)]
    return real, notes + list(dict.fromkeys(clock)) + schedule_notes(replays)


def schedule_notes(replays: list[dict[str, Any]]) -> list[str]:
    """Where a replay made more calls to an env than the recording timed: its clock held the last recorded time
    from the call past them on (once each, however many replays did)."""
    notes: list[str] = []
    for view in replays:
        for env_step, clock in sorted((view.get("replay_clocks") or {}).items()):
            times, calls = clock.get("times"), clock.get("calls") or 0
            if clock.get("mode") == "schedule" and isinstance(times, int) and calls > times:
                notes.append(f"env {env_step}: the replay made {calls} calls to it, the recording {times}: from call "
                             f"{times + 1} on, each was given the recording's last time (the env's clock held it)")
    return list(dict.fromkeys(notes))
