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
    server = uvicorn.Server(uvicorn.Config(gateway.app(), log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await task
