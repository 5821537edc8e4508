"""The env's HTTP surface, as one Starlette app:

| Route | What |
|---|---|
| `GET /.well-known/agent-env.json` | the Environment Card |
| `GET /ready` | 200 `{"ok": true}` once serving (503 while starting or stopping) |
| `POST /agentenv` | the JSON-RPC data plane (`data/reset`, `data/add`, `data/get`) |
| `<verb> /agentenv/ext/...` | each `@extension` route |
| `GET/POST/DELETE /mcp` | MCP streamable HTTP (mcp 2.x `StreamableHTTPSessionManager`): the 2026 stateless revision and the older handshake revisions with `Mcp-Session-Id` sessions |

DNS-rebinding protection is off, as on the reference's servers: a gateway reaches an env by a service name or
an address, not `localhost`. Bind an env to loopback (the default) unless something outside must reach it.
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .runtime import Runtime


def _json(body: Any, status: int = 200) -> Any:
    from starlette.responses import Response

    return Response(json.dumps(body, default=str, ensure_ascii=False), status_code=status,
                    media_type="application/json")


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
              session_idle_timeout: float | None = 30 * 60) -> Any:
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
    return app
