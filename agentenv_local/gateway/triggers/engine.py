"""The trigger engine (``urn:agentenv:triggers/v1``): detection, firing, scheduling, the event log.

Transport-free: the gateway hands it every proxied tool call (:meth:`TriggerEngine.on_tool_call`),
ticks it (:meth:`TriggerEngine.tick`, or runs :meth:`TriggerEngine.run_driver`), and implements
:class:`ActionRunner` for what actions do (internal tool calls, RBAC changes, messages to an A2A
executor). Time comes only from the injected clock: delays, working hours and time triggers run on
virtual time, and every random draw comes from a generator seeded by the engine's seed and the
trigger's id, so a run replays the same way.

Firing is fail-open: an action that fails is recorded (``action_failed`` then ``failed``) and the
trigger re-arms (action and state triggers) or retires (time triggers); nothing is raised into the
provoking call.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import inspect
import json
import logging
import random
import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, cast

from .predicates import extract as apply_extract
from .predicates import holds, is_empty, where_holds
from .spec import (
    DEFAULT_ROLE,
    ActionWhen,
    ExpDist,
    StateWhen,
    TimeWhen,
    TriggerError,
    TriggerSpec,
    normalize_executor,
    normalize_trigger,
    normalize_watch_roles,
    parse_spec,
    tools_named,
    when_summary,
)
from .templating import TemplateError, render
from .timeutil import duration_seconds, iso, next_opening, resolve_mark, shift, wall_now

logger = logging.getLogger(__name__)

STATUSES = ("armed", "firing", "queued", "fired", "failed", "cancelled")
IN_FLIGHT = ("firing", "queued")
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
MAX_CATCHUP = 1000
EVENTS_HEAD = 1000
EVENTS_TAIL = 9000
DEFAULT_BARRIER_TIMEOUT = 30.0
VERIFY_RETRY_SUFFIX = ("\n\nThe previous attempt did not pass verification: the change it should have made "
                       "can't be seen in the environment. Do it again, exactly as described.")
STATE_VERSION = 1

# Trajectory-safe echo of a tool action's arguments: identifier and metadata keys pass through,
# every other value becomes the shape of what it was.
_ECHO_KEYS = frozenset({"action", "createdTime", "fileName", "kind", "mimeType", "modifiedTime", "name", "role",
                        "title", "type"})
_ECHO_ID = re.compile(r"(?:^id|Id|_id)$")
_ECHO_VALUE_MAX = 200
_DIGEST_CHARS = 16


# -- what the engine needs from its host ----------------------------------------------------------


class ClockLike(Protocol):
    """The virtual clock, as the engine reads it (``agentenv_local.gateway.clock.VirtualClock`` is one)."""

    @property
    def armed(self) -> bool: ...

    @property
    def t0(self) -> datetime | None: ...

    def now(self) -> datetime:
        """Virtual now (aware UTC); raises when the clock is not armed."""
        ...


class ActionRunner(Protocol):
    """What trigger actions do, implemented by the gateway."""

    async def call_tool(self, tool: str, args: dict, role: str | None) -> Any:
        """An internal tool call (``role`` None: the engine's own identity; else a tool action's
        ``as``). Answers an MCP ``CallToolResult`` (a dict or the mcp type) with ``isError``,
        ``content`` and ``structuredContent``. Raise for an unknown tool. Internal calls must not be
        fed back to :meth:`TriggerEngine.on_tool_call` (an action never provokes a trigger); the
        reference sends them straight to the child session, past RBAC."""
        ...

    async def set_permission(self, action: str, role: str, tools: list[str] | str) -> Any:
        """An RBAC change: ``action`` is enable|disable, ``tools`` a list or ``"*"``."""
        ...

    async def send_nl(self, executor: dict, instruction: str, context_id: str) -> str | None:
        """Send ``instruction`` to the A2A executor (``{a2a_url, role, timeout_seconds, name}``) in
        context ``context_id`` and wait for its reply; None (or raising) when it did not complete."""
        ...

    def read_only(self, tool: str) -> bool:
        """Whether ``tool`` advertises ``readOnlyHint`` (its calls don't re-evaluate state triggers)."""
        ...


# -- tool results ---------------------------------------------------------------------------------


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def result_is_error(result: Any) -> bool:
    return bool(_get(result, "isError", False))


def result_text(result: Any) -> str:
    parts = []
    for item in _get(result, "content", None) or []:
        if _get(item, "type") == "text":
            parts.append(_get(item, "text", "") or "")
    return "\n".join(parts)


def _parse_json(text: str) -> tuple[bool, Any]:
    if not text:
        return False, None
    try:
        return True, json.loads(text)
    except (ValueError, TypeError):
        return False, None


def result_data(result: Any) -> Any:
    """What a check step's ``extract`` path reads: the text content parsed as JSON, else the
    structured content, else None."""
    ok, data = _parse_json(result_text(result))
    return data if ok else _get(result, "structuredContent", None)


def call_value(result: Any) -> Any:
    """What ``result.*`` reads on a provoking call: the text content parsed as JSON, the raw text
    when it isn't JSON, the structured content when there is no text."""
    text = result_text(result)
    ok, data = _parse_json(text)
    if ok:
        return data
    if text:
        return text
    return _get(result, "structuredContent", None)


def _shape(value: Any) -> dict:
    shape: dict[str, Any] = {"type": type(value).__name__}
    if isinstance(value, (str, bytes, list, dict)):
        shape["len"] = len(value)
    return {"redacted": shape}


def echo_args(value: Any, key: str | None = None) -> Any:
    """``value`` with every payload replaced by its shape (``{"redacted": {"type": "str", "len": 12}}``);
    identifier and metadata keys (``id``, ``*_id``, ``name``, ``title``, ...) pass through so a
    reader can see which object an action touched. Structure and argument names are kept."""
    if isinstance(value, dict):
        return {k: echo_args(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [echo_args(v, key) for v in value]
    echoable = key is not None and (key in _ECHO_KEYS or _ECHO_ID.search(key) is not None)
    if echoable and isinstance(value, (str, int, float, bool, type(None))):
        if isinstance(value, str) and len(value) > _ECHO_VALUE_MAX:
            return _shape(value)
        return value
    return _shape(value)


def _stable_rng(*parts: Any) -> random.Random:
    """A generator seeded from ``parts`` the same way in every process (never Python's ``hash()``)."""
    digest = hashlib.blake2b("\x1f".join(str(p) for p in parts).encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "big"))


def _rng_state(rng: random.Random | None) -> list | None:
    if rng is None:
        return None
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def _rng_from_state(state: list | None) -> random.Random | None:
    if state is None:
        return None
    rng = random.Random()
    rng.setstate((state[0], tuple(state[1]), state[2]))
    return rng


# -- runtime records ------------------------------------------------------------------------------


@dataclass
class _Trigger:
    id: str
    raw: dict                      # the canonical spec (compared on re-register, stored)
    spec: TriggerSpec
    status: str = "armed"
    detected_at: str | None = None
    fired_at: str | None = None
    fire_count: int = 0
    failure_count: int = 0
    last_failure_at: str | None = None
    attempts: int = 0
    # time triggers
    next_mark: datetime | None = None
    resolved: bool = False         # next_mark has been reckoned (on the clock arm `anchor_key` names)
    anchor_key: str | None = None
    retiring: bool = False         # the marks being fired are the last ones
    rng: random.Random | None = None
    delay_rngs: dict[int, random.Random] = field(default_factory=dict)
    # firing: the job being run and those waiting behind it
    job: dict | None = None
    pending: deque = field(default_factory=deque)
    task: asyncio.Task | None = None
    waiting: bool = False
    # state triggers
    evaluating: bool = False
    reeval: bool = False
    eval_task: asyncio.Task | None = None

    @property
    def type(self) -> str:
        return self.spec.when.type

    # ``spec.when`` typed for its kind; callers check ``type`` first.
    @property
    def action_when(self) -> ActionWhen:
        return cast(ActionWhen, self.spec.when)

    @property
    def state_when(self) -> StateWhen:
        return cast(StateWhen, self.spec.when)

    @property
    def time_when(self) -> TimeWhen:
        return cast(TimeWhen, self.spec.when)


@dataclass(eq=False)
class _Timer:
    """A parked action: until the engine's virtual elapsed time reaches ``due``, or (``hours``) until
    an executor's working hours are open."""

    due: float | None = None
    hours: dict | None = None
    future: asyncio.Future | None = None


def _wall() -> str:
    return wall_now().isoformat()


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
        self._clock = clock
        self._actions = actions
        self._seed = seed
        self._known_tools = known_tools
        self._on_event = on_event
        self._on_change = on_change
        self._barrier_timeout = barrier_timeout
        self._wall = wall_clock or _wall
        self._watch_roles: set[str] = set()
        self._config_set = False
        self._executors: dict[str | None, dict] = {}
        self._triggers: dict[str, _Trigger] = {}
        self._ids_issued = 0
        self._events: list[dict] = []
        self._events_tail: deque = deque(maxlen=EVENTS_TAIL)
        self._seq = 0
        self._in_flight: dict[str, list[dict]] = {}
        # Virtual seconds lived, as observed (forward moves of the clock, a re-arm forward included;
        # real time while unarmed): what delays are measured in.
        self._elapsed = 0.0
        self._last_virtual: datetime | None = self._virtual_now()
        self._last_real = time.monotonic()
        self._timers: list[_Timer] = []
        self._tasks: set[asyncio.Task] = set()
        self._parked: dict[asyncio.Task, _Timer] = {}
        self._progress: asyncio.Event | None = None  # made in the loop that first waits on it
        self._progress_loop: asyncio.AbstractEventLoop | None = None
        self._closing = False

    # -- the clock ------------------------------------------------------------------------------

    def _clock_armed(self) -> bool:
        armed = getattr(self._clock, "armed", False)
        return bool(armed() if callable(armed) else armed)

    def _virtual_now(self) -> datetime | None:
        try:
            if not self._clock_armed():
                return None
            return self._clock.now()
        except Exception:  # fail-open
            return None

    def _t0(self) -> datetime | None:
        t0 = getattr(self._clock, "t0", None)
        return t0() if callable(t0) else t0

    def _anchor_key(self) -> str | None:
        generation = getattr(self._clock, "generation", None)
        if callable(generation):
            generation = generation()
        if generation is not None:
            return f"generation:{generation}"
        t0 = self._t0()
        return None if t0 is None else f"t0:{iso(t0)}"

    def _observe(self) -> datetime | None:
        """Fold the time since the last look into the engine's elapsed time, release the timers that
        are due, and answer virtual now (None when unarmed)."""
        now = self._virtual_now()
        real = time.monotonic()
        if now is not None and self._last_virtual is not None:
            self._elapsed += max(0.0, (now - self._last_virtual).total_seconds())
        elif now is None and self._last_virtual is None:
            self._elapsed += max(0.0, real - self._last_real)
        self._last_virtual, self._last_real = now, real
        for timer in list(self._timers):
            if timer.future is not None and not timer.future.done() and self._timer_ready(timer, now):
                timer.future.set_result(None)
        return now

    def _timer_ready(self, timer: _Timer, now: datetime | None) -> bool:
        if timer.hours is not None:
            return now is None or next_opening(now, timer.hours) is None
        assert timer.due is not None
        return self._elapsed >= timer.due - 1e-9

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
        issued = self._ids_issued
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
            existing = self._triggers.get(tid)
            if existing is not None:
                if existing.raw != spec:
                    raise TriggerError(f"trigger '{tid}': already registered with a different spec — remove it "
                                       "first or use a new id")
                continue
            to_add.append(spec)
        models = [parse_spec(spec) for spec in to_add]
        self._ids_issued = issued
        self._watch_roles = watch_roles
        self._executors = executors
        self._config_set = True
        for spec, model in zip(to_add, models):
            trig = _Trigger(id=spec["id"], raw=spec, spec=model)
            self._seed_rngs(trig)
            self._triggers[trig.id] = trig
            self._emit("added", trig.id)
        self._changed()
        return {"ok": True, "added": order, "all": list(self._triggers)}

    def _new_id(self, issued: int) -> tuple[str, int]:
        while True:
            issued += 1
            digest = hashlib.blake2b(f"{self._seed}:{issued}".encode(), digest_size=6).hexdigest()
            tid = f"trg_{digest}"
            if tid not in self._triggers:
                return tid, issued

    def _seed_rngs(self, trig: _Trigger) -> None:
        self._seed_every(trig)
        trig.delay_rngs = {
            i: _stable_rng(self._seed, trig.id, "delay", i, action.delay.seed)
            for i, action in enumerate(trig.spec.actions) if isinstance(action.delay, ExpDist)
        }

    def _seed_every(self, trig: _Trigger) -> None:
        when = trig.spec.when
        if when.type == "time" and isinstance(when.every, ExpDist):
            trig.rng = _stable_rng(self._seed, trig.id, "every", when.seed)

    def _resolve_watch_roles(self, body: dict) -> set[str]:
        raw = body.get("watch_roles")
        if raw is None:
            return set(self._watch_roles) if self._config_set else {DEFAULT_ROLE}
        roles = normalize_watch_roles(raw)
        if self._config_set and roles != self._watch_roles:
            raise TriggerError(f"watch_roles {sorted(roles)} conflicts with the already-registered "
                               f"{sorted(self._watch_roles)} — clear to change it")
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
        merged = dict(self._executors)
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
            trig = self._triggers.pop(tid, None)
            if trig is None:
                continue
            for task in (trig.task, trig.eval_task):
                if task is not None:
                    task.cancel()
            removed.append(tid)
            self._emit("removed", tid)
        self._changed()
        return {"ok": True, "removed": removed}

    def clear(self) -> dict:
        """Forget every trigger, the config (watch_roles, executors) and the event log
        (``POST /triggers/clear``): for setup between tasks, never mid-task."""
        for task in list(self._tasks):
            task.cancel()
        self._triggers = {}
        self._events = []
        self._events_tail.clear()
        self._seq = 0
        self._watch_roles = set()
        self._executors = {}
        self._config_set = False
        self._in_flight = {}
        self._timers = []
        self._changed()
        return {"ok": True}

    # -- reading --------------------------------------------------------------------------------

    def state(self) -> dict:
        """``GET /triggers/state``."""
        events = self._events + list(self._events_tail)
        return {
            "config": {
                "watch_roles": sorted(self._watch_roles),
                "executor_configured": None in self._executors,
                "executors": sorted(n for n in self._executors if n is not None),
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
                for trig in self._triggers.values()
            ],
            "events": events,
            "events_dropped": max(0, self._seq - len(events)),
        }

    def idle(self) -> bool:
        """No trigger registered and no timer pending: a tool call has nothing to evaluate (the gateway's hot
        path may then answer it before :meth:`on_tool_call`, which would do nothing)."""
        return not self._triggers and not self._timers

    def statuses(self) -> dict[str, str]:
        """``{trigger id: status}``, for what waits on a trigger (``await_fired``, agent triggers)."""
        return {tid: trig.status for tid, trig in self._triggers.items()}

    def caused_by(self, role: str) -> list[dict]:
        """The nl fires in flight whose executor has ``role``: its tool calls are attributed to them."""
        return [dict(cause) for cause in self._in_flight.get(role, ())]

    # -- hooks the gateway calls ----------------------------------------------------------------

    async def on_tool_call(self, tool: str, args: Any, result: Any, role: str | None) -> None:
        """After a proxied tool call, before its response goes out. Evaluates time triggers (a tool
        call is a clock tick), cancels deadlines the call answers, detects action triggers and
        schedules state re-evaluation (unless the tool is read-only). Returns once the fires that a
        ``barrier`` holds this call for have finished (or their timeout passed); the rest run on."""
        self._resume()
        now = self._observe()
        if now is not None:
            self._eval_time(now)
        role = role or DEFAULT_ROLE
        provokable = [trig for trig in self._triggers.values() if self._provoked_by(trig, role)]
        if not provokable or result_is_error(result):
            return
        ctx = {"args": copy.deepcopy(args) if isinstance(args, dict) else {}, "result": call_value(result)}
        provoking = {"tool": tool, "role": role}
        # Deadlines first, so the call that sets off an anchor can't also be the one that cancels it.
        for trig in provokable:
            unless = getattr(trig.spec.when, "unless", None)
            if unless is None or unless.tool != tool or trig.status != "armed":
                continue
            after = trig.time_when.after
            if after is not None and not trig.resolved:
                anchor = self._triggers.get(after)
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
            task = self._start(trig, self._new_job(ctx, provoking))
            if trig.spec.barrier is not None and task is not None:
                if task not in held:
                    held.append(task)
                asked = trig.spec.barrier.timeout_seconds or self._barrier_timeout
                timeout = asked if timeout is None else max(timeout, asked)
        if not self._read_only(tool):
            for trig in provokable:
                if trig.type == "state" and trig.status == "armed":
                    self._schedule_state(trig, provoking)
        if held:
            _done, late = await asyncio.wait(held, timeout=timeout)
            if late:
                await self._trajectory({
                    "event_type": "trigger_barrier_timeout", "source": "trigger_engine",
                    "trigger_ids": sorted({t.get_name() for t in late}), "timeout_seconds": timeout,
                    "provoking_tool": tool,
                })

    async def tick(self) -> None:
        """Look at the clock: release delays and working-hours waits that are due and fire the time
        triggers whose marks have passed. The gateway calls this from its driver and may call it
        on each tool call (:meth:`on_tool_call` does it too)."""
        self._resume()
        now = self._observe()
        if now is not None:
            self._eval_time(now)

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
        rate = getattr(self._clock, "rate", None)
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or rate <= 0:
            return interval
        gaps = [timer.due - self._elapsed for timer in self._timers if timer.due is not None]
        now = self._virtual_now()
        if now is not None:
            gaps.extend((trig.next_mark - now).total_seconds() for trig in self._triggers.values()
                        if trig.type == "time" and trig.status == "armed" and trig.next_mark is not None)
        if not gaps:
            return interval
        return max(0.001, min(interval, min(gaps) / rate))

    async def drain(self, timeout: float | None = None) -> None:
        """Wait until no trigger work can make progress without the clock moving: every fire,
        state evaluation and action has finished or is parked on a delay or working hours. Ticks
        first, so after advancing a clock ``await engine.drain()`` runs what came due."""
        async def settle() -> None:
            while True:
                await self.tick()
                busy = self._busy()
                if not busy:
                    await asyncio.sleep(0)
                    busy = self._busy()
                    if not busy:
                        return
                progress = self._progress_event()
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

    def _progress_event(self) -> asyncio.Event:
        loop = asyncio.get_running_loop()
        if self._progress is None or self._progress_loop is not loop:
            self._progress, self._progress_loop = asyncio.Event(), loop
        return self._progress

    def _signal_progress(self) -> None:
        if self._progress is not None:
            self._progress.set()

    def _busy(self) -> list[asyncio.Task]:
        # A parked task whose timer was released is about to run again: it counts as busy.
        return [t for t in self._tasks if not t.done()
                and (t not in self._parked or (f := self._parked[t].future) is None or f.done())]

    async def aclose(self) -> None:
        """Stop all trigger work (gateway shutdown). Fires in progress keep their place in
        :meth:`to_dict`, so an engine restored from it resumes them."""
        self._closing = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        self._parked.clear()
        self._timers = []
        for trig in self._triggers.values():
            trig.task = None
            trig.eval_task = None
            trig.evaluating = False
            trig.waiting = False
        self._closing = False

    # -- detection ------------------------------------------------------------------------------

    def _provoked_by(self, trig: _Trigger, role: str) -> bool:
        """A call by ``role`` can provoke ``trig``: the roles its ``when`` (or a deadline's
        ``unless``) lists, else the watched roles other than the executors'."""
        when = trig.spec.when
        roles = getattr(when, "roles", None)
        unless = getattr(when, "unless", None)
        if roles is None and unless is not None:
            roles = unless.roles
        if roles is not None:
            return role in roles
        return role in self._watch_roles and role not in {e["role"] for e in self._executors.values()}

    def _read_only(self, tool: str) -> bool:
        try:
            return bool(self._actions.read_only(tool))
        except Exception:  # fail-open
            return False

    def _matches(self, trig: _Trigger, where: dict, ctx: dict) -> bool:
        try:
            return where_holds(where, ctx)
        except Exception as exc:  # fail-open
            self._emit("eval_error", trig.id, detail=(str(exc) or type(exc).__name__)[:300])
            return False

    def _new_job(self, ctx: dict | None, provoking: dict, **extra: Any) -> dict:
        # A delay runs from the provoking call, not from when its turn comes.
        return {"ctx": ctx, "provoking": provoking, "since": self._elapsed, "index": 0, "delays": {},
                "started": False, **extra}

    def _start(self, trig: _Trigger, job: dict) -> asyncio.Task | None:
        """Run ``job`` now, or queue it behind the fire in progress."""
        if trig.status in IN_FLIGHT:
            trig.pending.append(job)
            trig.status = "queued"
            self._emit("detected", trig.id, provoking=job["provoking"], queued=len(trig.pending))
            return trig.task
        trig.status = "firing"
        trig.detected_at = self._wall()
        self._emit("detected", trig.id, provoking=job["provoking"])
        trig.job = job
        trig.task = self._spawn(self._run(trig), name=trig.id)
        return trig.task

    def _schedule_state(self, trig: _Trigger, provoking: dict) -> None:
        if trig.evaluating:
            trig.reeval = True  # look again once the evaluation in progress ends
            return
        trig.evaluating = True
        trig.eval_task = self._spawn(self._eval_state(trig, provoking), name=f"{trig.id}:state")

    async def _eval_state(self, trig: _Trigger, provoking: dict) -> None:
        try:
            while True:
                trig.reeval = False
                try:
                    matched = await self._run_check(trig.state_when.check)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # fail-open
                    self._emit("eval_error", trig.id, detail=(str(exc) or type(exc).__name__)[:300])
                    matched = False
                if self._triggers.get(trig.id) is not trig or trig.status != "armed":
                    return
                if matched:
                    self._start(trig, self._new_job(None, provoking))
                    return
                if not trig.reeval:
                    return
        finally:
            trig.evaluating = False
            trig.eval_task = None

    def _cancel(self, trig: _Trigger, **cause: Any) -> None:
        """Retire a deadline its ``unless`` call answered, and the time triggers anchored on it."""
        trig.status = "cancelled"
        trig.next_mark = None
        self._emit("cancelled", trig.id, **cause)
        for dep in list(self._triggers.values()):
            if dep.type == "time" and dep.time_when.after == trig.id and dep.status == "armed":
                self._cancel(dep, anchor=trig.id)

    # -- time triggers --------------------------------------------------------------------------

    def _eval_time(self, now: datetime) -> None:
        key = self._anchor_key()
        for trig in list(self._triggers.values()):
            if trig.type != "time" or trig.status != "armed":
                continue
            when = trig.time_when
            if when.after is None and trig.resolved and trig.anchor_key != key:
                # Re-armed: the old mark (and any backlog) was on a timeline the clock left.
                generation = getattr(self._clock, "generation", None)
                self._emit("reanchored", trig.id, generation=generation if isinstance(generation, int) else None,
                           dropped_mark=iso(trig.next_mark) if trig.next_mark is not None else None)
                trig.resolved = False
                trig.next_mark = None
                self._seed_every(trig)  # the new timeline draws the same sequence again
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
                self._changed()

    def _first_mark(self, trig: _Trigger, key: str | None) -> None:
        when = trig.time_when
        if when.after is not None:
            return  # stamped when its anchor fires
        t0 = self._t0()
        if t0 is None:
            return
        if when.at is not None:
            trig.next_mark = resolve_mark(when.at, t0)
        else:
            trig.next_mark = shift(t0, self._interval(trig))
        trig.resolved = True
        trig.anchor_key = key

    def _interval(self, trig: _Trigger) -> float:
        every = trig.time_when.every
        if isinstance(every, ExpDist):
            assert trig.rng is not None
            return trig.rng.expovariate(1.0 / duration_seconds(every.mean))
        return duration_seconds(every)

    def _due_marks(self, trig: _Trigger, now: datetime) -> tuple[list[datetime], bool, bool]:
        """The marks due at ``now`` (at most MAX_CATCHUP; a longer backlog drains on later looks),
        advancing next_mark past them. Answers (marks, capped, terminated)."""
        when = trig.time_when
        recurring = when.every is not None
        until = resolve_mark(when.until, self._t0() or now) if when.until is not None else None
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

    def _fire_marks(self, trig: _Trigger, marks: list[datetime], capped: bool, terminated: bool,
                    now: datetime) -> None:
        trig.status = "firing"
        trig.detected_at = self._wall()
        trig.retiring = terminated
        provoking = {"source": "clock"}
        self._emit("detected", trig.id, provoking=provoking, due=len(marks), capped=capped,
                   first_mark=iso(marks[0]), last_mark=iso(marks[-1]))
        jobs = []
        for mark in marks:
            job = self._new_job(None, provoking, mark=iso(mark), capped=capped)
            # A mark's delay runs from the mark, so a backlog doesn't push each reply back further.
            job["since"] = self._elapsed - max(0.0, (now - mark).total_seconds())
            jobs.append(job)
        trig.job = jobs[0]
        trig.pending.extend(jobs[1:])
        trig.task = self._spawn(self._run(trig), name=trig.id)

    def _anchor_dependents(self, anchor_id: str) -> None:
        """Stamp the mark (virtual now + offset) of each `after` trigger waiting on ``anchor_id``."""
        now = self._virtual_now()
        if now is None:
            return
        for trig in self._triggers.values():
            when = trig.time_when
            if trig.type != "time" or when.after != anchor_id or trig.resolved or trig.status != "armed":
                continue
            trig.next_mark = shift(now, duration_seconds(when.offset))
            trig.resolved = True
            trig.anchor_key = self._anchor_key()
            self._emit("anchored", trig.id, anchor=anchor_id, mark=iso(trig.next_mark))

    # -- firing ---------------------------------------------------------------------------------

    def _spawn(self, coro: Any, name: str) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)

        def done(t: asyncio.Task) -> None:
            self._tasks.discard(t)
            self._parked.pop(t, None)
            self._signal_progress()
            if not t.cancelled() and t.exception() is not None:
                logger.error("trigger task %s failed", t.get_name(), exc_info=t.exception())

        task.add_done_callback(done)
        return task

    def _resume(self) -> None:
        """Start the runners of fires restored from storage (needs a running loop)."""
        for trig in self._triggers.values():
            if trig.job is not None and (trig.task is None or trig.task.done()):
                trig.task = self._spawn(self._run(trig), name=trig.id)

    async def _run(self, trig: _Trigger) -> None:
        """Run the trigger's job and every job queued behind it, then settle its status."""
        try:
            while trig.job is not None:
                job = trig.job
                ok = await self._run_job(trig, job)
                if self._triggers.get(trig.id) is not trig:
                    return
                trig.job = None
                if ok:
                    self._anchor_dependents(trig.id)
                elif trig.type == "time":
                    trig.status = "failed"  # a time trigger retires on failure
                    trig.next_mark = None
                    trig.retiring = False
                    trig.pending.clear()
                    self._changed()
                    return
                if trig.pending:
                    trig.job = trig.pending.popleft()
                    if trig.type != "time":
                        trig.detected_at = self._wall()
                    trig.status = "queued" if trig.pending and trig.type != "time" else "firing"
                    continue
                if trig.type == "time":
                    trig.status = "fired" if trig.retiring else "armed"
                    trig.retiring = False
                else:
                    repeat = bool(getattr(trig.spec.when, "repeat", False))
                    trig.status = "armed" if (repeat or not ok) else "fired"
                self._changed()
        finally:
            if not self._closing and self._triggers.get(trig.id) is trig and trig.status in IN_FLIGHT:
                dropped = len(trig.pending)
                trig.status = "armed"
                trig.job = None
                trig.pending.clear()
                self._emit("failed", trig.id, detail="firing did not settle", dropped=dropped)
            if trig.task is asyncio.current_task():
                trig.task = None

    async def _run_job(self, trig: _Trigger, job: dict) -> bool:
        try:
            if not job["started"]:
                job["started"] = True
                trig.attempts += 1
                event = {"event_type": "trigger_fired", "source": "trigger_engine", "trigger_id": trig.id}
                if job.get("ctx") is not None and trig.type == "action":
                    event["provoking_tool"] = trig.action_when.tool
                if job.get("mark") is not None:
                    event["mark"] = job["mark"]
                await self._trajectory(event)
            for index in range(job["index"], len(trig.spec.actions)):
                if not await self._run_action(trig, job, index):
                    self._emit("failed", trig.id, action_index=index)
                    return False
                job["index"] = index + 1
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            logger.exception("trigger %r: firing failed", trig.id)
            self._emit("failed", trig.id, detail=(str(exc) or type(exc).__name__)[:300])
            return False
        trig.fire_count += 1
        trig.fired_at = self._wall()
        payload: dict[str, Any] = {"fire_count": trig.fire_count}
        if job.get("mark") is not None:
            payload.update(mark=job["mark"], capped=bool(job.get("capped")))
        self._emit("fired", trig.id, **payload)
        return True

    async def _run_action(self, trig: _Trigger, job: dict, index: int) -> bool:
        action = trig.spec.actions[index]
        named = {"executor": action.executor} if action.type == "nl" and action.executor is not None else {}
        if action.delay is not None:
            await self._wait_delay(trig, job, index, action.delay, named)
        ctx = job.get("ctx")
        try:
            if action.type == "permission":
                await self._actions.set_permission(action.action, action.role, action.tools)
                tools = action.tools if isinstance(action.tools, list) else [action.tools]
                detail: dict[str, Any] = {"role": action.role, "action": action.action, "tools": tools}
            elif action.type == "tool":
                acting = {"as": action.as_} if action.as_ else {}
                try:
                    args = render(action.args, {}, ctx)
                except TemplateError as exc:
                    self._emit("action_failed", trig.id, action_index=index, detail=str(exc)[:300], tool=action.tool)
                    return False
                result = await self._actions.call_tool(action.tool, args, action.as_)
                text = result_text(result)
                failed = result_is_error(result)
                await self._trajectory({
                    "event_type": "internal_tool_call", "source": "trigger_engine", "trigger_id": trig.id,
                    "action_index": index, "tool": action.tool, "arguments": echo_args(args), "as": action.as_,
                    "ok": not failed, "result_len": len(text),
                    "result_sha256": hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:_DIGEST_CHARS],
                })
                if failed:
                    self._emit("action_failed", trig.id, action_index=index, detail=text[:300], tool=action.tool,
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
            self._emit("action_ok", trig.id, action_index=index, detail=detail)
            return True
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # fail-open
            self._emit("action_failed", trig.id, action_index=index,
                       detail=(str(exc) or type(exc).__name__)[:300], **named)
            return False

    async def _wait_delay(self, trig: _Trigger, job: dict, index: int, delay: Any, named: dict) -> None:
        key = str(index)
        if key not in job["delays"]:
            if isinstance(delay, ExpDist):
                seconds = trig.delay_rngs[index].expovariate(1.0 / duration_seconds(delay.mean))
            else:
                seconds = duration_seconds(delay)
            job["delays"][key] = job["since"] + seconds
            self._emit("delayed", trig.id, action_index=index, virtual_seconds=round(seconds, 3), **named)
        await self._park(trig, _Timer(due=job["delays"][key]))

    async def _park(self, trig: _Trigger, timer: _Timer) -> None:
        now = self._observe()
        if self._timer_ready(timer, now):
            return
        timer.future = asyncio.get_running_loop().create_future()
        self._timers.append(timer)
        task = asyncio.current_task()
        if task is not None:
            self._parked[task] = timer
        trig.waiting = True
        self._signal_progress()
        try:
            await timer.future
        finally:
            trig.waiting = False
            if task is not None:
                self._parked.pop(task, None)
            if timer in self._timers:
                self._timers.remove(timer)

    async def _run_nl(self, trig: _Trigger, index: int, action: Any, ctx: dict | None, named: dict) -> bool:
        executor = self._executors.get(action.executor)
        if executor is None:
            self._emit("action_failed", trig.id, action_index=index, detail="no executor is registered", **named)
            return False
        hours = executor.get("hours")
        if hours is not None:
            now = self._virtual_now()
            opens = next_opening(now, hours) if now is not None else None
            if opens is not None:
                self._emit("deferred", trig.id, action_index=index, until=iso(opens), **named)
                await self._park(trig, _Timer(hours=hours))
        target = {**executor, "name": action.executor}
        cause = {"trigger_id": trig.id, "action_index": index, "fire": trig.attempts}
        causes = self._in_flight.setdefault(executor["role"], [])
        causes.append(cause)
        instruction = action.instruction
        try:
            for attempt in (1, 2):
                reply = await self._actions.send_nl(target, instruction, f"trigger-{trig.id}")
                if reply is None:
                    self._emit("action_failed", trig.id, action_index=index,
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
        self._emit("action_failed", trig.id, action_index=index, detail="verification failed after retry", **named)
        return False

    async def _verify(self, trig: _Trigger, index: int, check: Any, ctx: dict | None, role: str | None) -> bool:
        if await self._run_check(check, ctx, role):
            self._emit("verify_ok", trig.id, action_index=index)
            return True
        self._emit("verify_failed", trig.id, action_index=index)
        return False

    async def _run_check(self, check: Any, ctx: dict | None = None, role: str | None = None) -> bool:
        """Run a check's steps as internal calls. A step whose call errors, whose bound value is
        empty or whose predicate fails makes it false; an unreadable extract path raises."""
        bindings: dict[str, Any] = {}
        for step in check.steps:
            result = await self._actions.call_tool(step.tool, render(step.args, bindings, ctx), role)
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

    # -- events ---------------------------------------------------------------------------------

    def _emit(self, kind: str, trigger_id: str | None, **payload: Any) -> dict:
        assert kind in EVENT_KINDS, f"unknown trigger event kind {kind!r}"
        self._seq += 1
        wall = self._wall()
        virtual = self._virtual_now()
        event: dict[str, Any] = {"seq": self._seq, "ts": wall, "at": wall}
        if virtual is not None:
            event["virtual_time"] = iso(virtual)
        event["kind"] = kind
        if trigger_id:
            event["trigger_id"] = trigger_id
        event.update(payload)
        (self._events if len(self._events) < EVENTS_HEAD else self._events_tail).append(event)
        if kind in FAILURE_KINDS and trigger_id:
            trig = self._triggers.get(trigger_id)
            if trig is not None:
                trig.failure_count += 1
                trig.last_failure_at = wall
        logger.debug("trigger event %s", event)
        self._changed()
        return event

    async def _trajectory(self, event: dict) -> None:
        if self._on_event is None:
            return
        try:
            outcome = self._on_event(event)
            if inspect.isawaitable(outcome):
                await outcome
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("trajectory callback failed for %s", event.get("event_type"))

    def _changed(self) -> None:
        if self._on_change is None:
            return
        try:
            self._on_change()
        except Exception:
            logger.exception("trigger on_change callback failed")

    # -- persistence ----------------------------------------------------------------------------

    def to_dict(self) -> dict:
        """JSON-ready state for the store: config, triggers with their statuses, counters, marks and
        fires in progress (a delayed action keeps what is left of its delay), and the event log."""
        return {
            "version": STATE_VERSION,
            "seed": self._seed,
            "ids_issued": self._ids_issued,
            "elapsed": self._elapsed,
            "config": {
                "config_set": self._config_set,
                "watch_roles": sorted(self._watch_roles),
                "executors": [[name, copy.deepcopy(ex)] for name, ex in self._executors.items()],
            },
            "triggers": [self._trigger_dict(trig) for trig in self._triggers.values()],
            "events": copy.deepcopy(self._events),
            "events_tail": copy.deepcopy(list(self._events_tail)),
            "seq": self._seq,
        }

    @staticmethod
    def _trigger_dict(trig: _Trigger) -> dict:
        return {
            "spec": copy.deepcopy(trig.raw),
            "status": trig.status,
            "detected_at": trig.detected_at,
            "fired_at": trig.fired_at,
            "fire_count": trig.fire_count,
            "failure_count": trig.failure_count,
            "last_failure_at": trig.last_failure_at,
            "attempts": trig.attempts,
            "next_mark": iso(trig.next_mark) if trig.next_mark is not None else None,
            "resolved": trig.resolved,
            "anchor_key": trig.anchor_key,
            "retiring": trig.retiring,
            "rng": _rng_state(trig.rng),
            "delay_rngs": {str(i): _rng_state(r) for i, r in trig.delay_rngs.items()},
            "job": copy.deepcopy(trig.job),
            "pending": copy.deepcopy(list(trig.pending)),
        }

    @classmethod
    def from_dict(cls, data: dict, clock: ClockLike, actions: ActionRunner, **options: Any) -> TriggerEngine:
        """An engine restored from :meth:`to_dict`. Fires that were in progress resume on the first
        hook call (:meth:`tick`, :meth:`on_tool_call`, :meth:`drain`); an action that was running when
        the state was saved runs again."""
        try:
            if data.get("version") != STATE_VERSION:
                raise ValueError(f"unknown version {data.get('version')!r}")
            options.setdefault("seed", data.get("seed", 0))
            engine = cls(clock, actions, **options)
            engine._ids_issued = int(data.get("ids_issued", 0))
            engine._elapsed = float(data.get("elapsed", 0.0))
            config = data["config"]
            engine._config_set = bool(config["config_set"])
            engine._watch_roles = set(config["watch_roles"])
            engine._executors = {name: dict(ex) for name, ex in config["executors"]}
            for item in data["triggers"]:
                spec = item["spec"]
                trig = _Trigger(id=spec["id"], raw=spec, spec=parse_spec(spec))
                engine._seed_rngs(trig)
                trig.status = item["status"]
                if trig.status not in STATUSES:
                    raise ValueError(f"unknown status {trig.status!r}")
                trig.detected_at = item.get("detected_at")
                trig.fired_at = item.get("fired_at")
                trig.fire_count = int(item.get("fire_count", 0))
                trig.failure_count = int(item.get("failure_count", 0))
                trig.last_failure_at = item.get("last_failure_at")
                trig.attempts = int(item.get("attempts", 0))
                mark = item.get("next_mark")
                trig.next_mark = datetime.fromisoformat(mark) if mark else None
                trig.resolved = bool(item.get("resolved"))
                trig.anchor_key = item.get("anchor_key")
                trig.retiring = bool(item.get("retiring"))
                if item.get("rng") is not None:
                    trig.rng = _rng_from_state(item["rng"])
                for i, state in (item.get("delay_rngs") or {}).items():
                    trig.delay_rngs[int(i)] = _rng_from_state(state)  # type: ignore[assignment]
                trig.job = item.get("job")
                trig.pending = deque(item.get("pending") or [])
                if trig.job is None and trig.status in IN_FLIGHT:
                    trig.status = "armed"  # nothing left to run; detection starts over
                engine._triggers[trig.id] = trig
            engine._events = list(data.get("events") or [])
            engine._events_tail.extend(data.get("events_tail") or [])
            engine._seq = int(data.get("seq", len(engine._events) + len(engine._events_tail)))
        except TriggerError:
            raise
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise TriggerError(f"can't restore the trigger engine from its stored state: {exc}", 500) from None
        return engine
