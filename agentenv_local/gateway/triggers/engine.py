"""The trigger engine (``urn:agentenv:triggers/v1``): registration, the state the gateway reads,
and the hooks it calls.

Transport-free: the gateway hands it every proxied tool call (:meth:`TriggerEngine.on_tool_call`),
ticks it (:meth:`TriggerEngine.tick`, or runs :meth:`TriggerEngine.run_driver`), and implements
:class:`ActionRunner` for what actions do (internal tool calls, RBAC changes, messages to an A2A
executor). Time comes only from the injected clock: delays, working hours and time triggers run on
virtual time, and every random draw comes from a generator seeded by the engine's seed and the
trigger's id, so a run replays the same way.

Firing is fail-open: an action that fails is recorded (``action_failed`` then ``failed``) and the
trigger re-arms (action and state triggers) or retires (time triggers); nothing is raised into the
provoking call.

The engine's parts share one :class:`~.runtime.EngineRuntime` (the state): :mod:`.detection`
(which triggers a call provokes), :mod:`.timetriggers` (elapsed time, parked actions, time
triggers), :mod:`.firing` (running fires and checks) and :mod:`.persistence` (the stored state).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable
from typing import Any

from .detection import Detection
from .firing import Firing
from .host import ActionRunner, ClockLike
from .models import parse_spec
from .persistence import check_version, dump_state, load_state
from .records import TriggerRecord, seed_rngs
from .runtime import EngineRuntime
from .spec import (
    DEFAULT_ROLE,
    TriggerError,
    normalize_executor,
    normalize_trigger,
    normalize_watch_roles,
    tools_named,
    when_summary,
)
from .timetriggers import TimeTriggers
from .timeutil import iso

logger = logging.getLogger(__name__)

DEFAULT_BARRIER_TIMEOUT = 30.0


class TriggerEngine:
    """Env triggers for one gateway. See ``docs/environments/triggers.md``."""

    def __init__(
        self,
        clock: ClockLike,
        actions: ActionRunner,
        *,
        seed: int = 0,
        known_tools: Callable[[], set[str] | None] | None = None,
        on_event: Callable[[dict], Any] | None = None,
        on_change: Callable[[], Any] | None = None,
        barrier_timeout: float = DEFAULT_BARRIER_TIMEOUT,
        wall_clock: Callable[[], str] | None = None,
    ):
        self._rt = EngineRuntime(clock, actions, seed=seed, on_event=on_event, on_change=on_change,
                                 wall_clock=wall_clock)
        self._known_tools = known_tools
        # Time triggers start fires and fires wait on time: the callback breaks the cycle.
        self._time = TimeTriggers(self._rt, start_run=lambda trig: self._firing.start(trig))
        self._firing = Firing(self._rt, self._time)
        self._detection = Detection(self._rt, self._firing, barrier_timeout)

    # -- registration ---------------------------------------------------------------------------

    def register(self, body: Any) -> dict:
        """Add triggers (``POST /triggers/register``). Additive and idempotent per id; every
        trigger is validated before any is added. Answers ``{ok, added, all}``."""
        if not isinstance(body, dict):
            raise TriggerError("body must be a JSON object")
        watch_roles = self._resolve_watch_roles(body)
        executors = self._resolve_executors(body, watch_roles)
        triggers = body.get("triggers")
        if not isinstance(triggers, list):
            raise TriggerError("triggers must be a list")
        known = self._known_tools() if self._known_tools is not None else None
        issued = self._rt.ids_issued
        order: list[str] = []
        to_add: list[dict] = []
        for raw in triggers:
            if not isinstance(raw, dict):
                raise TriggerError("every trigger needs a non-empty string id")
            raw = dict(raw)
            if raw.get("id") is None:
                raw["id"], issued = self._new_id(issued)
            tid = raw["id"]
            if not isinstance(tid, str) or not tid:
                raise TriggerError("every trigger needs a non-empty string id")
            if tid in order:
                raise TriggerError(f"trigger '{tid}': duplicate id")
            order.append(tid)
            spec = normalize_trigger(raw, executors)
            if known:
                for tool, where in tools_named(spec):
                    if tool not in known:
                        raise TriggerError(f"trigger '{tid}': {where} names unknown tool {tool!r}")
            existing = self._rt.triggers.get(tid)
            if existing is not None:
                if existing.raw != spec:
                    raise TriggerError(f"trigger '{tid}': already registered with a different spec — remove it "
                                       "first or use a new id")
                continue
            to_add.append(spec)
        models = [parse_spec(spec) for spec in to_add]
        self._rt.ids_issued = issued
        self._rt.watch_roles = watch_roles
        self._rt.executors = executors
        self._rt.config_set = True
        for spec, model in zip(to_add, models):
            trig = TriggerRecord(id=spec["id"], raw=spec, spec=model)
            seed_rngs(trig, self._rt.seed)
            self._rt.triggers[trig.id] = trig
            self._rt.emit("added", trig.id)
            self._time.arm(trig)
        self._rt.changed()
        return {"ok": True, "added": order, "all": list(self._rt.triggers)}

    def _new_id(self, issued: int) -> tuple[str, int]:
        while True:
            issued += 1
            digest = hashlib.blake2b(f"{self._rt.seed}:{issued}".encode(), digest_size=6).hexdigest()
            tid = f"trg_{digest}"
            if tid not in self._rt.triggers:
                return tid, issued

    def _resolve_watch_roles(self, body: dict) -> set[str]:
        raw = body.get("watch_roles")
        if raw is None:
            return set(self._rt.watch_roles) if self._rt.config_set else {DEFAULT_ROLE}
        roles = normalize_watch_roles(raw)
        if self._rt.config_set and roles != self._rt.watch_roles:
            raise TriggerError(f"watch_roles {sorted(roles)} conflicts with the already-registered "
                               f"{sorted(self._rt.watch_roles)} — clear to change it")
        return roles

    def _resolve_executors(self, body: dict, watch_roles: set[str]) -> dict[str | None, dict]:
        named = body.get("executors")
        if named is not None and (not isinstance(named, dict)
                                  or not all(isinstance(n, str) and n for n in named)):
            raise TriggerError("executors must be an object keyed by non-empty executor names")
        incoming: dict[str | None, Any] = {}
        if body.get("executor") is not None:
            incoming[None] = body["executor"]
        incoming.update(named or {})
        merged = dict(self._rt.executors)
        for name, raw in incoming.items():
            where = "executor" if name is None else f"executors[{name!r}]"
            executor = normalize_executor(raw, where, watch_roles)
            if name in merged and merged[name] != executor:
                if name is None:
                    raise TriggerError("executor conflicts with the already-registered executor — clear to change it")
                raise TriggerError(f"executor {name!r} conflicts with the already-registered executor of that name "
                                   "— clear to change it")
            merged[name] = executor
        return merged

    def remove(self, body: Any) -> dict:
        """Remove triggers by id (``POST /triggers/remove`` ``{ids}``; a bare list works too).
        Unknown ids are ignored; a fire in progress is stopped. Answers ``{ok, removed}``."""
        if not isinstance(body, (dict, list)):
            raise TriggerError("body must be a JSON object")
        ids = body.get("ids") if isinstance(body, dict) else body
        if not isinstance(ids, list) or not all(isinstance(i, str) and i for i in ids):
            raise TriggerError("ids must be a list of non-empty strings")
        removed = []
        for tid in ids:
            trig = self._rt.triggers.pop(tid, None)
            if trig is None:
                continue
            for task in (trig.task, trig.eval_task):
                if task is not None:
                    task.cancel()
            removed.append(tid)
            self._rt.emit("removed", tid)
        self._rt.changed()
        return {"ok": True, "removed": removed}

    def clear(self) -> dict:
        """Forget every trigger, the config (watch_roles, executors) and the event log
        (``POST /triggers/clear``): for setup between tasks, never mid-task."""
        for task in list(self._rt.tasks):
            task.cancel()
        self._rt.triggers = {}
        self._rt.events = []
        self._rt.events_tail.clear()
        self._rt.seq = 0
        self._rt.watch_roles = set()
        self._rt.executors = {}
        self._rt.config_set = False
        self._rt.in_flight = {}
        self._rt.timers = []
        self._rt.changed()
        return {"ok": True}

    # -- reading --------------------------------------------------------------------------------

    def state(self) -> dict:
        """``GET /triggers/state``."""
        events = self._rt.events + list(self._rt.events_tail)
        return {
            "config": {
                "watch_roles": sorted(self._rt.watch_roles),
                "executor_configured": None in self._rt.executors,
                "executors": sorted(n for n in self._rt.executors if n is not None),
            },
            "triggers": [
                {
                    "id": trig.id,
                    "type": trig.type,
                    "when": when_summary(trig.raw),
                    "status": trig.status,
                    "detected_at": trig.detected_at,
                    "fired_at": trig.fired_at,
                    "fire_count": trig.fire_count,
                    "failure_count": trig.failure_count,
                    "last_failure_at": trig.last_failure_at,
                    "barrier": trig.raw.get("barrier"),
                    "pending": len(trig.pending),
                    "waiting": trig.waiting,
                    "next_mark": iso(trig.next_mark) if trig.next_mark is not None else None,
                }
                for trig in self._rt.triggers.values()
            ],
            "events": events,
            "events_dropped": max(0, self._rt.seq - len(events)),
        }

    def idle(self) -> bool:
        """No trigger registered and no timer pending: a tool call has nothing to evaluate (the gateway's hot
        path may then answer it before :meth:`on_tool_call`, which would do nothing)."""
        return not self._rt.triggers and not self._rt.timers

    def statuses(self) -> dict[str, str]:
        """``{trigger id: status}``, for what waits on a trigger (``await_fired``, agent triggers)."""
        return {tid: trig.status for tid, trig in self._rt.triggers.items()}

    def caused_by(self, role: str) -> list[dict]:
        """The nl fires in flight whose executor has ``role``: its tool calls are attributed to them."""
        return [dict(cause) for cause in self._rt.in_flight.get(role, ())]

    # -- hooks the gateway calls ----------------------------------------------------------------

    async def on_tool_call(self, tool: str, args: Any, result: Any, role: str | None) -> None:
        """After a proxied tool call, before its response goes out. Evaluates time triggers (a tool
        call is a clock tick), cancels deadlines the call answers, detects action triggers and
        schedules state re-evaluation (unless the tool is read-only). Returns once the fires that a
        ``barrier`` holds this call for have finished (or their timeout passed); the rest run on."""
        await self.tick()
        held, timeout = self._detection.on_call(tool, args, result, role)
        if held:
            _done, late = await asyncio.wait(held, timeout=timeout)
            if late:
                await self._rt.trajectory({
                    "event_type": "trigger_barrier_timeout", "source": "trigger_engine",
                    "trigger_ids": sorted({t.get_name() for t in late}), "timeout_seconds": timeout,
                    "provoking_tool": tool,
                })

    async def tick(self) -> None:
        """Look at the clock: release delays and working-hours waits that are due and fire the time
        triggers whose marks have passed. The gateway calls this from its driver and may call it
        on each tool call (:meth:`on_tool_call` does it too)."""
        self._firing.resume()
        now = self._time.observe()
        if now is not None:
            self._time.eval_time(now)

    async def run_driver(self, interval: float = 1.0) -> None:
        """Tick forever, every ``interval`` real seconds at most (sooner when a mark or delay falls
        due earlier on a clock that advances with real time). Run it as a task; cancel to stop."""
        while True:
            await asyncio.sleep(self._driver_sleep(interval))
            try:
                await self.tick()
            except Exception:
                logger.exception("trigger driver tick failed")

    def _driver_sleep(self, interval: float) -> float:
        return self._time.driver_sleep(interval)

    async def drain(self, timeout: float | None = None) -> None:
        """Wait until no trigger work can make progress without the clock moving: every fire,
        state evaluation and action has finished or is parked on a delay or working hours. Ticks
        first, so after advancing a clock ``await engine.drain()`` runs what came due."""
        rt = self._rt

        async def settle() -> None:
            while True:
                await self.tick()
                busy = rt.busy()
                if not busy:
                    await asyncio.sleep(0)
                    busy = rt.busy()
                    if not busy:
                        return
                progress = rt.progress_event()
                progress.clear()
                waiter = asyncio.ensure_future(progress.wait())
                try:
                    await asyncio.wait([*busy, waiter], return_when=asyncio.FIRST_COMPLETED)
                finally:
                    waiter.cancel()

        if timeout is None:
            await settle()
        else:
            await asyncio.wait_for(settle(), timeout)

    async def aclose(self) -> None:
        """Stop all trigger work (gateway shutdown). Fires in progress keep their place in
        :meth:`to_dict`, so an engine restored from it resumes them."""
        rt = self._rt
        rt.closing = True
        tasks = list(rt.tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        rt.tasks.clear()
        rt.parked.clear()
        rt.timers = []
        for trig in rt.triggers.values():
            trig.task = None
            trig.eval_task = None
            trig.evaluating = False
            trig.waiting = False
        rt.closing = False

    # -- persistence ----------------------------------------------------------------------------

    def to_dict(self) -> dict:
        """JSON-ready state for the store: config, triggers with their statuses, counters, marks and
        fires in progress (a delayed action keeps what is left of its delay), and the event log."""
        return dump_state(self._rt)

    @classmethod
    def from_dict(cls, data: dict, clock: ClockLike, actions: ActionRunner, **options: Any) -> TriggerEngine:
        """An engine restored from :meth:`to_dict`. Fires that were in progress resume on the first
        hook call (:meth:`tick`, :meth:`on_tool_call`, :meth:`drain`); an action that was running when
        the state was saved runs again."""
        try:
            check_version(data)
            options.setdefault("seed", data.get("seed", 0))
            engine = cls(clock, actions, **options)
            load_state(engine._rt, data)
        except TriggerError:
            raise
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise TriggerError(f"can't restore the trigger engine from its stored state: {exc}", 500) from None
        return engine
