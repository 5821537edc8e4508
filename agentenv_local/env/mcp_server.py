"""The env's MCP server on mcp 2.x: a low-level `mcp.server.lowlevel.Server` whose `tools/list` and
`tools/call` handlers are the env's runtime (so every transport shares one dispatch path).

Why the low-level server: the tool schemas, `_meta` (hidden-by-default), result shapes and the caller's
role/session/virtual time (read from the request `_meta` and, over HTTP, `ctx.request.headers`) are all the
SDK's own; handlers return wire dicts, which mcp's runner validates per protocol revision.

Transports, all from this one object:
- in-process: `mcp.Client(server)` (mode "auto" = the 2026 stateless revision through a direct dispatcher;
  mode "legacy" = the initialize handshake over in-memory streams);
- streamable HTTP: `StreamableHTTPSessionManager(app=server)` + `StreamableHTTPASGIApp` (see app.py); it
  answers requests carrying a 2026 `MCP-Protocol-Version` header statelessly and everything else (the
  handshake revisions up to 2025-11-25 that mcp 1.x clients speak) with stateful `Mcp-Session-Id` sessions;
- stdio: `server.run(read, write, server.create_initialization_options())` inside
  `mcp.server.stdio.stdio_server()` (see serve.py); `Server.run` serves both eras too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .runtime import Runtime


def build_server(runtime: Runtime) -> Any:
    import contextlib

    from mcp.server.lowlevel import Server

    from agentenv_local import __version__

    # The 2026 revision requires resultType (and ttlMs/cacheScope on cacheable results); mcp's per-revision
    # sieve drops them again for the handshake revisions.
    async def on_list_tools(ctx: Any, params: Any) -> dict:
        return {"tools": runtime.tool_list(), "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}

    async def on_call_tool(ctx: Any, params: Any) -> dict:
        request = getattr(ctx, "request", None)
        headers = getattr(request, "headers", None) if request is not None else None
        result = await runtime.call_tool(params.name, params.arguments or {}, meta=params.meta or {},
                                         headers=headers, transport="mcp")
        result["resultType"] = "complete"
        return result

    @contextlib.asynccontextmanager
    async def lifespan(_server: Any):  # entered once per transport run (HTTP manager, stdio, in-process client)
        async with runtime.running():
            yield {}

    # mcp types these handlers' results as its models; its Server sends a plain dict as is, which keeps the
    # fields the models would drop (resultType, ttlMs, cacheScope)
    return Server(runtime.name, version=__version__, instructions=runtime.description, lifespan=lifespan,
                  get_tool_input_schema=runtime.input_schema,
                  on_list_tools=on_list_tools,  # type: ignore[arg-type]  # returns a plain dict (see above)
                  on_call_tool=on_call_tool)  # type: ignore[arg-type]  # returns a plain dict (see above)
