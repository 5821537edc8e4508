"""The gateway's trajectory: every event of an env instance (tool calls, results, denials, trigger firings, tool
list changes), stamped and kept in order for ``GET /trajectory``, and handed to the owner's ``on_event`` (the
hub's store) off the tool call's critical path.

    trajectory = Trajectory(clock, on_event=store.append, keep=gateway_tasks.add)
    event_id = trajectory.log({"event_type": "tool_call", ...})     # "event_1", "event_2", ...
    trajectory.jsonl()                                              # the /trajectory body
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Callable
from typing import Any

from .clock import VirtualClock, wall_timestamp

logger = logging.getLogger(__name__)

__all__ = ["TRAJECTORY_MAX_EVENTS", "Trajectory"]

TRAJECTORY_MAX_EVENTS = 100_000


class Trajectory:
    """The events of one gateway. ``on_event`` (may be set later) gets each event once the step that recorded it
    is done; an awaitable it answers is given to ``keep`` (the gateway holds it until it ends)."""

    def __init__(self, clock: VirtualClock, *, on_event: Callable[[dict], Any] | None = None,
                 keep: Callable[[asyncio.Future], None], max_events: int = TRAJECTORY_MAX_EVENTS):
        self.clock = clock
        self.on_event = on_event
        self.events: list[dict] = []
        self.max_events = max_events
        self._keep = keep
        self._counter = 0
        self._handoff: list[dict] = []  # events recorded, not yet given to on_event (see hand_off)

    def log(self, event: dict) -> str:
        """Record ``event`` (its id answers) and queue it for ``on_event``."""
        event_id = self.record(event)
        if self.on_event is not None:
            self._handoff.append(event)
            if len(self._handoff) == 1:
                asyncio.get_running_loop().call_soon(self.hand_off)
        return event_id

    def hand_off(self) -> None:
        """Give the queued events to ``on_event`` (the hub's store), in order, once the step that recorded them is
        done: after the call went out to the child, or after its answer went back to the client. So the store's
        work (a JSON encode, a buffer append) is never on a tool call's critical path."""
        events, self._handoff = self._handoff, []
        for event in events:
            try:
                outcome = self.on_event(event)  # type: ignore[misc]  # queued while on_event was set (unset since: logged below)
                if inspect.isawaitable(outcome):
                    self._keep(asyncio.ensure_future(outcome))
            except Exception:
                logger.exception("gateway on_event callback failed")

    def record(self, event: dict) -> str:
        """Stamp ``event`` (id, time, virtual time) and keep it for /trajectory (see :meth:`log`)."""
        self._counter += 1
        event_id = f"event_{self._counter}"
        event["event_id"] = event_id
        event["timestamp_utc"] = wall_timestamp()
        if self.clock.armed:
            stamp = self.clock.virtual_timestamp()
            if stamp is not None:
                event["virtual_time"] = stamp
        if len(self.events) < self.max_events:
            self.events.append(event)
        return event_id

    def last_firing(self, trigger_id: str) -> str | None:
        """The event id of ``trigger_id``'s latest ``trigger_fired`` event, if one is kept."""
        for event in reversed(self.events):
            if event.get("event_type") == "trigger_fired" and event.get("trigger_id") == trigger_id:
                return event.get("event_id")
        return None

    def jsonl(self) -> str:
        """The /trajectory body: one JSON event a line."""
        return "".join(json.dumps(e, default=str) + "\n" for e in self.events)
