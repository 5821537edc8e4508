"""A2A streaming for the agent server: each task's update fan-out and the SSE answers of ``message/stream`` /
``SendStreamingMessage`` and ``tasks/resubscribe`` / ``SubscribeToTask``.

A ``TaskRecord`` owns an ``UpdateFanout``; its state changes and its answer's artifact are published to every
``Subscription`` (one per open stream). A subscription's queue is bounded: a reader that falls behind loses its
oldest queued updates (a status update is a whole status, so it skips intermediate states, never the last ones).
An ``EventStream`` subscribes and takes the task's snapshot in one step (nothing can happen in between), then
serves, as SSE ``data:`` lines, JSON-RPC responses with the request's id: the Task, then each update, ending
after the terminal status update. It unsubscribes when it ends or the client goes away; the task runs on.

Wire shapes (``result`` of each event):
    0.3  the Task (``"kind": "task"``); ``{"kind": "status-update", "taskId", "contextId", "status", "final"}``;
         ``{"kind": "artifact-update", "taskId", "contextId", "artifact", "lastChunk": true}``
    1.0  ``{"task": {...}}``; ``{"statusUpdate": {"taskId", "contextId", "status"}}`` (no ``final``: 1.0 dropped
         it, the stream ends after a terminal state); ``{"artifactUpdate": {"taskId", "contextId", "artifact",
         "lastChunk": true}}``
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from agentenv_local import jsonrpc

from . import wire

# JSON-RPC method -> (dialect, operation)
METHODS: dict[str, tuple[wire.Dialect, str]] = {
    "message/stream": ("0.3", "stream"),
    "tasks/resubscribe": ("0.3", "subscribe"),
    "SendStreamingMessage": ("1.0", "stream"),
    "SubscribeToTask": ("1.0", "subscribe"),
}

MAX_QUEUED = 64         # updates buffered per subscriber; beyond it the oldest are dropped
KEEPALIVE_S = 15.0      # an SSE comment after this long without an update (also notices a gone client)
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class StatusUpdate:
    __slots__ = ("message", "state", "timestamp")

    def __init__(self, state: str, message: wire.WireMessage | None, timestamp: str):
        self.state = state
        self.message = message
        self.timestamp = timestamp

    @property
    def final(self) -> bool:
        return self.state in wire.TERMINAL_STATES


class ArtifactUpdate:
    __slots__ = ("artifact_id", "parts")

    def __init__(self, artifact_id: str, parts: list):
        self.artifact_id = artifact_id
        self.parts = parts


Update = StatusUpdate | ArtifactUpdate


def artifact_to_wire(artifact_id: str, parts: list, dialect: wire.Dialect) -> dict[str, Any]:
    return {"artifactId": artifact_id, "name": "response", "parts": [wire.part_to_wire(p, dialect) for p in parts]}


def status_to_wire(state: str, message: wire.WireMessage | None, timestamp: str,
                   dialect: wire.Dialect) -> dict[str, Any]:
    status: dict[str, Any] = {"state": wire.state_to_wire(state, dialect), "timestamp": timestamp}
    if message is not None:
        status["message"] = message.to_wire(dialect)
    return status


def update_to_wire(update: Update, task_id: str, context_id: str, dialect: wire.Dialect) -> dict[str, Any]:
    """One update as a streaming ``result`` in ``dialect``."""
    head = {"taskId": task_id, "contextId": context_id}
    if isinstance(update, ArtifactUpdate):
        event = {**head, "artifact": artifact_to_wire(update.artifact_id, update.parts, dialect), "lastChunk": True}
        return {"kind": "artifact-update", **event} if dialect == "0.3" else {"artifactUpdate": event}
    event = {**head, "status": status_to_wire(update.state, update.message, update.timestamp, dialect)}
    if dialect == "0.3":
        return {"kind": "status-update", **event, "final": update.final}
    return {"statusUpdate": event}


# --- the fan-out ------------------------------------------------------------------------------------------

class Subscription:
    """One reader's bounded queue of updates; ``close()`` (idempotent) takes it off its fan-out."""

    def __init__(self, fanout: UpdateFanout, maxsize: int):
        self._fanout = fanout
        self._queue: asyncio.Queue[Update] = asyncio.Queue(maxsize)
        self.dropped = 0

    def offer(self, update: Update) -> None:
        if self._queue.full():
            self._queue.get_nowait()   # the oldest goes: later updates supersede it
            self.dropped += 1
        self._queue.put_nowait(update)

    async def next(self, timeout: float) -> Update | None:
        """The next update, or None after ``timeout`` seconds without one."""
        try:
            return await asyncio.wait_for(self._queue.get(), timeout)
        except TimeoutError:
            return None

    def close(self) -> None:
        self._fanout.discard(self)


class UpdateFanout:
    """Publishes a task's updates to its open streams."""

    def __init__(self, maxsize: int = MAX_QUEUED):
        self._maxsize = maxsize
        self._subscribers: set[Subscription] = set()

    def __len__(self) -> int:
        return len(self._subscribers)

    def subscribe(self) -> Subscription:
        sub = Subscription(self, self._maxsize)
        self._subscribers.add(sub)
        return sub

    def discard(self, sub: Subscription) -> None:
        self._subscribers.discard(sub)

    def publish(self, update: Update) -> None:
        for sub in list(self._subscribers):
            sub.offer(update)


# --- the SSE answer ---------------------------------------------------------------------------------------

def sse_event(payload: dict[str, Any]) -> bytes:
    # json.dumps escapes newlines inside strings, so one data: line carries the whole object
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


class EventStream:
    """The events of one streaming request for ``record`` (a ``TaskRecord``): its snapshot now, then its updates.

    Built synchronously right after the task is created (or looked up), so no update is missed or repeated."""

    def __init__(self, req_id: Any, record: Any, dialect: wire.Dialect, history_length: int | None = None,
                 *, keepalive: float | None = None):
        self.req_id = req_id
        self.task_id = record.id
        self.context_id = record.context_id
        self.dialect = dialect
        self.keepalive = KEEPALIVE_S if keepalive is None else keepalive
        self._subscription = record.updates.subscribe()
        task = record.to_wire(dialect, history_length)
        self._first = task if dialect == "0.3" else {"task": task}
        self._done = record.terminal

    def _response(self, result: dict[str, Any]) -> bytes:
        return sse_event(jsonrpc.result(self.req_id, result))

    async def events(self) -> AsyncIterator[bytes]:
        try:
            yield self._response(self._first)
            while not self._done:
                update = await self._subscription.next(self.keepalive)
                if update is None:
                    yield b": keepalive\n\n"
                    continue
                yield self._response(update_to_wire(update, self.task_id, self.context_id, self.dialect))
                self._done = isinstance(update, StatusUpdate) and update.final
        finally:
            self.close()

    def close(self) -> None:
        self._subscription.close()


def sse_response(stream: EventStream) -> Any:
    """A Starlette response serving ``stream``; the subscription is dropped however the response ends."""
    from starlette.responses import StreamingResponse

    class _SSEResponse(StreamingResponse):
        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            try:
                await super().__call__(scope, receive, send)
            finally:
                stream.close()
                with contextlib.suppress(Exception):
                    await self.body_iterator.aclose()  # type: ignore[attr-defined]  # typed AsyncIterable; ours is a generator

    return _SSEResponse(stream.events(), media_type="text/event-stream", headers=SSE_HEADERS)
