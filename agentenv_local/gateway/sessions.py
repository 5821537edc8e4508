"""The handshake-era MCP sessions (protocol revisions 2024-11-05 .. 2025-11-25: ``initialize``, then an
``Mcp-Session-Id`` on every request) that the mcp server stack opened on the gateway's ``/mcp``, as far as the
fast path (fastpath.py) needs them to answer their ``tools/call`` and ``tools/list`` without the stack.

The stack stays the owner of every session: it opens them (``initialize``), ends them (``DELETE``, idle expiry),
and answers anything the fast path does not take. The fast path takes a request only for a session the stack
holds open and has seen initialized, on the protocol version it negotiated, and then does per request what the
stack's transport does around its handler: holds the session open while the request is in flight (the idle
timer), and shapes the answer for the negotiated version (the stack's sieve, no 2026 server-info stamp; errors
as its JSON-RPC dispatcher maps them, HTTP 200, JSON as ``json_response=True`` answers).

It reads the session manager's and transport's private fields (mcp 2.x ``StreamableHTTPSessionManager``); any
field it does not find sends the request to the stack, never to a wrong answer.
"""

from __future__ import annotations

import asyncio
import logging
import math
import weakref
from typing import Any

from agentenv_local import jsonrpc

__all__ = ["HandshakeSession", "HandshakeSessions", "legacy_error", "legacy_reply"]

logger = logging.getLogger(__name__)


class HandshakeSession:
    """One open, initialized session the fast path answers a request of (see :meth:`HandshakeSessions.lookup`)."""

    __slots__ = ("session_id", "version", "_transport")

    def __init__(self, session_id: str, version: str, transport: Any):
        self.session_id = session_id
        self.version = version  # the protocol version the session negotiated
        self._transport = transport

    def begin(self) -> None:
        """A request of this session is in flight: as the stack's transport does, the idle timer stops."""
        transport = self._transport
        scope = getattr(transport, "idle_scope", None)
        if scope is not None and getattr(transport, "_idle_timeout", None) is not None:
            transport._requests_in_flight += 1
            scope.deadline = math.inf

    def end(self) -> None:
        """The request was answered: the idle timer restarts once none is in flight."""
        transport = self._transport
        scope = getattr(transport, "idle_scope", None)
        timeout = getattr(transport, "_idle_timeout", None)
        if scope is not None and timeout is not None:
            transport._requests_in_flight -= 1
            if not transport._requests_in_flight:
                scope.deadline = asyncio.get_running_loop().time() + timeout  # anyio's clock on asyncio/uvloop


class HandshakeSessions:
    """The gateway's handshake-era sessions (``gateway.handshake_sessions``): the stack's session manager
    (:meth:`attach`, when the app is built) and each session's connection, remembered once the stack has
    answered its ``initialize`` (the gateway's mcp server middleware; and on each call the stack answers)."""

    def __init__(self) -> None:
        self._manager: Any = None
        self._connections: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()

    def attach(self, manager: Any) -> None:
        self._manager = manager

    def remember(self, ctx: Any) -> None:
        """Remember the connection of the session ``ctx`` (an mcp request or notification context) belongs to."""
        connection = getattr(getattr(ctx, "session", None), "_connection", None)
        session_id = getattr(connection, "session_id", None)
        if isinstance(session_id, str):
            try:
                self._connections[session_id] = connection
            except TypeError:  # not weakly referenceable: such a session is left to the stack
                pass

    def lookup(self, session_id: str, header_version: str | None) -> HandshakeSession | None:
        """The session the fast path may answer a request of, or None (then the stack answers: an unknown or
        ended session, one not initialized yet, a version header other than the negotiated one, a session
        bound to a credential, a transport that answers with event streams)."""
        manager = self._manager
        if manager is None or getattr(manager, "stateless", True):
            return None
        transport = getattr(manager, "_server_instances", {}).get(session_id)
        if (transport is None or session_id in getattr(manager, "_session_owners", {})
                or getattr(transport, "is_terminated", True)
                or not getattr(transport, "is_json_response_enabled", False)):
            return None
        scope = getattr(transport, "idle_scope", None)
        if scope is not None and scope.cancel_called:  # expiring: the stack answers it as ended
            return None
        connection = self._connections.get(session_id)
        if connection is None or not getattr(connection, "initialize_accepted", False):
            return None
        version = getattr(connection, "protocol_version", None)
        if not isinstance(version, str) or (header_version is not None and header_version != version):
            return None
        return HandshakeSession(session_id, version, transport)


def legacy_reply(gateway: Any, message: dict, version: str, result: dict) -> tuple[int, dict]:
    """The (HTTP status, JSON-RPC reply) the stack sends a handshake-era session for a handler's ``result``:
    cache hints, then the version's sieve (which drops what the version does not know); no server-info stamp."""
    from .fastpath import plain_call_result

    if message["method"] == "tools/call" and plain_call_result(result):
        # what every handshake-era sieve answers for a plain result (the tests check it): all but resultType
        return 200, jsonrpc.result(message["id"], {k: v for k, v in result.items() if k != "resultType"})
    try:
        result = gateway.mcp_results.serialize(message["method"], version, result)
    except Exception as e:
        return legacy_error(message, e)
    return 200, jsonrpc.result(message["id"], result)


def legacy_error(message: dict, e: Exception) -> tuple[int, dict]:
    """A handler failure as the stack's JSON-RPC dispatcher answers it on a handshake-era session (HTTP 200)."""
    from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
    from mcp_types import ErrorData

    error = handler_exception_to_error_data(e)
    if error is None:  # as the dispatcher: logged, and code 0 (its pinned compatibility answer)
        logger.exception("handler for %r raised", message["method"])
        error = ErrorData(code=0, message=str(e))
    return 200, jsonrpc.error_reply(message["id"], error.model_dump(mode="json", by_alias=True, exclude_unset=True))
