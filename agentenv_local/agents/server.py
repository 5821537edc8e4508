"""The A2A server for an ``Agent``: JSON-RPC (0.3 and 1.0 method names), the card, and the AgentEnv extensions.

Routes:
    GET  /.well-known/agent-card.json, /.well-known/agent.json   the agent card: the 1.0 card when the request
                                                                  says ``A2A-Version: 1.x``, else the 0.3 card
    GET  /health                                                  {"status": "ok"}
    POST /a2a (and /)                                             JSON-RPC: message/send, tasks/get, tasks/cancel,
                                                                  tasks/list, message/stream, tasks/resubscribe
                                                                  (0.3) and SendMessage, GetTask, CancelTask,
                                                                  ListTasks (task_list.py), SendStreamingMessage,
                                                                  SubscribeToTask (1.0); the streaming ones answer
                                                                  SSE (streaming.py); the push-notification config
                                                                  methods answer -32003 (not supported) and the
                                                                  extended card ones -32007 (not configured)
    POST|GET /ext/agent-config                                    agent-config/v1 set / get
    POST|GET /ext/mcp-config                                      mcp-config/v1 add / list
    POST|GET /ext/skill-config                                    skill-config/v1 add / list
    POST     /ext/trajectory                                      trajectory/v1 get
    POST /ext/triggers, POST /ext/triggers/decide, GET /ext/triggers   triggers/v1 register / decide / state
    POST|GET /ext/peer-agents                                     peer-agents/v1 set / list
    GET|POST|DELETE /ext/peer-agents/mcp                          the peer tools (MCP server ``peer_agents``)
    ...and whatever the agent's ``extra_routes()`` adds (its ``card_extensions()`` join the card's extensions)

The HTTP app is here; behind it: ``runtime.py`` (the JSON-RPC layer, no a2a-sdk: the dialect follows the method
name; each task's run), ``extensions.py`` (the ``/ext/...`` handlers: errors are HTTP 400/404/409 with
``{"detail": "..."}``), ``card.py``, ``task_records.py``.
"""

import contextlib
import os
import sys
from typing import Any

from agentenv_local.untrusted import UntrustedInputError, parse_json

from . import streaming, wire
from .base import Agent
from .card import CARD_PATHS, RPC_PATH
from .extensions import ExtensionError
from .peers import PEER_TOOLS_PATH, PeerToolsEndpoint
from .runtime import AgentRuntime, rpc_error
from .triggers import TriggerError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000


# --- the ASGI app -----------------------------------------------------------------------------------------

def create_app(agent: Agent, *, public_url: str | None = None, own_hosts: Any = ()) -> Any:
    """A Starlette app serving ``agent``, behind the HTTP guard (agentenv_local/http_guard.py: Host, Origin, body
    size; its own hosts are ``own_hosts`` and ``public_url``'s); ``app.state.runtime`` is its ``AgentRuntime``."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    runtime = AgentRuntime(agent, public_url=public_url)
    peer_tools = PeerToolsEndpoint(lambda: runtime.peers)

    def base_of(request: Request) -> str:
        return f"{request.url.scheme}://{request.url.netloc}"

    async def card(request: Request) -> JSONResponse:
        # A2A 1.0 clients send A2A-Version (the spec: without it, assume 0.3); each gets the card it parses
        dialect: wire.Dialect = "1.0" if request.headers.get("a2a-version", "").startswith("1.") else "0.3"
        return JSONResponse(runtime.card(base_of(request), dialect), headers={"Vary": "A2A-Version"})

    async def health(_request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def rpc(request: Request) -> Any:
        runtime.learn_own_base_url(request.scope)  # before any task is built: tasks get the peer tools' URL
        raw = await request.body()
        try:  # bounded: a deeply nested body is a parse error, not a RecursionError
            body = parse_json(raw, what="the body")
        except UntrustedInputError as e:
            why = "the body is not valid JSON" if "not valid JSON" in str(e) else str(e)
            return JSONResponse(rpc_error(None, wire.PARSE_ERROR, f"Parse error: {why}"))
        answer = await runtime.rpc(body)
        if isinstance(answer, streaming.EventStream):
            return streaming.sse_response(answer)
        return JSONResponse(answer)

    async def json_body(request: Request) -> dict:
        raw = await request.body()
        if not raw:
            return {}
        try:
            body = parse_json(raw, what="the body")
        except UntrustedInputError as e:
            raise ExtensionError(400, "the body is not valid JSON" if "not valid JSON" in str(e) else str(e)) \
                from None
        if not isinstance(body, dict):
            raise ExtensionError(400, "the body must be a JSON object")
        return body

    def ext(post: Any = None, get: Any = None) -> Any:
        async def endpoint(request: Request) -> JSONResponse:
            try:
                if request.method == "GET":
                    return JSONResponse(get())
                return JSONResponse(post(await json_body(request)))
            except ExtensionError as e:
                return JSONResponse({"detail": e.detail}, status_code=e.status)
            except TriggerError as e:
                return JSONResponse({"detail": str(e)}, status_code=400)
        return endpoint

    def methods(post: Any, get: Any) -> list[str]:
        return [m for m, f in (("POST", post), ("GET", get)) if f is not None]

    extensions = [
        ("/ext/agent-config", runtime.agent_config_set, runtime.agent_config_get),
        ("/ext/mcp-config", runtime.mcp_add, runtime.mcp_list),
        ("/ext/skill-config", runtime.skill_add, runtime.skill_list),
        ("/ext/trajectory", runtime.trajectory_get, None),
        ("/ext/triggers", runtime.triggers.register, runtime.triggers.state),
        ("/ext/triggers/decide", runtime.triggers.decide, None),
        ("/ext/peer-agents", runtime.peers_set, runtime.peers_list),
    ]
    routes = [Route(p, card, methods=["GET"]) for p in CARD_PATHS]
    routes += [Route("/health", health, methods=["GET"]),
               Route(RPC_PATH, rpc, methods=["POST"]),
               Route("/", rpc, methods=["POST"])]
    routes += [Route(path, ext(post, get), methods=methods(post, get)) for path, post, get in extensions]
    routes.append(Route(PEER_TOOLS_PATH, peer_tools))  # an ASGI app (built on first use)
    routes += list(agent.extra_routes())

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any):
        async with peer_tools.running():  # the tasks end first: they may be calling the peer tools
            try:
                yield
            finally:
                await runtime.shutdown()

    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.runtime = runtime
    from urllib.parse import urlsplit

    from agentenv_local.env.app import guarded

    return guarded(app, [*own_hosts, *([urlsplit(public_url).hostname or ""] if public_url else [])])


def resolve_bind(host: str | None, port: int | str | None) -> tuple[str, int]:
    from agentenv_local.env.serve import resolve_bind as env_resolve

    host = host or os.environ.get("A2A_HOST") or DEFAULT_HOST
    if port is None:
        port = os.environ.get("A2A_PORT") or DEFAULT_PORT
    return env_resolve(host, port)


def serve(agent: Agent, host: str | None = None, port: int | None = None, *, log_level: str = "warning",
          announce: bool = True, public_url: str | None = None) -> None:
    """Serve ``agent`` over HTTP until interrupted (host/port default to $A2A_HOST/$A2A_PORT, then
    127.0.0.1:8000; port 0 = any free port). Prints the "serving on" line to stderr once listening."""
    import uvicorn

    from agentenv_local.env.serve import KEEP_ALIVE_S, bind_socket

    host, port = resolve_bind(host, port)
    sock = bind_socket(host, port)
    port = sock.getsockname()[1]
    app = create_app(agent, public_url=public_url, own_hosts=[host])
    server = uvicorn.Server(uvicorn.Config(app, log_level=log_level, lifespan="on", timeout_graceful_shutdown=3,
                                           access_log=False, timeout_keep_alive=KEEP_ALIVE_S))
    if announce:
        shown = f"[{host}]" if ":" in host else host
        print(f"agentenv agent {agent.name!r} serving on http://{shown}:{port} (card {CARD_PATHS[0]}, "
              f"a2a {RPC_PATH})", file=sys.stderr, flush=True)
    server.run(sockets=[sock])
