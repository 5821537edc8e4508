"""What the gateway answers on MCP: tools/call and tools/list results (refusals as isError results), and the
(HTTP status, JSON-RPC reply) the mcp server stack would send for them, shaped as the stack shapes them (cache
hints, the protocol version's sieve, the server-info stamp), for the hot path that answers without the stack
(fastpath.py; the tests compare the two).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from agentenv_local import jsonrpc

from .rbac import DEFAULT_ROLE, RbacError

if TYPE_CHECKING:
    from .server import Gateway

logger = logging.getLogger(__name__)

__all__ = ["SERVER_INFO_META_KEY", "McpResults", "error_result"]

SERVER_INFO_META_KEY = "io.modelcontextprotocol/serverInfo"


def error_result(text: str) -> dict:
    """A tools/call result that reports a failure to the model (``isError``)."""
    return {"content": [{"type": "text", "text": text}], "isError": True}


class McpResults:
    """The MCP answers of one gateway (``gateway.mcp_results``)."""

    def __init__(self, gateway: Gateway):
        self.gw = gateway
        self._server_info: dict | None = None

    async def call_result(self, headers: Any, meta: Any, session: str | None, name: str, arguments: Any) -> dict:
        """An MCP tools/call's result: refusals (RBAC, unknown tool, not ready) are isError results."""
        from .server import GatewayError

        gw = self.gw
        try:
            role = gw.access.resolve(headers, meta or {})
            result = await gw.call(name, arguments or {}, role=role, session=session)
        except GatewayError as e:
            result = error_result(e.body["error"])
        except RbacError as e:
            result = error_result(e.message if hasattr(e, "message") else str(e))
        return {**result, "resultType": "complete"}

    def list_result(self, headers: Any, meta: Any) -> dict:
        """An MCP tools/list's result: the tools the caller's role may see (none before discovery)."""
        gw = self.gw
        try:
            role = gw.access.resolve(headers, meta or {})
        except RbacError:
            role = DEFAULT_ROLE
        tools = gw.list_tools(role) if gw.discovered else []
        return {"tools": tools, "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}

    def reply(self, message: dict, version: str, result: dict) -> tuple[int, dict]:
        """The (HTTP status, JSON-RPC reply) the stack sends for a handler's ``result``."""
        from .fastpath import plain_call_result

        method = message["method"]
        try:
            # the usual plain call result is what the stack's sieve would answer; anything else goes through it
            if method != "tools/call" or not plain_call_result(result):
                result = self.serialize(method, version, result)
        except Exception as e:  # mapped to the wire exactly as the stack maps it
            return self.error(message, e)
        if result.get("resultType") is None:
            result["resultType"] = "complete"
        if self._server_info is None:
            self._server_info = self.gw.mcp_server().server_info_stamp
        meta = result.get("_meta")
        if meta is None:
            result["_meta"] = {SERVER_INFO_META_KEY: self._server_info}
        elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
            result["_meta"] = {**meta, SERVER_INFO_META_KEY: self._server_info}
        return 200, jsonrpc.result(message["id"], result)

    @staticmethod
    def error(message: dict, e: Exception) -> tuple[int, dict]:
        """The (HTTP status, JSON-RPC error reply) the stack sends for a handler that raised ``e``."""
        from mcp.server.runner import modern_error_data
        from mcp.shared.inbound import ERROR_CODE_HTTP_STATUS

        error = modern_error_data(e).model_dump(mode="json", by_alias=True, exclude_none=True)
        return ERROR_CODE_HTTP_STATUS.get(error["code"], 200), jsonrpc.error_reply(message["id"], error)

    def serialize(self, method: str, version: str, result: dict) -> dict:
        """The stack's outbound shaping of a handler's result: cache hints, then the version's sieve."""
        from mcp_types import methods
        from pydantic import ValidationError

        hint = self.gw.mcp_server().cache_hints.get(method)
        if hint is not None:
            result = {"ttlMs": hint.ttl_ms, "cacheScope": hint.scope, **result}
        try:
            return methods.serialize_server_result(method, version, result)
        except ValidationError:
            logger.exception("handler for %r returned an invalid result", method)
            from mcp.shared.exceptions import MCPError
            from mcp_types import INTERNAL_ERROR

            raise MCPError(code=INTERNAL_ERROR, message="Handler returned an invalid result") from None
