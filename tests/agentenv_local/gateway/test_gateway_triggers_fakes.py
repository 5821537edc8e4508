"""Fakes shared by the trigger-engine tests: a clock moved by hand and an ActionRunner that records
what the engine asks of the gateway. (No tests here; the sibling test modules import it.)"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from agentenv_local.gateway.triggers import TriggerEngine

T0 = "2025-03-10T09:00:00Z"


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


class ManualClock:
    """Armed at T0 and frozen; moves only when a test advances it. Bumps ``generation`` on every
    arm and clear, like the gateway's clock."""

    def __init__(self, t0: str | None = T0):
        self.generation = 0
        self._t0: datetime | None = None
        self._now: datetime | None = None
        if t0 is not None:
            self.arm(t0)

    @property
    def armed(self) -> bool:
        return self._now is not None

    @property
    def t0(self) -> datetime | None:
        return self._t0

    def now(self) -> datetime:
        if self._now is None:
            raise LookupError("clock not armed")
        return self._now

    def arm(self, t0: str) -> None:
        self._t0 = self._now = at(t0)
        self.generation += 1

    def clear(self) -> None:
        self._t0 = self._now = None
        self.generation += 1

    def advance(self, seconds: float) -> None:
        assert self._now is not None
        self._now += timedelta(seconds=seconds)


def ok(value: Any = "done") -> dict:
    text = value if isinstance(value, str) else json.dumps(value)
    return {"isError": False, "content": [{"type": "text", "text": text}],
            "structuredContent": value if isinstance(value, dict) else {"result": value}}


def err(text: str = "boom") -> dict:
    return {"isError": True, "content": [{"type": "text", "text": text}]}


class RecordingActions:
    """The gateway's side of the engine: tool handlers by name, and a record of every request."""

    def __init__(self, handlers: dict[str, Callable] | None = None, read_only: set[str] | None = None):
        self.handlers: dict[str, Callable] = dict(handlers or {})
        self.read_only_tools = set(read_only or ())
        self.calls: list[tuple[str, dict, str | None]] = []
        self.permissions: list[tuple[str, str, Any]] = []
        self.nl: list[tuple[dict, str, str]] = []
        self.nl_replies: list[str | None] = []
        self.on_nl: Callable[[str], Any] | None = None

    async def call_tool(self, tool: str, args: dict, role: str | None) -> Any:
        self.calls.append((tool, args, role))
        handler = self.handlers.get(tool)
        if handler is None:
            raise RuntimeError(f"unknown tool {tool!r}")
        out = handler(args, role)
        if inspect.isawaitable(out):
            out = await out
        return out if isinstance(out, dict) and "content" in out else ok(out)

    async def set_permission(self, action: str, role: str, tools: Any) -> None:
        self.permissions.append((action, role, tools))

    async def send_nl(self, executor: dict, instruction: str, context_id: str) -> str | None:
        self.nl.append((executor, instruction, context_id))
        if self.on_nl is not None:
            self.on_nl(instruction)
        return self.nl_replies.pop(0) if self.nl_replies else "ok, done"

    def read_only(self, tool: str) -> bool:
        return tool in self.read_only_tools

    def tool_calls(self, tool: str) -> list[tuple[dict, str | None]]:
        return [(args, role) for name, args, role in self.calls if name == tool]


def make_engine(handlers: dict[str, Callable] | None = None, *, clock: ManualClock | None = None,
                read_only: set[str] | None = None,
                **options: Any) -> tuple[TriggerEngine, ManualClock, RecordingActions]:
    clock = clock or ManualClock()
    actions = RecordingActions(handlers, read_only)
    return TriggerEngine(clock, actions, **options), clock, actions


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def settle(engine: TriggerEngine) -> None:
    await engine.drain(timeout=5)


def kinds(engine: TriggerEngine, trigger_id: str | None = None) -> list[str]:
    return [e["kind"] for e in engine.state()["events"]
            if trigger_id is None or e.get("trigger_id") == trigger_id]


def status(engine: TriggerEngine, trigger_id: str) -> dict:
    return next(t for t in engine.state()["triggers"] if t["id"] == trigger_id)


def mirror(tid: str = "mirror", **when: Any) -> dict:
    """An action trigger on `search_emails` that calls `echo` with the query."""
    return {"id": tid, "when": {"type": "action", "tool": "search_emails", **when},
            "actions": [{"type": "tool", "tool": "echo", "args": {"text": "${args.query}"}}]}
