"""Serving an instance's HTTP app (its gateway's, or a lone env server's) with uvicorn as a task on the hub's
loop, on 127.0.0.1 and a free port; stopping it; reading the card it serves."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from pathlib import Path
from typing import Any

from .instance import DeployError, Instance

log = logging.getLogger(__name__)


def free_socket() -> socket.socket:
    # One place makes listening sockets right (IPPROTO_TCP, so accepted connections get TCP_NODELAY).
    from agentenv_local.env.serve import bind_socket

    sock = bind_socket("127.0.0.1", 0)
    sock.setblocking(False)
    return sock


async def serve(inst: Instance, gateway: Any, app: Any = None) -> str:
    """Serve `app` (default: the gateway's) with uvicorn on the hub loop; its base URL."""
    import uvicorn

    sock = free_socket()
    port = sock.getsockname()[1]
    options: dict[str, Any] = {}
    if app is None:  # the gateway's own HTTP protocol answers 2026-revision tools/call off the socket
        from agentenv_local.gateway.fastpath import protocol_class

        options["http"] = protocol_class(gateway)
    config = uvicorn.Config(app if app is not None else gateway.app(), log_level="warning", lifespan="on",
                            timeout_graceful_shutdown=2, access_log=False, **options)
    server = uvicorn.Server(config)
    inst.server = server
    inst.serve_task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]),
                                                             name=f"gateway-{inst.instance_id}")
    deadline = asyncio.get_running_loop().time() + 30
    while not server.started:
        if inst.serve_task.done():
            exc = inst.serve_task.exception() if not inst.serve_task.cancelled() else None
            raise DeployError(f"the gateway of {inst.instance_id} did not start: {exc!r}")
        if asyncio.get_running_loop().time() > deadline:
            raise DeployError(f"the gateway of {inst.instance_id} did not start in 30s")
        await asyncio.sleep(0.01)
    return f"http://127.0.0.1:{port}"


async def stop_serving(inst: Instance) -> None:
    """Stop the instance's uvicorn server (gracefully for up to 8 s, then forced)."""
    if inst.server is None:
        return
    inst.server.should_exit = True
    if inst.serve_task is not None:
        try:
            await asyncio.wait_for(asyncio.shield(inst.serve_task), 8)
        except (TimeoutError, Exception):
            inst.server.force_exit = True
            inst.serve_task.cancel()
            with contextlib.suppress(BaseException):
                await inst.serve_task


async def fetch_card(card_url: str, gateway: Any) -> dict | None:
    """The card served at `card_url`; else the gateway's own, if there is one."""
    import httpx2

    try:
        async with httpx2.AsyncClient(timeout=10.0) as http:
            r = await http.get(card_url)
        if r.status_code == 200:
            return r.json()
    except Exception as e:
        log.warning("env card %s: %r", card_url, e)
    if gateway is not None:
        with contextlib.suppress(Exception):
            return await gateway.card()
    return None


def guard_policy(state_dir: str | Path) -> Any:
    """The HTTP guard's policy for the servers this hub starts: the project's [security] settings."""
    from agentenv_local.http_guard import GuardPolicy

    config = None
    with contextlib.suppress(Exception):  # unreadable: the defaults, which only narrow
        from agentenv_local.config import load_config

        config = load_config(Path(state_dir).parent)
    return GuardPolicy.from_settings(config=config) if config is not None else GuardPolicy()
