"""The gateway's HTTP surface (a Starlette app): MCP at `/mcp` and the reference's REST control plane.
See docs/environments/gateway.md.

Every request passes the HTTP guard (agentenv_local/http_guard.py: Host, Origin, body size). The control plane's
writes (RBAC, clock and trigger writes, the data plane, non-GET /svc requests) need the gateway's admin token
(`Authorization: Bearer <token>`) unless the gateway was built with `control_plane_auth=False`."""

from __future__ import annotations

import contextlib
import json
import logging
from typing import TYPE_CHECKING, Any

from agentenv_local import jsonrpc
from agentenv_local.untrusted import UntrustedInputError, parse_json

from .clock import ClockError
from .fastpath import McpFastPath
from .rbac import RbacError
from .server import GatewayError

if TYPE_CHECKING:
    from .server import Gateway

logger = logging.getLogger(__name__)

_HOP_HEADERS = {"host", "content-length", "connection", "transfer-encoding", "keep-alive", "upgrade",
                "proxy-connection", "te", "trailer"}
ADMIN_NEEDED = ("this control-plane endpoint needs the env instance's admin token "
                "(Authorization: Bearer <token>)")
ADMIN_HINT = ("print it with `agentenv env instances INSTANCE --admin-token`; agents act through MCP or /step "
              "with their role")


def _json(body: Any, status: int = 200) -> Any:
    from starlette.responses import Response

    return Response(json.dumps(body, default=str, ensure_ascii=False), status_code=status,
                    media_type="application/json")


def _role(gateway: Gateway, request: Any) -> str:
    return gateway.access.resolve(request.headers)


def require_admin(gateway: Gateway, request: Any) -> None:
    """GatewayError 401 unless the request may use the control plane (see Gateway.is_admin)."""
    if not gateway.is_admin(request.headers):
        raise GatewayError(401, ADMIN_NEEDED, hint=ADMIN_HINT)


def child_headers(gateway: Gateway, child: Any, headers: dict[str, str]) -> dict[str, str]:
    """What the gateway forwards to a child: never the caller's admin or role token (with the reference's open
    control plane, the headers as they came); the child's own token when it has one."""
    out = headers
    if gateway.admin_token is not None:
        out = {k: v for k, v in headers.items() if k.lower() != "authorization"}
    if child.spec.token:
        out["Authorization"] = f"Bearer {child.spec.token}"
    return out


def build_app(gateway: Gateway) -> Any:
    from mcp.server.streamable_http_manager import (
        StreamableHTTPASGIApp,
        StreamableHTTPSessionManager,
    )
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    manager = StreamableHTTPSessionManager(
        app=gateway.mcp_server(), json_response=True, stateless=False,
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        session_idle_timeout=30 * 60)
    gateway.handshake_sessions.attach(manager)  # the fast path answers the sessions it opens (sessions.py)

    async def body_of(request: Request) -> Any:
        raw = await request.body()
        try:
            return parse_json(raw, what="the request body") if raw.strip() else None
        except UntrustedInputError as e:  # the reference's body; why, when it is more than a syntax error
            extra = {} if "not valid JSON" in str(e) else {"detail": str(e)}
            raise GatewayError(400, "Invalid JSON body", **extra) from None

    def handler(fn: Any) -> Any:
        async def endpoint(request: Request) -> Any:
            try:
                return await fn(request)
            except GatewayError as e:
                return _json(e.body, e.status)
            except RbacError as e:
                return _json(e.to_wire(), e.status)
        return endpoint

    async def card(request: Request) -> Any:
        return _json(await gateway.card())

    async def data_plane(request: Request) -> Any:
        if not gateway.is_admin(request.headers):  # before reading the body
            return _json({"error": ADMIN_NEEDED, "hint": ADMIN_HINT}, 401)
        raw = await request.body()
        try:
            body = parse_json(raw, what="the request body")
        except UntrustedInputError as e:
            return _json(jsonrpc.error(None, jsonrpc.PARSE_ERROR, "Parse error", str(e)))
        if not isinstance(body, dict):
            return _json(jsonrpc.error(None, jsonrpc.INVALID_REQUEST, "Invalid request"))
        rid, method = body.get("id"), body.get("method")
        if method not in ("data/reset", "data/add", "data/get"):
            return _json(jsonrpc.error(rid, jsonrpc.METHOD_NOT_FOUND, f"Method not found: {method}"))
        if len(gateway.children) != 1:
            return _json(jsonrpc.error(rid, jsonrpc.SERVER_ERROR, f"env-level {method} requires exactly one backing "
                                                                  f"server, found {len(gateway.children)}"))
        child = gateway.children[0]
        if child.env is not None:
            return _json(await child.env._ae_runtime().data_rpc(raw))
        import httpx2

        try:
            async with httpx2.AsyncClient(timeout=3600) as http:
                r = await http.post(f"{child.base}/agentenv", content=raw,
                                    headers=child_headers(gateway, child, {"content-type": "application/json"}))
        except Exception as e:
            return _json(jsonrpc.error(rid, jsonrpc.SERVER_ERROR, f"forward failed: {e}"))
        return Response(r.content, status_code=r.status_code,
                        media_type=r.headers.get("content-type", "application/json"))

    @handler
    async def tools_disable(request: Request) -> Any:
        require_admin(gateway, request)
        return _json(gateway.change_access("disable", await body_of(request)))

    @handler
    async def tools_enable(request: Request) -> Any:
        require_admin(gateway, request)
        return _json(gateway.change_access("enable", await body_of(request)))

    @handler
    async def state(request: Request) -> Any:
        return _json(gateway.state())

    @handler
    async def step(request: Request) -> Any:
        gateway.ensure_ready()
        body = await body_of(request)
        return _json(await gateway.step(body, _role(gateway, request)))

    async def clock_set(request: Request) -> Any:
        if not gateway.is_admin(request.headers):
            return _json({"ok": False, "error": ADMIN_NEEDED, "hint": ADMIN_HINT}, 401)
        try:
            body = await body_of(request)
        except GatewayError:
            return _json({"ok": False, "error": "Invalid JSON body"}, 400)
        try:
            return _json(gateway.arm_clock(body))
        except GatewayError as e:
            return _json(e.body | {"ok": False}, e.status)
        except ClockError as e:
            return _json(e.to_wire(), e.status)

    async def clock_clear(request: Request) -> Any:
        if not gateway.is_admin(request.headers):
            return _json({"ok": False, "error": ADMIN_NEEDED, "hint": ADMIN_HINT}, 401)
        return _json(gateway.clear_clock())

    async def clock_time(request: Request) -> Any:
        try:
            return _json(gateway.clock.time_response())
        except ClockError as e:
            return _json(e.to_wire(), e.status)

    async def clock_state(request: Request) -> Any:
        body = gateway.clock.state()
        if body.get("armed"):
            body["env_get_time_url"] = f"{request.base_url}".rstrip("/") + "/clock/time"
        return _json(body)

    def trigger_write(method_name: str) -> Any:
        async def endpoint(request: Request) -> Any:
            from .triggers import TriggerError

            if not gateway.is_admin(request.headers):
                return _json({"ok": False, "error": ADMIN_NEEDED, "hint": ADMIN_HINT}, 401)
            try:
                body = await body_of(request)
            except GatewayError:
                return _json({"ok": False, "error": "Invalid JSON body"}, 400)
            try:
                return _json(getattr(gateway.engine, method_name)(body))
            except TriggerError as e:
                return _json(e.to_wire(), e.status)
        return endpoint

    async def triggers_clear(request: Request) -> Any:
        if not gateway.is_admin(request.headers):
            return _json({"ok": False, "error": ADMIN_NEEDED, "hint": ADMIN_HINT}, 401)
        return _json(gateway.engine.clear())

    async def triggers_state(request: Request) -> Any:
        return _json(gateway.engine.state())

    async def trajectory(request: Request) -> Any:
        text = gateway.trajectory_jsonl()
        return Response(text, media_type="application/jsonl",
                        headers={"X-Trajectory-Total-Bytes": str(len(text.encode()))})

    async def changes(request: Request) -> Any:
        from .changes import NO_CHANGELOG, ChangesError, page_params

        if not gateway.changes.keeps:
            return _json({"ok": False, "error": NO_CHANGELOG}, 404)
        try:
            after_id, limit = page_params(request.query_params.get("after_id"), request.query_params.get("limit"))
        except ChangesError as e:
            return _json(e.to_wire(), e.status)
        return _json(gateway.changes.page(after_id, limit))

    async def svc(request: Request) -> Any:
        service = request.path_params["service"]
        path = request.path_params.get("path", "")
        child = next((c for c in gateway.children if f"mcp-{c.name}" == service), None)
        if child is None:
            return _json({"error": f"Unknown service: {service}"}, 404)
        if request.method != "GET" and not gateway.is_admin(request.headers):  # data plane, extension writes
            return _json({"error": ADMIN_NEEDED, "hint": ADMIN_HINT}, 401)
        if child.env is not None:
            return await _inprocess(child, request, "/" + path)
        import httpx2

        headers = child_headers(gateway, child, {k: v for k, v in request.headers.items()
                                                 if k.lower() not in _HOP_HEADERS})
        url = f"{child.base}/{path}"
        try:
            async with httpx2.AsyncClient(timeout=httpx2.Timeout(3600, connect=10)) as http:
                r = await http.request(request.method, url, params=dict(request.query_params),
                                       content=await request.body(), headers=headers)
        except Exception as e:
            return _json({"error": f"Proxy request failed: {e!r}"}, 502)
        out = {k: v for k, v in r.headers.items() if k.lower() not in _HOP_HEADERS | {"content-encoding"}}
        return Response(r.content, status_code=r.status_code, headers=out)

    async def _inprocess(child: Any, request: Request, path: str) -> Any:
        app = gateway.svc_app(child)
        scope = dict(request.scope)
        scope.update(path=path, raw_path=path.encode(), root_path="")
        scope.pop("router", None)
        scope.pop("endpoint", None)
        scope.pop("path_params", None)
        body = await request.body()
        sent = False

        async def receive() -> dict:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return {"type": "http.disconnect"}

        status = 500
        headers: list = []
        chunks: list[bytes] = []

        async def send(message: dict) -> None:
            nonlocal status, headers
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = message.get("headers") or []
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        await app(scope, receive, send)
        out = {k.decode("latin-1"): v.decode("latin-1") for k, v in headers if k.lower() != b"content-length"}
        return Response(b"".join(chunks), status_code=status, headers=out)

    routes = [
        Route("/.well-known/agent-env.json", card, methods=["GET"]),
        Route("/agentenv", data_plane, methods=["POST"]),
        Route("/tools/disable", tools_disable, methods=["POST"]),
        Route("/tools/enable", tools_enable, methods=["POST"]),
        Route("/state", state, methods=["GET"]),
        Route("/step", step, methods=["POST"]),
        Route("/clock/set-time", clock_set, methods=["PUT"]),
        Route("/clock/clear", clock_clear, methods=["POST"]),
        Route("/clock/time", clock_time, methods=["GET"]),
        Route("/clock/state", clock_state, methods=["GET"]),
        Route("/triggers/register", trigger_write("register"), methods=["POST"]),
        Route("/triggers/remove", trigger_write("remove"), methods=["POST"]),
        Route("/triggers/clear", triggers_clear, methods=["POST"]),
        Route("/triggers/state", triggers_state, methods=["GET"]),
        Route("/trajectory", trajectory, methods=["GET"]),
        Route("/changes", changes, methods=["GET"]),
        Route("/svc/{service}/{path:path}", svc, methods=["GET", "POST", "PUT", "DELETE", "PATCH"]),
        Route("/mcp", StreamableHTTPASGIApp(manager)),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Any):
        await gateway.start()
        gateway.start_driver()
        try:  # which children keep a changelog (their cards say; in-process ones are known already)
            await gateway.changes.learn(gateway.children, gateway.child_card)
        except Exception:  # not knowing only delays it to the first changed row
            logger.exception("gateway %s: reading its children's cards for changes/v1 failed", gateway.name)
        try:
            async with manager.run():
                yield
        finally:
            await gateway.aclose()

    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.gateway = gateway
    from agentenv_local.http_guard import HttpGuard

    return HttpGuard(McpFastPath(app, gateway), gateway.guard)
