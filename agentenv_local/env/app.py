"""The env's HTTP surface, as one Starlette app:

| Route | What |
|---|---|
| `GET /.well-known/agent-env.json` | the Environment Card |
| `GET /ready` | 200 `{"ok": true}` once serving (503 while starting or stopping) |
| `POST /agentenv` | the JSON-RPC data plane (`data/reset`, `data/add`, `data/get`) |
| `<verb> /agentenv/ext/...` | each `@extension` route |
| `GET/POST/DELETE /mcp` | MCP streamable HTTP (mcp 2.x `StreamableHTTPSessionManager`) |

`/mcp` serves the 2026 stateless revision and the older handshake revisions with `Mcp-Session-Id` sessions.

Every request passes the HTTP guard (agentenv_local/http_guard.py): a `Host` of loopback, the server's own
address or `[security] allowed_hosts` (DNS rebinding), an allowed `Origin` or none, a bounded body. With an
admin token (the hub gives the env servers it starts one in `AGENTENV_ADMIN_TOKEN`), `POST /agentenv` needs
`Authorization: Bearer <token>`: only the gateway in front of it, and the task's steps through it, may reset or
load its data. Bind an env to loopback (the default) unless something outside must reach it.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import os
from typing import TYPE_CHECKING, Any

from agentenv_local import jsonrpc
from agentenv_local.http_guard import ADMIN_TOKEN_ENV

if TYPE_CHECKING:
    from .runtime import Runtime




def _json(body: Any, status: int = 200) -> Any:
    from starlette.responses import Response

    return Response(json.dumps(body, default=str, ensure_ascii=False), status_code=status,
                    media_type="application/json")


def admin_token_from_environ() -> str | None:
    """The data-plane credential the hub passed in the environment, taken out of it (the env's own code and
    the processes it starts never see it)."""
    return os.environ.pop(ADMIN_TOKEN_ENV, None) or None


def data_plane_refusal(admin_token: str | None, headers: Any) -> Any:
    """None when the request may use the data plane; else the 401 answer."""
    if admin_token is None:
        return None
    scheme, _, token = (headers.get("authorization") or "").strip().partition(" ")
    if scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), admin_token.encode()):
        return None
    return _json(jsonrpc.error(None, -32001, "the data plane of this env server needs its admin token "
                                             "(Authorization: Bearer <token>); reach it through the env's gateway"),
                 401)


def guarded(app: Any, own_hosts: Any = (), guard: Any = None) -> Any:
    """``app`` behind the HTTP guard: ``guard`` (a GuardPolicy), else the `[security]` settings plus ``own_hosts``."""
    from agentenv_local.http_guard import GuardPolicy, HttpGuard

    return HttpGuard(app, guard if guard is not None else GuardPolicy.from_settings(own_hosts=own_hosts))


async def _extension_response(runtime: Runtime, served: Any, request: Any) -> Any:
    """Answer one request to an extension endpoint: its params (the query of a GET, else the JSON body), invoked."""
    from . import extensions as ext_mod

    if served.method == "GET":
        params: Any = dict(request.query_params)
    else:
        raw = await request.body()
        try:
            params = json.loads(raw) if raw.strip() else {}
        except ValueError as e:
            status, body = ext_mod.invalid_params(f"the request body is not JSON: {e}")
            return _json(body, status)
    status, body = await ext_mod.invoke(runtime, served, params, headers=request.headers)
    return _json(body, status)


def build_app(runtime: Runtime, *, mcp_path: str = "/mcp", json_response: bool = True, stateless: bool = False,
              session_idle_timeout: float | None = 30 * 60, admin_token: str | None = None,
              own_hosts: Any = (), guard: Any = None) -> Any:
    from mcp.server.streamable_http_manager import (
        StreamableHTTPASGIApp,
        StreamableHTTPSessionManager,
    )
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.routing import Route

    from . import extensions as ext_mod
    from .card import RPC_PATH, WELL_KNOWN_PATH

    card_body = runtime.card(mcp_path).to_wire()
    state = {"ready": False}
    manager = StreamableHTTPSessionManager(
        app=runtime.mcp_server(),
        json_response=json_response,
        stateless=stateless,
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        session_idle_timeout=None if stateless else session_idle_timeout,
    )

    async def card(request: Request) -> Any:
        nonlocal card_body
        card_body = runtime.card(mcp_path).to_wire()  # cached by the runtime; rebuilt after update_tool
        return _json(card_body)

    async def ready(request: Request) -> Any:
        return _json({"ok": True}) if state["ready"] else _json({"ok": False, "error": "not serving yet"}, 503)

    async def rpc(request: Request) -> Any:
        refused = data_plane_refusal(admin_token, request.headers)
        if refused is not None:
            return refused
        return _json(await runtime.data_rpc(await request.body()))

    def extension_endpoint(served: ext_mod.ServedExtension) -> Any:
        async def endpoint(request: Request) -> Any:
            return await _extension_response(runtime, served, request)

        return endpoint

    routes: list[Any] = [
        Route(WELL_KNOWN_PATH, card, methods=["GET"]),
        Route("/ready", ready, methods=["GET"]),
        Route(RPC_PATH, rpc, methods=["POST"]),
    ]
    for served in runtime.extensions:
        routes.append(Route(served.route, extension_endpoint(served), methods=[served.method]))
    routes.append(Route(mcp_path, StreamableHTTPASGIApp(manager)))

    @contextlib.asynccontextmanager
    async def lifespan(app: Any):
        async with manager.run():  # enters the mcp server's lifespan: the env's on_startup/on_shutdown
            state["ready"] = True
            try:
                yield
            finally:
                state["ready"] = False

    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.agentenv_runtime = runtime
    app.state.mcp_session_manager = manager
    return guarded(app, own_hosts, guard)
