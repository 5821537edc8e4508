"""`agentenv gateway stdio INSTANCE`: an env instance's gateway over stdio, for editors that start
MCP servers as commands (Claude Code, Cursor, VS Code).

The instance runs in the hub and serves MCP over streamable HTTP; this process speaks MCP on its
stdin/stdout and forwards `tools/list` and `tools/call` to it over one persistent client session,
with the role (header) or bearer token given on the command line.

Requests piped in are answered even when stdin closes right after them (see ``agentenv_local.mcp_stdio``).
"""

from __future__ import annotations

import contextlib
from typing import Any


def _as_wire(model: Any) -> dict:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def bridge(mcp_url: str, *, role: str | None = None, token: str | None = None, name: str = "agentenv") -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.server.lowlevel import NotificationOptions, Server

    from agentenv_local import __version__
    from agentenv_local.mcp_stdio import run_over_stdio

    headers = {}
    if role:
        headers["AgentEnv-Role"] = role
    if token:
        headers["Authorization"] = f"Bearer {token}"
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(600.0, connect=10.0))
    upstream_cm = Client(streamable_http_client(mcp_url, http_client=http), mode="legacy")

    async with http, upstream_cm as upstream:
        async def on_list_tools(ctx: Any, params: Any) -> dict:
            listed = await upstream.list_tools()
            return {"tools": [_as_wire(t) for t in listed.tools], "resultType": "complete", "ttlMs": 0,
                    "cacheScope": "private"}

        async def on_call_tool(ctx: Any, params: Any) -> dict:
            meta = dict(params.meta or {})
            result = await upstream.call_tool(params.name, params.arguments or {},
                                              meta=meta or None)  # type: ignore[arg-type]  # _meta as sent: a plain dict
            return {**_as_wire(result), "resultType": "complete"}

        @contextlib.asynccontextmanager
        async def lifespan(_server: Any):
            yield {}

        # mcp types these handlers' results as its models; its Server sends a plain dict as is, which keeps the
        # fields the models would drop (resultType, ttlMs, cacheScope)
        server = Server(name, version=__version__, lifespan=lifespan, on_list_tools=on_list_tools,  # type: ignore[arg-type]  # a dict result
                        on_call_tool=on_call_tool)  # type: ignore[arg-type]  # a dict result, as the comment above says
        options = server.create_initialization_options(NotificationOptions(tools_changed=True))
        await run_over_stdio(server, options)
