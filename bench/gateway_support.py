"""Serving a Gateway over in-process envs on a free loopback port, for the benchmarks."""

from __future__ import annotations

import asyncio
import contextlib


@contextlib.asynccontextmanager
async def serve_gateway(children: dict, name: str = "bench"):
    import uvicorn

    from agentenv_local.gateway.children import ChildSpec
    from agentenv_local.gateway.server import Gateway

    gateway = Gateway(name, [ChildSpec(n, env) for n, env in children.items()])
    from agentenv_local.env.serve import bind_socket

    sock = bind_socket("127.0.0.1", 0)
    from agentenv_local.gateway.fastpath import protocol_class

    # as Gateway.serve: its own HTTP protocol answers 2026-revision tools/call and tools/list off the socket
    server = uvicorn.Server(uvicorn.Config(gateway.app(), log_level="warning", lifespan="on",
                                           http=protocol_class(gateway)))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await task


def forward(upstream: str) -> None:
    """A do-nothing proxy: every connection is piped byte for byte to ``upstream`` (``http://host:port``). It
    prints ``forwarding on http://...`` to stderr, then serves until killed. The benchmark measures it as the
    floor of any extra hop in Python on this machine (two more sends, two more wake-ups per call)."""
    import sys
    from urllib.parse import urlsplit

    from agentenv_local.env.serve import bind_socket

    target = urlsplit(upstream)

    async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
        finally:
            writer.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(target.hostname, target.port)
        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer), return_exceptions=True)

    async def main() -> None:
        sock = bind_socket("127.0.0.1", 0)
        server = await asyncio.start_server(handle, sock=sock)
        print(f"forwarding on http://127.0.0.1:{sock.getsockname()[1]}", file=sys.stderr, flush=True)
        async with server:
            await server.serve_forever()

    asyncio.run(main())
