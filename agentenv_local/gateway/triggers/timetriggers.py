"""Time on the engine's side: the elapsed virtual time delays are measured in, parked actions
(a delay, an executor's closed working hours) and time triggers (``at``, ``every``, ``after`` an
anchor, ``until``/``count``), whose due marks become fires."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from .models import ExpDist
from .records import Timer, TriggerRecord, seed_every
from .runtime import EngineRuntime
from .timeutil import duration_seconds, iso, next_opening, resolve_mark, shift

MAX_CATCHUP = 1000


class TimeTriggers:
    """Reads the clock for the engine: releases parked actions that are due and fires the time
    triggers whose marks have passed (through ``start_run``, which runs a trigger's jobs)."""

    def __init__(self, rt: EngineRuntime, start_run: Callable[[TriggerRecord], asyncio.Task]):
        self._rt = rt
        self._start_run = start_run

    # -- elapsed time and parked actions -------------------------------------------------------

    def observe(self) -> datetime | None:
        """Fold the time since the last look into the engine's elapsed time, release the timers that
        are due, and answer virtual now (None when unarmed)."""
        rt = self._rt
        now = rt.virtual_now()
        real = time.monotonic()
        if now is not None and rt.last_virtual is not None:
            rt.elapsed += max(0.0, (now - rt.last_virtual).total_seconds())
        elif now is None and rt.last_virtual is None:
            rt.elapsed += max(0.0, real - rt.last_real)
        rt.last_virtual, rt.last_real = now, real
        for timer in list(rt.timers):
            if timer.future is not None and not timer.future.done() and self.timer_ready(timer, now):
                timer.future.set_result(None)
        return now

    def timer_ready(self, timer: Timer, now: datetime | None) -> bool:
        if timer.hours is not None:
            return now is None or next_opening(now, timer.hours) is None
        assert timer.due is not None
        return self._rt.elapsed >= timer.due - 1e-9

    async def wait_delay(self, trig: TriggerRecord, job: dict, index: int, delay: Any, named: dict) -> None:
        key = str(index)
        if key not in job["delays"]:
            if isinstance(delay, ExpDist):
                seconds = trig.delay_rngs[index].expovariate(1.0 / duration_seconds(delay.mean))
            else:
                seconds = duration_seconds(delay)
            job["delays"][key] = job["since"] + seconds
            self._rt.emit("delayed", trig.id, action_index=index, virtual_seconds=round(seconds, 3), **named)
        await self.park(trig, Timer(due=job["delays"][key]))

    async def park(self, trig: TriggerRecord, timer: Timer) -> None:
        rt = self._rt
        now = self.observe()
        if self.timer_ready(timer, now):
            return
        timer.future = asyncio.get_running_loop().create_future()
        rt.timers.append(timer)
        task = asyncio.current_task()
        if task is not None:
            rt.parked[task] = timer
        trig.waiting = True
        rt.signal_progress()
        try:
            await timer.future
        finally:
            trig.waiting = False
            if task is not None:
                rt.parked.pop(task, None)
            if timer in rt.timers:
                rt.timers.remove(timer)

    def driver_sleep(self, interval: float) -> float:
        """How long the driver may sleep: ``interval``, or less when a mark or delay falls due
        sooner on a clock that advances with real time (at its ``rate``)."""
        rate = getattr(self._rt.clock, "rate", None)
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or rate <= 0:
            return interval
        rt = self._rt
        gaps = [timer.due - rt.elapsed for timer in rt.timers if timer.due is not None]
        now = rt.virtual_now()
        if now is not None:
            gaps.extend((trig.next_mark - now).total_seconds() for trig in rt.triggers.values()
                        if trig.type == "time" and trig.status == "armed" and trig.next_mark is not None)
        if not gaps:
            return interval
        return max(0.001, min(interval, min(gaps) / rate))

    # -- time triggers --------------------------------------------------------------------------

    def eval_time(self, now: datetime) -> None:
        rt = self._rt
        key = rt.anchor_key()
        for trig in list(rt.triggers.values()):
            if trig.type != "time" or trig.status != "armed":
                continue
            when = trig.time_when
            if when.after is None and trig.resolved and trig.anchor_key != key:
                # Re-armed: the old mark (and any backlog) was on a timeline the clock left.
                generation = getattr(rt.clock, "generation", None)
                rt.emit("reanchored", trig.id, generation=generation if isinstance(generation, int) else None,
                        dropped_mark=iso(trig.next_mark) if trig.next_mark is not None else None)
                trig.resolved = False
                trig.next_mark = None
                seed_every(trig, rt.seed)  # the new timeline draws the same sequence again
            if not trig.resolved:
                self._first_mark(trig, key)
            if trig.next_mark is None or now < trig.next_mark:
                continue
            marks, capped, terminated = self._due_marks(trig, now)
            if marks:
                self._fire_marks(trig, marks, capped, terminated, now)
            elif terminated:
                trig.status = "fired"
                trig.next_mark = None
                rt.changed()

    def arm(self, trig: TriggerRecord) -> None:
        """Resolve a newly registered time trigger's first mark now, so the state a client reads right after its
        registration shows it (it was left to the driver's next tick, up to a second later; firing still is)."""
        if trig.type == "time" and trig.status == "armed" and not trig.resolved:
            self._first_mark(trig, self._rt.anchor_key())

    def _first_mark(self, trig: TriggerRecord, key: str | None) -> None:
        when = trig.time_when
        if when.after is not None:
            return  # stamped when its anchor fires
        t0 = self._rt.t0()
        if t0 is None:
            return
        if when.at is not None:
            trig.next_mark = resolve_mark(when.at, t0)
        else:
            trig.next_mark = shift(t0, self._interval(trig))
        trig.resolved = True
        trig.anchor_key = key

    @staticmethod
    def _interval(trig: TriggerRecord) -> float:
        every = trig.time_when.every
        if isinstance(every, ExpDist):
            assert trig.rng is not None
            return trig.rng.expovariate(1.0 / duration_seconds(every.mean))
        return duration_seconds(every)

    def _due_marks(self, trig: TriggerRecord, now: datetime) -> tuple[list[datetime], bool, bool]:
        """The marks due at ``now`` (at most MAX_CATCHUP; a longer backlog drains on later looks),
        advancing next_mark past them. Answers (marks, capped, terminated)."""
        when = trig.time_when
        recurring = when.every is not None
        until = resolve_mark(when.until, self._rt.t0() or now) if when.until is not None else None
        marks: list[datetime] = []
        capped = terminated = False
        while trig.next_mark is not None and now >= trig.next_mark:
            if until is not None and trig.next_mark > until:
                trig.next_mark, terminated = None, True
                break
            marks.append(trig.next_mark)
            if not recurring or (when.count is not None and trig.fire_count + len(marks) >= when.count):
                trig.next_mark, terminated = None, True
                break
            previous = trig.next_mark
            trig.next_mark = shift(previous, self._interval(trig))
            if trig.next_mark <= previous:  # saturated at the end of time
                trig.next_mark, terminated = None, True
                break
            if len(marks) >= MAX_CATCHUP:
                capped = True
                break
        return marks, capped, terminated

    def _fire_marks(self, trig: TriggerRecord, marks: list[datetime], capped: bool, terminated: bool,
                    now: datetime) -> None:
        rt = self._rt
        trig.status = "firing"
        trig.detected_at = rt.wall()
        trig.retiring = terminated
        provoking = {"source": "clock"}
        rt.emit("detected", trig.id, provoking=provoking, due=len(marks), capped=capped,
                first_mark=iso(marks[0]), last_mark=iso(marks[-1]))
        jobs = []
        for mark in marks:
            job = rt.new_job(None, provoking, mark=iso(mark), capped=capped)
            # A mark's delay runs from the mark, so a backlog doesn't push each reply back further.
            job["since"] = rt.elapsed - max(0.0, (now - mark).total_seconds())
            jobs.append(job)
        trig.job = jobs[0]
        trig.pending.extend(jobs[1:])
        trig.task = self._start_run(trig)

    def anchor_dependents(self, anchor_id: str) -> None:
        """Stamp the mark (virtual now + offset) of each `after` trigger waiting on ``anchor_id``."""
        rt = self._rt
        now = rt.virtual_now()
        if now is None:
            return
        for trig in rt.triggers.values():
            when = trig.time_when
            if trig.type != "time" or when.after != anchor_id or trig.resolved or trig.status != "armed":
                continue
            trig.next_mark = shift(now, duration_seconds(when.offset))
            trig.resolved = True
            trig.anchor_key = rt.anchor_key()
            rt.emit("anchored", trig.id, anchor=anchor_id, mark=iso(trig.next_mark))
