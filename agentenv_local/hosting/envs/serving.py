"""Serving an instance's HTTP app (its gateway's, or a lone env server's) in the hub (hosting/asgi.py); stopping
it; reading the card it serves; the HTTP guard's policy for what the hub serves."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Any

from ..asgi import START_TIMEOUT_S, NotStarted, start_server, stop_server
from .instance import DeployError, Instance

log = logging.getLogger(__name__)


async def serve(inst: Instance, gateway: Any, app: Any = None) -> str:
    """Serve `app` (default: the gateway's) with uvicorn on the hub loop; its base URL."""
    http = None
    if app is None:  # the gateway's own HTTP protocol answers 2026-revision tools/call off the socket
        from agentenv_local.gateway.fastpath import protocol_class

        http = protocol_class(gateway)
    try:
        inst.server, inst.serve_task, port = await start_server(app if app is not None else gateway.app(),
                                                                task_name=f"gateway-{inst.instance_id}", http=http)
    except NotStarted as e:
        inst.server, inst.serve_task = e.server, e.task  # stopped with the instance
        if e.timed_out:
            raise DeployError(f"the gateway of {inst.instance_id} did not start in {START_TIMEOUT_S:g}s") from None
        raise DeployError(f"the gateway of {inst.instance_id} did not start: {e.error!r}") from None
    return f"http://127.0.0.1:{port}"


async def stop_serving(inst: Instance) -> None:
    """Stop the instance's uvicorn server (gracefully for up to 8 s, then forced)."""
    if inst.server is not None:
        await stop_server(inst.server, inst.serve_task)


async def fetch_card(card_url: str, gateway: Any) -> dict | None:
    """The card served at `card_url`; else the gateway's own, if there is one."""
    from agentenv_local.http_clients import async_client

    try:
        async with async_client(timeout=10.0) as http:  # a card the hub serves itself: read in-process
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
