"""What the trigger engine needs from its host: a virtual clock to read and a runner for actions."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol


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
