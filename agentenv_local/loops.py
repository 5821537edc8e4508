"""The event loop the hub and the gateway run on: uvloop when it is installed (it is a dependency), the
standard asyncio loop otherwise or when ``AGENTENV_LOOP=asyncio`` asks for it.

uvloop roughly halves the cost of each socket read, write and callback, which is most of what a proxied tool
call costs the gateway (bench/bench_gateway.py). uvicorn picks it the same way for the servers it runs.
"""

from __future__ import annotations

import asyncio
import os

__all__ = ["new_event_loop", "using_uvloop"]


def using_uvloop() -> bool:
    if os.environ.get("AGENTENV_LOOP", "").strip().lower() == "asyncio":
        return False
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def new_event_loop() -> asyncio.AbstractEventLoop:
    if using_uvloop():
        import uvloop

        return uvloop.new_event_loop()
    return asyncio.new_event_loop()
