"""What every part of one trigger engine shares: its host (clock, actions, callbacks), the
registered triggers and config, the elapsed time and parked timers, the event log and the running
tasks; with the small services they all use (reading the clock, emitting events, spawning tasks)."""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections import deque
from collections.abc import Callable
from datetime import datetime
from typing import Any

from .host import ActionRunner, ClockLike
from .records import Timer, TriggerRecord
from .timeutil import iso, wall_now

logger = logging.getLogger(__name__)

EVENT_KINDS = frozenset({
    "added", "removed",             # registration
    "detected",                     # a trigger's condition matched (or a time mark came due)
    "anchored", "reanchored",       # an `after` mark was stamped / a clock re-arm dropped a mark
    "action_ok", "action_failed",   # one action of a fire
    "verify_ok", "verify_failed",   # an action's verify check
    "fired", "failed", "eval_error",
    "delayed", "deferred",          # an action waits out its delay / its executor's working hours
    "cancelled",                    # a deadline's `unless` call came first
})
FAILURE_KINDS = ("failed", "eval_error")
EVENTS_HEAD = 1000
EVENTS_TAIL = 9000


def _wall() -> str:
    return wall_now().isoformat()


class EngineRuntime:
    """The shared state of one engine. Its parts (registration, detection, time triggers, firing,
    persistence) read and change it; none of them holds state of its own."""

    def __init__(
        self,
        clock: ClockLike,
        actions: ActionRunner,
        *,
        seed: int,
        on_event: Callable[[dict], Any] | None,
        on_change: Callable[[], Any] | None,
        wall_clock: Callable[[], str] | None,
    ):
        self.clock = clock
        self.actions = actions
        self.seed = seed
        self.on_event = on_event
        self.on_change = on_change
        self.wall = wall_clock or _wall
        self.watch_roles: set[str] = set()
        self.config_set = False
        self.executors: dict[str | None, dict] = {}
        self.triggers: dict[str, TriggerRecord] = {}
        self.ids_issued = 0
        self.events: list[dict] = []
        self.events_tail: deque = deque(maxlen=EVENTS_TAIL)
        self.seq = 0
        self.in_flight: dict[str, list[dict]] = {}
        # Virtual seconds lived, as observed (forward moves of the clock, a re-arm forward included;
        # real time while unarmed): what delays are measured in.
        self.elapsed = 0.0
        self.last_virtual: datetime | None = self.virtual_now()
        self.last_real = time.monotonic()
        self.timers: list[Timer] = []
        self.tasks: set[asyncio.Task] = set()
        self.parked: dict[asyncio.Task, Timer] = {}
        self.progress: asyncio.Event | None = None  # made in the loop that first waits on it
        self.progress_loop: asyncio.AbstractEventLoop | None = None
        self.closing = False

    # -- the clock ------------------------------------------------------------------------------

    def clock_armed(self) -> bool:
        armed = getattr(self.clock, "armed", False)
        return bool(armed() if callable(armed) else armed)

    def virtual_now(self) -> datetime | None:
        try:
            if not self.clock_armed():
                return None
            return self.clock.now()
        except Exception:  # fail-open
            return None

    def t0(self) -> datetime | None:
        t0 = getattr(self.clock, "t0", None)
        return t0() if callable(t0) else t0

    def anchor_key(self) -> str | None:
        generation = getattr(self.clock, "generation", None)
        if callable(generation):
            generation = generation()
        if generation is not None:
            return f"generation:{generation}"
        t0 = self.t0()
        return None if t0 is None else f"t0:{iso(t0)}"

    def new_job(self, ctx: dict | None, provoking: dict, **extra: Any) -> dict:
        # A delay runs from the provoking call, not from when its turn comes.
        return {"ctx": ctx, "provoking": provoking, "since": self.elapsed, "index": 0, "delays": {},
                "started": False, **extra}

    # -- events ---------------------------------------------------------------------------------

    def emit(self, kind: str, trigger_id: str | None, **payload: Any) -> dict:
        assert kind in EVENT_KINDS, f"unknown trigger event kind {kind!r}"
        self.seq += 1
        wall = self.wall()
        virtual = self.virtual_now()
        event: dict[str, Any] = {"seq": self.seq, "ts": wall, "at": wall}
        if virtual is not None:
            event["virtual_time"] = iso(virtual)
        event["kind"] = kind
        if trigger_id:
            event["trigger_id"] = trigger_id
        event.update(payload)
        (self.events if len(self.events) < EVENTS_HEAD else self.events_tail).append(event)
        if kind in FAILURE_KINDS and trigger_id:
            trig = self.triggers.get(trigger_id)
            if trig is not None:
                trig.failure_count += 1
                trig.last_failure_at = wall
        logger.debug("trigger event %s", event)
        self.changed()
        return event

    async def trajectory(self, event: dict) -> None:
        if self.on_event is None:
            return
        try:
            outcome = self.on_event(event)
            if inspect.isawaitable(outcome):
                await outcome
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("trajectory callback failed for %s", event.get("event_type"))

    def changed(self) -> None:
        if self.on_change is None:
            return
        try:
            self.on_change()
        except Exception:
            logger.exception("trigger on_change callback failed")

    # -- tasks ----------------------------------------------------------------------------------

    def spawn(self, coro: Any, name: str) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self.tasks.add(task)

        def done(t: asyncio.Task) -> None:
            self.tasks.discard(t)
            self.parked.pop(t, None)
            self.signal_progress()
            if not t.cancelled() and t.exception() is not None:
                logger.error("trigger task %s failed", t.get_name(), exc_info=t.exception())

        task.add_done_callback(done)
        return task

    def progress_event(self) -> asyncio.Event:
        loop = asyncio.get_running_loop()
        if self.progress is None or self.progress_loop is not loop:
            self.progress, self.progress_loop = asyncio.Event(), loop
        return self.progress

    def signal_progress(self) -> None:
        if self.progress is not None:
            self.progress.set()

    def busy(self) -> list[asyncio.Task]:
        # A parked task whose timer was released is about to run again: it counts as busy.
        return [t for t in self.tasks if not t.done()
                and (t not in self.parked or (f := self.parked[t].future) is None or f.done())]
