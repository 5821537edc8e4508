"""Sending `notifications/tools/list_changed` to the MCP sessions connected to a low-level mcp 2.x ``Server``.

mcp 2.x keeps no public list of connected sessions, so a front that wants to tell its clients "the tool list
changed" remembers them itself (the mechanism `agentenv env dev` uses, see ``dev.py``):

- handshake-era sessions (protocol revisions up to 2025-11-25; stateful HTTP sessions, stdio): the
  ``Connection`` of each session, weakly, taken from ``ctx.session._connection`` in the request handlers and on
  ``notifications/initialized``; ``connection.send_tool_list_changed()`` rides its standalone channel.
- the 2026 revision: change notifications only travel on ``subscriptions/listen`` streams, served by mcp's
  ``ListenHandler`` over an in-memory bus on which ``ToolsListChanged()`` is published.

    notifier = ToolsChangedNotifier()
    server = notifier.server_class()(name, ..., on_subscriptions_listen=notifier.listen_handler())
    notifier.install(server)          # remembers sessions on notifications/initialized
    ... notifier.remember(ctx)        # in on_list_tools / on_call_tool
    await notifier.notify()           # after the tool list changed
"""

from __future__ import annotations

import contextlib
import weakref
from typing import Any


class ToolsChangedNotifier:
    def __init__(self) -> None:
        from mcp.server.subscriptions import InMemorySubscriptionBus
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        self._connections: weakref.WeakSet = weakref.WeakSet()
        self._bus = InMemorySubscriptionBus()
        self._modern = frozenset(MODERN_PROTOCOL_VERSIONS)

    @staticmethod
    def server_class() -> type:
        """A ``Server`` subclass whose initialization options announce ``tools.listChanged`` by default."""
        from mcp.server.lowlevel import NotificationOptions, Server

        class _ListChangedServer(Server):
            def create_initialization_options(self, notification_options: Any = None, *args: Any,
                                              **kwargs: Any) -> Any:
                options = notification_options or NotificationOptions(tools_changed=True)
                return super().create_initialization_options(options, *args, **kwargs)

        return _ListChangedServer

    def listen_handler(self) -> Any:
        from mcp.server.subscriptions import ListenHandler

        return ListenHandler(self._bus)

    def install(self, server: Any) -> None:
        from mcp_types import NotificationParams

        async def on_initialized(ctx: Any, params: Any) -> None:
            self.remember(ctx)

        server.add_notification_handler("notifications/initialized", NotificationParams, on_initialized)

    def remember(self, ctx: Any) -> None:
        session = getattr(ctx, "session", None)
        connection = getattr(session, "_connection", None)
        if connection is None or getattr(ctx, "protocol_version", None) in self._modern:
            return  # the 2026 revision gets change notifications through subscriptions/listen instead
        with contextlib.suppress(TypeError):
            self._connections.add(connection)

    @property
    def sessions(self) -> int:
        return len(self._connections)

    async def notify(self) -> None:
        from mcp.server.subscriptions import ToolsListChanged

        for connection in list(self._connections):
            try:
                await connection.send_tool_list_changed()
            except Exception:  # a session that went away (Connection.notify swallows most)
                self._connections.discard(connection)
        await self._bus.publish(ToolsListChanged())


__all__ = ["ToolsChangedNotifier"]
