"""Card-advertised REST extensions: binding a request to the handler and shaping its answer.

A call's params are the JSON body (POST/PUT/PATCH/DELETE; empty body = `{}`) or the query string (GET),
validated and coerced to the handler's annotated parameters (pydantic lax mode: `"5"` → 5, ISO strings →
datetimes, ...). A parameter annotated `ToolContext` receives the caller (role from `AgentEnv-Role`).

Answers: the handler's return value as JSON (None → `{}`) with 200; bad params → 400
`{"ok": false, "error": {"code": "invalid_params", ...}}`; an `EnvError` → its status and fields; anything else
→ 500 `extension_failed` with `applied: "unknown"` (the handler may have done part of its work).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._params import ArgumentsError, Binding
from ._results import jsonable
from .context import ToolContext, _current
from .errors import EnvError, find_env_error

if TYPE_CHECKING:
    from .base import ExtensionDef
    from .runtime import Runtime

logger = logging.getLogger(__name__)


@dataclass
class ServedExtension:
    defn: ExtensionDef
    handler: Callable
    binding: Binding

    @property
    def uri(self) -> str:
        return self.defn.mark.uri

    @property
    def route(self) -> str:
        return self.defn.route

    @property
    def method(self) -> str:
        return self.defn.mark.method


def advertise(runtime: Runtime) -> list[dict]:
    """The card entries for the env's @extension handlers: one per URI, op handlers merged."""
    groups: dict[str, list[ServedExtension]] = {}
    for ext in runtime.extensions:
        groups.setdefault(ext.uri, []).append(ext)
    entries = []
    for uri, handlers in groups.items():
        first = handlers[0]
        mark = first.defn.mark
        if mark.op is None:
            params = dict(mark.params) if mark.params is not None else {
                "endpoint": first.route,
                "methods": {first.defn.attr: {"method": mark.method, "request": first.binding.schema}},
            }
        else:
            methods = {h.defn.mark.op: {"method": h.method, "endpoint": h.route, "request": h.binding.schema}
                       for h in handlers}
            params = {"methods": methods, **(runtime.env.extension_params(uri) or {})}
        description = next((h.defn.mark.description for h in handlers if h.defn.mark.description), None)
        flags = [h.defn.mark.required for h in handlers if h.defn.mark.required is not None]
        required = True if True in flags else (flags[0] if flags else None)
        entries.append({"uri": uri, "description": description, "params": params, "required": required})
    return entries


def invalid_params(message: str) -> tuple[int, dict]:
    return 400, EnvError("invalid_params", message).body()


async def invoke(runtime: Runtime, ext: ServedExtension, params: Any, *, headers: Any = None) -> tuple[int, dict]:
    """Run one extension call; returns (HTTP status, JSON body)."""
    if not isinstance(params, dict):
        return invalid_params("the request body must be a JSON object")
    ctx = ToolContext.from_request(f"{ext.uri}#{ext.defn.op_name}", params, meta=None, headers=headers,
                                   transport="rest")
    token = _current.set(ctx)
    try:
        try:
            kwargs = ext.binding.bind(params, ctx)
        except ArgumentsError as e:
            return invalid_params(str(e))
        result = await runtime.invoke(ext.handler, **kwargs)
        return 200, jsonable(result)
    except Exception as e:
        error = find_env_error(e)
        if error is None:
            logger.exception("extension %s (%s %s) failed in env %r", ext.uri, ext.method, ext.route, runtime.name)
            error = EnvError("extension_failed", str(e) or type(e).__name__, applied="unknown", status=500)
        return error.status, error.body()
    finally:
        _current.reset(token)
