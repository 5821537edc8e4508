"""What the screens show, as plain data updated from hub events (testable without a terminal).

`RunsModel` is the runs list; `RunState` is one run: its steps, logs, tool calls, trigger events,
verifications and pending reviews. Both take events in batches (`apply(events)`) and say whether
anything a screen shows changed, so a burst of events costs one repaint.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

FINAL = ("passed", "failed", "error", "cancelled", "interrupted")
LIVE = ("queued", "running")
MAX_TOOL_CALLS = 5000
MAX_LOGS = 2000
MAX_TRIGGER_EVENTS = 2000
MAX_STATUS_EVENTS = 2000
_STATUS_KINDS = ("step.started", "step.finished", "step.retry", "run.started", "run.resumed", "run.finished",
                 "run.interrupted")


# -- the runs list ------------------------------------------------------------------------------
class RunsModel:
    def __init__(self, limit: int = 500):
        self.rows: dict[str, dict] = {}
        self.limit = limit
        self.filter = ""

    def load(self, rows: list[dict]) -> None:
        self.rows = {r["run_id"]: dict(r) for r in rows}

    def apply(self, events: list[dict]) -> set[str]:
        """Update rows from run.* events; the run ids that changed."""
        changed: set[str] = set()
        for e in events:
            kind, run_id = e.get("kind", ""), e.get("run_id")
            if not run_id or not kind.startswith("run."):
                continue
            body = e.get("body") or {}
            row = self.rows.get(run_id)
            if row is None:
                task_id = body.get("task_id") or "?"
                row = self.rows[run_id] = {"run_id": run_id, "task_id": task_id,
                                           "task_name": task_id.rsplit("/", 1)[-1],
                                           "task_version": body.get("task_version"), "status": "queued",
                                           "created_at": e.get("at"), "started_at": None, "finished_at": None,
                                           "score": None}
            if kind == "run.started":
                row["status"] = "running"
                row["started_at"] = row.get("started_at") or e.get("at")
            elif kind == "run.resumed":
                row["status"] = "running"
                row["finished_at"] = None
            elif kind == "run.finished":
                row["status"] = body.get("status") or row["status"]
                row["score"] = body.get("score")
                row["finished_at"] = e.get("at")
                row["error"] = body.get("error")
            elif kind == "run.interrupted":
                row["status"] = "interrupted"
            changed.add(run_id)
        if len(self.rows) > self.limit:
            oldest_first = sorted(self.rows, key=lambda r: self.rows[r].get("created_at") or 0)
            for run_id in oldest_first[: len(self.rows) - self.limit]:
                self.rows.pop(run_id, None)
        return changed

    def visible(self) -> list[dict]:
        """Rows matching the filter, newest first. The filter is words; each must appear in the run
        id, task, or status (`status:running` matches the status exactly)."""
        words = self.filter.lower().split()
        out = []
        for row in self.rows.values():
            hay = " ".join(str(row.get(k) or "") for k in ("run_id", "task_name", "task_id", "status")).lower()
            ok = True
            for w in words:
                if w.startswith("status:"):
                    ok = ok and (row.get("status") or "") == w.split(":", 1)[1]
                else:
                    ok = ok and w in hay
            if ok:
                out.append(row)
        out.sort(key=lambda r: r.get("created_at") or 0, reverse=True)
        return out


def took(row: dict, now: float) -> float | None:
    """How long the run took (so far, while it runs)."""
    if row.get("started_at") is None or (not row.get("finished_at") and row.get("status") not in LIVE):
        return row.get("duration_s")
    return (row.get("finished_at") or now) - row["started_at"]


# -- one run ------------------------------------------------------------------------------------
@dataclass
class ToolCall:
    call_id: str
    role: str
    tool: str
    arguments: Any
    at: float | None = None
    virtual_time: str | None = None
    result: Any = None
    error: str | None = None
    duration_s: float | None = None
    source: str = ""
    denied: bool = False
    done: bool = False
    instance_id: str | None = None

    @property
    def outcome(self) -> str:
        if self.denied:
            return "denied"
        if self.error:
            return "failed"
        if not self.done:
            return "running"
        if isinstance(self.result, dict) and self.result.get("isError"):
            return "error"
        return "ok"


@dataclass
class RunState:
    run_id: str
    record: dict = field(default_factory=dict)
    task_steps: dict[str, dict] = field(default_factory=dict)  # step id -> the step's JSON
    logs: dict[str, deque] = field(default_factory=dict)        # step id -> step.log/step.* events
    outputs: dict[str, list] = field(default_factory=dict)      # step id -> events other than logs
    tool_calls: list[ToolCall] = field(default_factory=list)
    trigger_events: deque = field(default_factory=lambda: deque(maxlen=MAX_TRIGGER_EVENTS))
    reviews: dict[str, dict] = field(default_factory=dict)      # review id -> {label, step_id, decision}
    last_event_id: int = 0
    calls_added: int = 0          # tool calls ever added (the list keeps the last MAX_TOOL_CALLS)
    needs_refresh: bool = False   # the record changed in ways events do not carry (reload it)
    env_touched: bool = False     # env.* events came: the env panels may be stale
    _calls_by_id: dict[str, ToolCall] = field(default_factory=dict)
    # the step and run status events seen, newest last: applied again over a record that may predate them
    _status_events: deque = field(default_factory=lambda: deque(maxlen=MAX_STATUS_EVENTS))

    # -- reading --
    @property
    def status(self) -> str:
        return self.record.get("status") or "?"

    @property
    def steps(self) -> dict[str, dict]:
        return self.record.setdefault("steps", {})

    def step_ids(self) -> list[str]:
        levels = self.record.get("levels") or []
        ordered = [s for level in levels for s in level]
        return ordered + [s for s in self.steps if s not in ordered]

    def context(self) -> dict:
        return self.record.get("context") or {}

    def verifications(self) -> dict:
        return self.record.get("verifications") or (self.context().get("metadata") or {}).get("verifications") or {}

    def pending_reviews(self) -> list[dict]:
        return [r for r in self.reviews.values() if not r.get("decision")]

    def deployed_envs(self) -> list[dict]:
        return [e for e in self.context().get("deployed_envs") or [] if e.get("gateway_url") or e.get("instance_id")]

    # -- updating --
    def load(self, record: dict, events: list[dict] | None = None, asked_after: int | None = None) -> None:
        """Take `record` (read from the store) as the run, then apply `events` not seen yet.

        `asked_after` is last_event_id when the record was asked for. The hub writes a step's status before it
        publishes the step's event, so the record shows every event up to that id; but events that came live
        while it loaded may be newer than the record, and their status changes are applied again over it
        (without that, a reload that crossed a step's end showed the step running for good)."""
        self.record = record
        if asked_after is not None:
            for event in self._status_events:
                if (event.get("event_id") or 0) > asked_after:
                    self._apply_status(event)
        if events:
            self.apply([e for e in events if (e.get("event_id") or 0) > self.last_event_id], from_history=True)

    def _apply_status(self, e: dict) -> None:
        """What a step or run status event changes in the record."""
        kind, body, step_id = e.get("kind", ""), e.get("body") or {}, e.get("step_id")
        if kind == "step.started" and step_id:
            info = self.steps.setdefault(step_id, {})
            info.update(status="running", started_at=e.get("at"), type=body.get("type") or info.get("type"),
                        finished_at=None, duration_s=None, error=None)
        elif kind == "step.finished" and step_id:
            info = self.steps.setdefault(step_id, {})
            info.update(status=body.get("status"), duration_s=body.get("duration_s"), error=body.get("error"),
                        finished_at=e.get("at"))
            if body.get("traceback"):
                info["traceback"] = body["traceback"]
        elif kind == "step.retry" and step_id:
            self.steps.setdefault(step_id, {})["status"] = "retrying"
        elif kind == "run.started":
            self.record["status"] = "running"
            self.record.setdefault("started_at", e.get("at"))
        elif kind == "run.resumed":
            self.record["status"] = "running"
            self.record["finished_at"] = None
        elif kind in ("run.finished", "run.interrupted"):
            self.record["status"] = body.get("status") or ("interrupted" if kind == "run.interrupted" else "?")
            if kind == "run.finished":
                self.record["score"] = body.get("score")
                self.record["error"] = body.get("error")
                self.record["finished_at"] = e.get("at")

    def apply(self, events: list[dict], from_history: bool = False) -> bool:
        """Apply this run's events; True when something shown changed."""
        changed = False
        for e in events:
            if e.get("run_id") != self.run_id:
                continue
            changed = True
            self.last_event_id = max(self.last_event_id, e.get("event_id") or 0)
            kind, body, step_id = e.get("kind", ""), e.get("body") or {}, e.get("step_id")
            if kind in _STATUS_KINDS:
                self._apply_status(e)
                self._status_events.append(e)
                if kind.startswith("step.") and step_id:
                    self._log(step_id, e)
                    if kind == "step.retry":
                        self.needs_refresh = True
                    elif kind == "step.finished":
                        self.needs_refresh = self.needs_refresh or not from_history  # its outputs are in the context
                elif kind == "run.resumed":
                    self.needs_refresh = True
                elif kind in ("run.finished", "run.interrupted"):
                    self.needs_refresh = not from_history
            elif kind == "step.log" and step_id:
                self._log(step_id, e)
            elif kind == "review.pending":
                rid = body.get("review_id")
                if rid:
                    self.reviews[rid] = {"review_id": rid, "label": body.get("label"), "step_id": step_id,
                                         "decision": None}
                if step_id:
                    self._log(step_id, e)
            elif kind == "review.decided":
                rid = body.get("review_id")
                if rid:
                    review = self.reviews.setdefault(rid, {"review_id": rid, "step_id": step_id})
                    review["decision"] = body.get("decision")
                if step_id:
                    self._log(step_id, e)
            elif kind == "verification":
                if step_id:
                    self.outputs.setdefault(step_id, []).append(e)
                self.needs_refresh = not from_history
            elif kind.startswith("env."):
                self._env_event(kind[4:], body, e)
                if step_id:
                    self.outputs.setdefault(step_id, []).append(e)
            elif step_id:
                self.outputs.setdefault(step_id, []).append(e)
        return changed

    def _log(self, step_id: str, event: dict) -> None:
        self.logs.setdefault(step_id, deque(maxlen=MAX_LOGS)).append(event)

    def _env_event(self, kind: str, body: dict, event: dict) -> None:
        self.env_touched = True
        if kind == "tool_call":
            call = body.get("tool_call") or {}
            self._add_call(ToolCall(
                call_id=str(body.get("event_id") or event.get("event_id")), role=body.get("role") or "",
                tool=call.get("function_name") or "?", arguments=call.get("arguments"), at=event.get("at"),
                virtual_time=body.get("virtual_time"), source=body.get("source") or "",
                instance_id=body.get("instance_id")))
        elif kind in ("tool_call_result", "tool_call_failed"):
            tc = self._calls_by_id.get(f"{body.get('instance_id')}:{body.get('tool_call_event_id')}")
            if tc is None:
                return
            tc.done = True
            if tc.at is not None and event.get("at") is not None:
                tc.duration_s = max(0.0, event["at"] - tc.at)
            if kind == "tool_call_failed":
                tc.error = body.get("error") or "failed"
            else:
                tc.result = body.get("tool_call_result")
                if _is_denial(tc.result):
                    tc.denied = True
        elif kind in ("tool_call_denied", "access_denied"):  # a gateway that records denials
            tc = ToolCall(call_id=str(body.get("event_id") or event.get("event_id")), role=body.get("role") or "",
                          tool=(body.get("tool_call") or {}).get("function_name") or body.get("tool") or "?",
                          arguments=(body.get("tool_call") or {}).get("arguments"), at=event.get("at"),
                          virtual_time=body.get("virtual_time"), denied=True, done=True,
                          error=body.get("error") or "denied by the role's rules", instance_id=body.get("instance_id"))
            self._add_call(tc)
        elif kind == "internal_tool_call":
            tc = ToolCall(call_id=str(body.get("event_id") or event.get("event_id")),
                          role="trigger", tool=body.get("tool") or "?",
                          arguments=body.get("arguments"), at=event.get("at"), virtual_time=body.get("virtual_time"),
                          source=f"trigger {body.get('trigger_id') or '?'}", done=True,
                          instance_id=body.get("instance_id"))
            self._add_call(tc)
            self.trigger_events.append({"kind": "action", "trigger_id": body.get("trigger_id"),
                                        "virtual_time": body.get("virtual_time"), "detail": body.get("tool"),
                                        "at": event.get("at")})
        elif kind.startswith("trigger"):
            self.trigger_events.append({"kind": kind.removeprefix("trigger_") or kind,
                                        "trigger_id": body.get("trigger_id"),
                                        "virtual_time": body.get("virtual_time"), "at": event.get("at"),
                                        "detail": body.get("provoking_tool") or body.get("mark") or ""})

    def _add_call(self, tc: ToolCall) -> None:
        self.calls_added += 1
        self.tool_calls.append(tc)
        self._calls_by_id[f"{tc.instance_id}:{tc.call_id}"] = tc
        if len(self.tool_calls) > MAX_TOOL_CALLS:
            drop = self.tool_calls[: len(self.tool_calls) - MAX_TOOL_CALLS]
            del self.tool_calls[: len(drop)]
            for old in drop:
                self._calls_by_id.pop(f"{old.instance_id}:{old.call_id}", None)


def _is_denial(result: Any) -> bool:
    """An MCP error result saying the role may not use the tool (the gateway's RBAC answer)."""
    if not isinstance(result, dict) or not result.get("isError"):
        return False
    for part in result.get("content") or []:
        text = part.get("text") if isinstance(part, dict) else None
        if isinstance(text, str) and " is disabled for role " in text:
            return True
    return False
