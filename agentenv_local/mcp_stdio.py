"""Serving an mcp 2.x low-level ``Server`` on stdin/stdout, for every stdio server of ours (an env, the docs,
the gateway bridge).

mcp's server ends the session as soon as stdin ends, failing (or dropping) the requests still in flight. A client
that pipes requests and closes stdin at once (``printf '...' | agentenv docs serve``) would get no answers, so
between stdio and the server sit streams that count the client's unanswered requests and, once stdin ends, keep
the session open until those are answered (or ``DRAIN_TIMEOUT_S`` passes).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

DRAIN_TIMEOUT_S = 60.0  # how long answers to requests already read may still take once stdin has closed


async def run_over_stdio(server: Any, options: Any) -> None:
    """``server.run`` on this process's stdin/stdout until the client is gone and every request is answered."""
    from mcp.server.stdio import stdio_server

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
    passes)."""
    import anyio

    to_server_send, to_server = anyio.create_memory_object_stream[Any](100)
    from_server, from_server_recv = anyio.create_memory_object_stream[Any](100)
    waiting: set[Any] = set()
    flushed = anyio.Event()  # everything the server wrote has been handed to stdout's stream

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
        flushed.set()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(client_to_server)
        tasks.start_soon(server_to_client)
        try:
            yield to_server, from_server
        finally:
            await from_server.aclose()  # the server is done: the pump passes on what it wrote, then ends
            with anyio.move_on_after(5):  # the last answer can still be on its way to stdout: let it go out
                await flushed.wait()
            tasks.cancel_scope.cancel()
