"""JSON-RPC 2.0 envelopes: the one place that builds them, for every speaker of JSON-RPC in the package.

Used by the gateway (its MCP fast path and its ``POST /agentenv`` data plane), the env SDK's data plane, the
agents' A2A server and client, and the steps that call an env's data plane.

    request("data/add", {"parts": parts})          # {"jsonrpc": "2.0", "id": 1, "method": ..., "params": ...}
    result(rid, {"parts": []})                     # {"jsonrpc": "2.0", "id": rid, "result": ...}
    error(rid, METHOD_NOT_FOUND, "method not found: x")           # data only when given

The key order of each envelope is the wire's (``jsonrpc``, ``id``, then ``method``/``params``, ``result`` or
``error``), so an encoded envelope is byte for byte what it was when each module wrote its own. Reading a
reply stays with each caller: what an error reply becomes (A2ARpcError, MCPError, a step's failure) is theirs.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "INTERNAL_ERROR", "INVALID_PARAMS", "INVALID_REQUEST", "METHOD_NOT_FOUND", "PARSE_ERROR", "SERVER_ERROR",
    "VERSION", "error", "error_reply", "request", "result",
]

VERSION = "2.0"

# the codes JSON-RPC 2.0 defines (-32000 is the first of the implementation-defined server errors)
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_ERROR = -32000


def request(method: str, params: Any = None, id: Any = 1) -> dict[str, Any]:  # `id`: the wire's name
    """A request envelope; ``params`` None sends ``{}`` (every method here takes an object)."""
    return {"jsonrpc": VERSION, "id": id, "method": method, "params": {} if params is None else params}


def result(id: Any, value: Any) -> dict[str, Any]:
    """A success reply to the request ``id``."""
    return {"jsonrpc": VERSION, "id": id, "result": value}


def error(id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    """An error reply to the request ``id`` (None when it could not be read); ``data`` is left out when None."""
    body: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return {"jsonrpc": VERSION, "id": id, "error": body}


def error_reply(id: Any, body: dict[str, Any]) -> dict[str, Any]:
    """An error reply whose error object is already built (e.g. by the mcp stack)."""
    return {"jsonrpc": VERSION, "id": id, "error": body}
