"""The JSON-RPC 2.0 data plane served at `POST /agentenv`: `data/reset`, `data/add`, `data/get`.

Answers are always HTTP 200 with a JSON-RPC body, as the reference's servers answer:

- unparseable body → `-32700 "parse error"`; not a JSON-RPC 2.0 request object → `-32600 "invalid request"`;
- a method the env has no handler for → `-32601 "method not found: data/get"`;
- bad params (`data/add` needs `{"parts": [Part, ...]}` with at least one part) → `-32602 "invalid_request"`
  with `data: {"detail": ...}`;
- a handler that fails → `-32000` with the message and `data: {"code": "reset_failed" | "add_failed" |
  "get_failed"}`, or an `EnvError`'s fields as `data`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from agentenv_local.jsonrpc import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, SERVER_ERROR
from agentenv_local.jsonrpc import error as rpc_error
from agentenv_local.jsonrpc import result as rpc_result

from ._params import describe_validation_error
from .card import METHOD_ADD, METHOD_GET, METHOD_RESET, AddDataRequest, GetDataResponse
from .errors import EnvError, find_env_error

if TYPE_CHECKING:
    from .runtime import Runtime

logger = logging.getLogger(__name__)

_FAILURE_CODES = {METHOD_RESET: "reset_failed", METHOD_ADD: "add_failed", METHOD_GET: "get_failed"}


class _InvalidParams(Exception):
    pass


def _parts_out(value: Any) -> list[dict]:
    """What a `@get_data` handler returned, validated as parts and dumped to wire form."""
    if isinstance(value, GetDataResponse):
        response = value
    elif isinstance(value, dict) and "parts" in value:
        response = GetDataResponse.model_validate(value)
    else:
        if isinstance(value, (BaseModel, dict)):
            value = [value]
        items = [p.model_dump(mode="json") if isinstance(p, BaseModel) else p for p in (value or [])]
        response = GetDataResponse.model_validate({"parts": items})
    return [p.model_dump(mode="json", exclude_none=True) for p in response.parts]


async def dispatch(runtime: Runtime, request: dict | bytes | str | None) -> dict:
    """Answer one data-plane request (already parsed, or the raw body)."""
    if isinstance(request, (bytes, str)):
        from agentenv_local.untrusted import UntrustedInputError, parse_json

        try:  # bounded: a deeply nested body is a parse error, not a RecursionError
            request = parse_json(request, what="the request") if request else None
        except UntrustedInputError as e:
            return rpc_error(None, PARSE_ERROR, "parse error", None if "not valid JSON" in str(e) else str(e))
    if not isinstance(request, dict) or request.get("jsonrpc") != "2.0" or not isinstance(request.get("method"), str):
        rid = request.get("id") if isinstance(request, dict) else None
        return rpc_error(rid, INVALID_REQUEST, "invalid request")
    rid = request.get("id")
    method = request["method"]
    handler = runtime.ops.get(method)
    if handler is None:
        return rpc_error(rid, METHOD_NOT_FOUND, f"method not found: {method}")
    params = request.get("params")
    if params is None:
        params = {}
    try:
        if not isinstance(params, dict):
            raise _InvalidParams(f"{method} takes its params by name (a JSON object)")
        if method == METHOD_ADD:
            try:
                parts = AddDataRequest.model_validate(params).parts
            except ValidationError as e:
                raise _InvalidParams(describe_validation_error(e)) from None
            await runtime.invoke(handler, parts)
            return rpc_result(rid, {})
        if method == METHOD_RESET:
            await runtime.invoke(handler)
            return rpc_result(rid, {})
        value = await runtime.invoke(handler)
        try:
            parts_out = _parts_out(value)
        except ValidationError as e:
            raise RuntimeError(f"the data/get handler returned something that is not a list of parts: "
                               f"{describe_validation_error(e)}") from None
        return rpc_result(rid, {"parts": parts_out})
    except _InvalidParams as e:
        return rpc_error(rid, INVALID_PARAMS, "invalid_request", {"detail": str(e)})
    except Exception as e:
        error = find_env_error(e)
        if error is not None:
            return rpc_error(rid, SERVER_ERROR, error.message, error.fields())
        logger.exception("%s failed in env %r", method, runtime.name)
        return rpc_error(rid, SERVER_ERROR, str(e) or type(e).__name__, {"code": _FAILURE_CODES[method]})


__all__ = ["EnvError", "dispatch", "rpc_error", "rpc_result"]
