"""Serving an ASGI app in the hub: uvicorn as a task on the hub's loop, on 127.0.0.1 and a free port. One way
for everything the hub serves itself: env gateways, env servers loaded in the hub, agents run in the hub.

A started app also registers in agentenv_local/inproc.py, so the hub's own clients reach it without the socket;
stopping it unregisters it first (later requests take the network) and ends its in-process requests last."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

START_TIMEOUT_S = 30.0


class NotStarted(Exception):
    """The server did not start: its task ended (with `error`, if any), or START_TIMEOUT_S passed (`timed_out`:
    its task is still there, for the caller to stop)."""

    def __init__(self, server: Any, task: asyncio.Task, *, error: BaseException | None = None,
                 timed_out: bool = False) -> None:
        super().__init__(f"did not start: {error!r}" if not timed_out else "did not start in time")
        self.server = server
        self.task = task
        self.error = error
        self.timed_out = timed_out


async def start_server(app: Any, *, task_name: str, http: Any = None) -> tuple[Any, asyncio.Task, int]:
    """Start serving `app` (with uvicorn's HTTP protocol `http`, if given) and wait until it listens;
    (the uvicorn Server, its task, its port). Raises NotStarted, leaving the task to the caller."""
    import uvicorn

    # one place makes listening sockets right (TCP_NODELAY) and says how long idle connections stay open
    from agentenv_local.env.serve import KEEP_ALIVE_S, bind_socket

    sock = bind_socket("127.0.0.1", 0)
    sock.setblocking(False)
    port = sock.getsockname()[1]
    options: dict[str, Any] = {"http": http} if http is not None else {}
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2,
                                           access_log=False, timeout_keep_alive=KEEP_ALIVE_S, **options))
    loop = asyncio.get_running_loop()
    task = loop.create_task(server.serve(sockets=[sock]), name=task_name)
    deadline = loop.time() + START_TIMEOUT_S
    while not server.started:
        if task.done():
            raise NotStarted(server, task, error=task.exception() if not task.cancelled() else None)
        if loop.time() > deadline:
            raise NotStarted(server, task, timed_out=True)
        await asyncio.sleep(0.005)
    from agentenv_local import inproc

    inproc.register(server, port)
    return server, task, port


async def stop_server(server: Any, task: asyncio.Task | None) -> None:
    """Stop a server `start_server` started: gracefully for up to 8 s, then forced."""
    from agentenv_local import inproc

    gone = inproc.unregister(server)
    server.should_exit = True
    try:
        if task is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), 8)
        except (TimeoutError, Exception):  # stop it the hard way
            server.force_exit = True
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
    finally:
        inproc.abort_open(gone)  # what is still open in-process ends as uvicorn's connections did
