"""What the A2A server keeps per task: its ``TaskRecord`` (state, history, artifacts, trajectory, update fan-out)
and the per-context locks that run a context's turns one at a time."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime
from typing import Any

from . import streaming, wire
from .types import TrajectoryLog


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


class TaskRecord:
    def __init__(self, task_id: str, context_id: str, user: wire.WireMessage):
        self.id = task_id
        self.context_id = context_id
        self.state = "submitted"
        self.timestamp = _now()
        self.status_message: wire.WireMessage | None = None
        self.history: list[wire.WireMessage] = [user]
        self.artifacts: list[tuple[str, list]] = []
        self.metadata: dict[str, Any] = {}
        self.log = TrajectoryLog(task_id, context_id)
        self.runner: asyncio.Task | None = None
        self.done = asyncio.Event()
        self.updates = streaming.UpdateFanout()   # open streams (message/stream, tasks/resubscribe)

    @property
    def terminal(self) -> bool:
        return self.state in wire.TERMINAL_STATES

    def set_state(self, state: str, message: wire.WireMessage | None = None) -> None:
        self.state = state
        self.status_message = message
        self.timestamp = _now()
        self.updates.publish(streaming.StatusUpdate(state, message, self.timestamp))

    def add_artifact(self, artifact_id: str, parts: list) -> None:
        self.artifacts.append((artifact_id, parts))
        self.updates.publish(streaming.ArtifactUpdate(artifact_id, parts))

    def to_wire(self, dialect: wire.Dialect, history_length: int | None = None) -> dict[str, Any]:
        status = streaming.status_to_wire(self.state, self.status_message, self.timestamp, dialect)
        history = self.history if history_length is None else self.history[len(self.history) - history_length:] \
            if history_length else []
        out: dict[str, Any] = {"id": self.id, "contextId": self.context_id, "status": status,
                               "history": [m.to_wire(dialect) for m in history]}
        if self.artifacts:
            out["artifacts"] = [streaming.artifact_to_wire(aid, parts, dialect) for aid, parts in self.artifacts]
        if self.metadata:
            out["metadata"] = self.metadata
        if dialect == "0.3":
            out["kind"] = "task"
        return out


class ContextLocks:
    """One lock per context (turns of a context run serially), dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, context_id: str):
        lock, users = self._locks.get(context_id, (None, 0))
        if lock is None:
            lock = asyncio.Lock()
        self._locks[context_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[context_id]
            if users <= 1:
                del self._locks[context_id]
            else:
                self._locks[context_id] = (lock, users - 1)

