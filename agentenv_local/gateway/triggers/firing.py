"""Firing a trigger: running its jobs one after another (a job is one fire: its actions in order,
each with its delay, verify check and, for ``nl`` actions, the executor's working hours), settling
its status afterwards, and running check steps (a state trigger's check, an action's verify)."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from typing import Any

from .predicates import extract as apply_extract
from .predicates import holds, is_empty
from .records import IN_FLIGHT, Timer, TriggerRecord
from .results import echo_args, result_data, result_is_error, result_text
from .runtime import EngineRuntime
from .templating import TemplateError, render
from .timetriggers import TimeTriggers
from .timeutil import iso, next_opening

logger = logging.getLogger(__name__)

VERIFY_RETRY_SUFFIX = ("\n\nThe previous attempt did not pass verification: the change it should have made "
                       "can't be seen in the environment. Do it again, exactly as described.")
_DIGEST_CHARS = 16


class Firing:
    """Runs fires. Fail-open: an action that fails is recorded (``action_failed`` then ``failed``),
    never raised; the trigger re-arms, or retires when it is a time trigger."""

    def __init__(self, rt: EngineRuntime, time: TimeTriggers):
        self._rt = rt
        self._time = time

    def start(self, trig: TriggerRecord) -> asyncio.Task:
        """Spawn the runner of ``trig``'s job (and of those queued behind it)."""
        return self._rt.spawn(self._run(trig), name=trig.id)

    def resume(self) -> None:
        """Start the runners of fires restored from storage (needs a running loop)."""
        for trig in self._rt.triggers.values():
            if trig.job is not None and (trig.task is None or trig.task.done()):
                trig.task = self.start(trig)

    async def _run(self, trig: TriggerRecord) -> None:
        """Run the trigger's job and every job queued behind it, then settle its status."""
        rt = self._rt
        try:
            while trig.job is not None:
                job = trig.job
                ok = await self._run_job(trig, job)
                if rt.triggers.get(trig.id) is not trig:
                    return
                trig.job = None
                if ok:
                    self._time.anchor_dependents(trig.id)
                elif trig.type == "time":
                    trig.status = "failed"  # a time trigger retires on failure
                    trig.next_mark = None
                    trig.retiring = False
                    trig.pending.clear()
                    rt.changed()
                    return
                if trig.pending:
                    trig.job = trig.pending.popleft()
                    if trig.type != "time":
                        trig.detected_at = rt.wall()
                    trig.status = "queued" if trig.pending and trig.type != "time" else "firing"
                    continue
                if trig.type == "time":
                    trig.status = "fired" if trig.retiring else "armed"
                    trig.retiring = False
                else:
                    repeat = bool(getattr(trig.spec.when, "repeat", False))
                    trig.status = "armed" if (repeat or not ok) else "fired"
                rt.changed()
        finally:
            if not rt.closing and rt.triggers.get(trig.id) is trig and trig.status in IN_FLIGHT:
                dropped = len(trig.pending)
                trig.status = "armed"
                trig.job = None
                trig.pending.clear()
                rt.emit("failed", trig.id, detail="firing did not settle", dropped=dropped)
            if trig.task is asyncio.current_task():
                trig.task = None

    async def _run_job(self, trig: TriggerRecord, job: dict) -> bool:
        rt = self._rt
        try:
            if not job["started"]:
                job["started"] = True
                trig.attempts += 1
                event = {"event_type": "trigger_fired", "source": "trigger_engine", "trigger_id": trig.id}
                if job.get("ctx") is not None and trig.type == "action":
                    event["provoking_tool"] = trig.action_when.tool
                if job.get("mark") is not None:
                    event["mark"] = job["mark"]
                await rt.trajectory(event)
            for index in range(job["index"], len(trig.spec.actions)):
                if not await self._run_action(trig, job, index):
                    rt.emit("failed", trig.id, action_index=index)
                    return False
                job["index"] = index + 1
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.exception("trigger %r: firing failed", trig.id)
            rt.emit("failed", trig.id, detail=(str(exc) or type(exc).__name__)[:300])
            return False
        trig.fire_count += 1
        trig.fired_at = rt.wall()
        payload: dict[str, Any] = {"fire_count": trig.fire_count}
        if job.get("mark") is not None:
            payload.update(mark=job["mark"], capped=bool(job.get("capped")))
        rt.emit("fired", trig.id, **payload)
        return True

    async def _run_action(self, trig: TriggerRecord, job: dict, index: int) -> bool:
        rt = self._rt
        action = trig.spec.actions[index]
        named = {"executor": action.executor} if action.type == "nl" and action.executor is not None else {}
        if action.delay is not None:
            await self._time.wait_delay(trig, job, index, action.delay, named)
        ctx = job.get("ctx")
        try:
            if action.type == "permission":
                await rt.actions.set_permission(action.action, action.role, action.tools)
                tools = action.tools if isinstance(action.tools, list) else [action.tools]
                detail: dict[str, Any] = {"role": action.role, "action": action.action, "tools": tools}
            elif action.type == "tool":
                acting = {"as": action.as_} if action.as_ else {}
                try:
                    args = render(action.args, {}, ctx)
                except TemplateError as exc:
                    rt.emit("action_failed", trig.id, action_index=index, detail=str(exc)[:300], tool=action.tool)
                    return False
                result = await rt.actions.call_tool(action.tool, args, action.as_)
                text = result_text(result)
                failed = result_is_error(result)
                await rt.trajectory({
                    "event_type": "internal_tool_call", "source": "trigger_engine", "trigger_id": trig.id,
                    "action_index": index, "tool": action.tool, "arguments": echo_args(args), "as": action.as_,
                    "ok": not failed, "result_len": len(text),
                    "result_sha256": hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:_DIGEST_CHARS],
                })
                if failed:
                    rt.emit("action_failed", trig.id, action_index=index, detail=text[:300], tool=action.tool,
                            args=echo_args(args), **acting)
                    return False
                detail = {"tool": action.tool, "args": echo_args(args), **acting}
            else:
                if not await self._run_nl(trig, index, action, ctx, named):
                    return False
                detail = {"nl": action.instruction[:120], **named}
            if action.verify is not None and action.type != "nl":
                role = action.as_ if action.type == "tool" else None
                if not await self._verify(trig, index, action.verify, ctx, role):
                    return False
            rt.emit("action_ok", trig.id, action_index=index, detail=detail)
            return True
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # fail-open
            rt.emit("action_failed", trig.id, action_index=index,
                    detail=(str(exc) or type(exc).__name__)[:300], **named)
            return False

    async def _run_nl(self, trig: TriggerRecord, index: int, action: Any, ctx: dict | None, named: dict) -> bool:
        rt = self._rt
        executor = rt.executors.get(action.executor)
        if executor is None:
            rt.emit("action_failed", trig.id, action_index=index, detail="no executor is registered", **named)
            return False
        hours = executor.get("hours")
        if hours is not None:
            now = rt.virtual_now()
            opens = next_opening(now, hours) if now is not None else None
            if opens is not None:
                rt.emit("deferred", trig.id, action_index=index, until=iso(opens), **named)
                await self._time.park(trig, Timer(hours=hours))
        target = {**executor, "name": action.executor}
        cause = {"trigger_id": trig.id, "action_index": index, "fire": trig.attempts}
        causes = rt.in_flight.setdefault(executor["role"], [])
        causes.append(cause)
        instruction = action.instruction
        try:
            for attempt in (1, 2):
                reply = await rt.actions.send_nl(target, instruction, f"trigger-{trig.id}")
                if reply is None:
                    rt.emit("action_failed", trig.id, action_index=index,
                            detail=f"executor attempt {attempt} did not complete", **named)
                    return False
                if action.verify is None:
                    return True
                if await self._verify(trig, index, action.verify, ctx, None):
                    return True
                instruction = action.instruction + VERIFY_RETRY_SUFFIX
        finally:
            if cause in causes:
                causes.remove(cause)
        rt.emit("action_failed", trig.id, action_index=index, detail="verification failed after retry", **named)
        return False

    async def _verify(self, trig: TriggerRecord, index: int, check: Any, ctx: dict | None, role: str | None) -> bool:
        if await self.run_check(check, ctx, role):
            self._rt.emit("verify_ok", trig.id, action_index=index)
            return True
        self._rt.emit("verify_failed", trig.id, action_index=index)
        return False

    async def run_check(self, check: Any, ctx: dict | None = None, role: str | None = None) -> bool:
        """Run a check's steps as internal calls. A step whose call errors, whose bound value is
        empty or whose predicate fails makes it false; an unreadable extract path raises."""
        bindings: dict[str, Any] = {}
        for step in check.steps:
            result = await self._rt.actions.call_tool(step.tool, render(step.args, bindings, ctx), role)
            if result_is_error(result):
                return False
            value = apply_extract(step.extract, result_data(result), result_text(result))
            if step.bind is not None:
                if is_empty(value):
                    return False
                bindings[step.bind] = value
            if step.predicate is not None and not holds(step.predicate, value):
                return False
        return True
