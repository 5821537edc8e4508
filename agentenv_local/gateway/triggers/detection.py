"""Detection: which triggers a proxied tool call provokes. A deadline's ``unless`` call cancels it,
an action trigger's call starts (or queues) a fire, a call that may change state re-evaluates the
state triggers' checks."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from .firing import Firing
from .predicates import where_holds
from .records import IN_FLIGHT, TriggerRecord
from .results import call_value, result_is_error
from .runtime import EngineRuntime
from .spec import DEFAULT_ROLE


class Detection:
    """Matches calls to triggers and starts their fires (through ``firing``)."""

    def __init__(self, rt: EngineRuntime, firing: Firing, barrier_timeout: float):
        self._rt = rt
        self._firing = firing
        self._barrier_timeout = barrier_timeout

    def on_call(self, tool: str, args: Any, result: Any, role: str | None) -> tuple[list[asyncio.Task], float | None]:
        """Detect what the call by ``role`` provokes. Answers the fires a ``barrier`` holds the call
        for and how long it may wait for them (the longest timeout asked)."""
        role = role or DEFAULT_ROLE
        provokable = [trig for trig in self._rt.triggers.values() if self._provoked_by(trig, role)]
        if not provokable or result_is_error(result):
            return [], None
        ctx = {"args": copy.deepcopy(args) if isinstance(args, dict) else {}, "result": call_value(result)}
        provoking = {"tool": tool, "role": role}
        # Deadlines first, so the call that sets off an anchor can't also be the one that cancels it.
        for trig in provokable:
            unless = getattr(trig.spec.when, "unless", None)
            if unless is None or unless.tool != tool or trig.status != "armed":
                continue
            after = trig.time_when.after
            if after is not None and not trig.resolved:
                anchor = self._rt.triggers.get(after)
                if anchor is None or anchor.status not in IN_FLIGHT:
                    continue
            if self._matches(trig, unless.where, ctx):
                self._cancel(trig, provoking=provoking)
        held: list[asyncio.Task] = []
        timeout: float | None = None
        for trig in provokable:
            when = trig.spec.when
            if when.type != "action" or when.tool != tool:
                continue
            if trig.status != "armed" and not (when.repeat and trig.status in IN_FLIGHT):
                continue
            if not self._matches(trig, when.where, ctx):
                continue
            task = self._start(trig, self._rt.new_job(ctx, provoking))
            if trig.spec.barrier is not None and task is not None:
                if task not in held:
                    held.append(task)
                asked = trig.spec.barrier.timeout_seconds or self._barrier_timeout
                timeout = asked if timeout is None else max(timeout, asked)
        if not self._read_only(tool):
            for trig in provokable:
                if trig.type == "state" and trig.status == "armed":
                    self._schedule_state(trig, provoking)
        return held, timeout

    def _provoked_by(self, trig: TriggerRecord, role: str) -> bool:
        """A call by ``role`` can provoke ``trig``: the roles its ``when`` (or a deadline's
        ``unless``) lists, else the watched roles other than the executors'."""
        when = trig.spec.when
        roles = getattr(when, "roles", None)
        unless = getattr(when, "unless", None)
        if roles is None and unless is not None:
            roles = unless.roles
        if roles is not None:
            return role in roles
        return role in self._rt.watch_roles and role not in {e["role"] for e in self._rt.executors.values()}

    def _read_only(self, tool: str) -> bool:
        try:
            return bool(self._rt.actions.read_only(tool))
        except Exception:  # fail-open
            return False

    def _matches(self, trig: TriggerRecord, where: dict, ctx: dict) -> bool:
        try:
            return where_holds(where, ctx)
        except Exception as exc:  # fail-open
            self._rt.emit("eval_error", trig.id, detail=(str(exc) or type(exc).__name__)[:300])
            return False

    def _start(self, trig: TriggerRecord, job: dict) -> asyncio.Task | None:
        """Run ``job`` now, or queue it behind the fire in progress."""
        rt = self._rt
        if trig.status in IN_FLIGHT:
            trig.pending.append(job)
            trig.status = "queued"
            rt.emit("detected", trig.id, provoking=job["provoking"], queued=len(trig.pending))
            return trig.task
        trig.status = "firing"
        trig.detected_at = rt.wall()
        rt.emit("detected", trig.id, provoking=job["provoking"])
        trig.job = job
        trig.task = self._firing.start(trig)
        return trig.task

    def _schedule_state(self, trig: TriggerRecord, provoking: dict) -> None:
        if trig.evaluating:
            trig.reeval = True  # look again once the evaluation in progress ends
            return
        trig.evaluating = True
        trig.eval_task = self._rt.spawn(self._eval_state(trig, provoking), name=f"{trig.id}:state")

    async def _eval_state(self, trig: TriggerRecord, provoking: dict) -> None:
        try:
            while True:
                trig.reeval = False
                try:
                    matched = await self._firing.run_check(trig.state_when.check)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # fail-open
                    self._rt.emit("eval_error", trig.id, detail=(str(exc) or type(exc).__name__)[:300])
                    matched = False
                if self._rt.triggers.get(trig.id) is not trig or trig.status != "armed":
                    return
                if matched:
                    self._start(trig, self._rt.new_job(None, provoking))
                    return
                if not trig.reeval:
                    return
        finally:
            trig.evaluating = False
            trig.eval_task = None

    def _cancel(self, trig: TriggerRecord, **cause: Any) -> None:
        """Retire a deadline its ``unless`` call answered, and the time triggers anchored on it."""
        trig.status = "cancelled"
        trig.next_mark = None
        self._rt.emit("cancelled", trig.id, **cause)
        for dep in list(self._rt.triggers.values()):
            if dep.type == "time" and dep.time_when.after == trig.id and dep.status == "armed":
                self._cancel(dep, anchor=trig.id)
