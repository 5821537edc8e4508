"""`agentenv gateway stdio INSTANCE`: an env instance's gateway over stdio, for editors that start
MCP servers as commands (Claude Code, Cursor, VS Code).

The instance runs in the hub and serves MCP over streamable HTTP; this process speaks MCP on its
stdin/stdout and forwards `tools/list` and `tools/call` to it over one persistent client session,
with the role (header) or bearer token given on the command line.

When the client closes stdin, the requests already read are still answered (for up to
``DRAIN_TIMEOUT_S``) before the bridge exits, so `printf '...' | agentenv gateway stdio ID` works from a
shell as well as from an editor that keeps the pipe open.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

DRAIN_TIMEOUT_S = 60.0  # how long answers to requests already read may still take once stdin has closed


def _as_wire(model: Any) -> dict:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def bridge(mcp_url: str, *, role: str | None = None, token: str | None = None, name: str = "agentenv") -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.server.lowlevel import NotificationOptions, Server
    from mcp.server.stdio import stdio_server

    from agentenv_local import __version__

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
            result = await upstream.call_tool(params.name, params.arguments or {}, meta=meta or None)
            return {**_as_wire(result), "resultType": "complete"}

        @contextlib.asynccontextmanager
        async def lifespan(_server: Any):
            yield {}

        server = Server(name, version=__version__, lifespan=lifespan, on_list_tools=on_list_tools,
                        on_call_tool=on_call_tool)
        options = server.create_initialization_options(NotificationOptions(tools_changed=True))
        async with stdio_server() as (read_stream, write_stream), \
                answering_in_flight(read_stream, write_stream) as (to_server, from_server):
            await server.run(to_server, from_server, options)


def _id_of(item: Any, *, request: bool) -> Any:
    """The JSON-RPC id of a request (``request``) or of a response/error; None for anything else."""
    message = getattr(item, "message", None)
    if message is None or getattr(message, "id", None) is None:
        return None
    return message.id if hasattr(message, "method") == request else None


@contextlib.asynccontextmanager
async def answering_in_flight(read_stream: Any, write_stream: Any,
                              drain_timeout: float = DRAIN_TIMEOUT_S) -> AsyncIterator[tuple[Any, Any]]:
    """Streams to run the server on, between it and stdio: they keep count of the client's requests not yet
    answered, and when stdin ends they keep the session open until those are answered (or ``drain_timeout``
    passes). mcp's server ends the session at stdin's end at once, failing what is in flight with "Connection
    closed"."""
    import anyio

    to_server_send, to_server = anyio.create_memory_object_stream(100)
    from_server, from_server_recv = anyio.create_memory_object_stream(100)
    waiting: set[Any] = set()

    async def client_to_server() -> None:
        async with to_server_send:
            async for item in read_stream:
                request_id = _id_of(item, request=True)
                if request_id is not None:
                    waiting.add(request_id)
                await to_server_send.send(item)
            with anyio.move_on_after(drain_timeout):
                while waiting:
                    await anyio.sleep(0.01)

    async def server_to_client() -> None:
        async with from_server_recv, write_stream:  # closing stdout's stream lets stdio_server's writer end
            async for item in from_server_recv:
                waiting.discard(_id_of(item, request=False))
                await write_stream.send(item)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(client_to_server)
        tasks.start_soon(server_to_client)
        try:
            yield to_server, from_server
        finally:
            await from_server.aclose()  # the server is done: what it wrote is flushed, then the pump ends
            tasks.cancel_scope.cancel()
