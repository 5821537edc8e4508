"""Which event loop a process runs on.

Servers run by uvicorn (`python -m agentenv_local.gateway`, env servers) get uvloop when it is installed (it is a
dependency): it roughly halves the cost of each socket read, write and callback, which is most of what a
proxied tool call costs a gateway (bench/bench_gateway.py).

The hub's own loop (a thread that also runs steps, sandboxes and their subprocesses) stays on the standard
asyncio loop unless ``AGENTENV_LOOP=uvloop`` asks for uvloop: child-process handling differs between the two
when the loop is not in the main thread, and the hub's gateways gain little from it (the bench shows both).
"""

from __future__ import annotations

import asyncio
import os

__all__ = ["hub_event_loop", "uvloop_available", "uvloop_or_asyncio_loop"]


def uvloop_available() -> bool:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def uvloop_or_asyncio_loop() -> asyncio.AbstractEventLoop:
    """uvloop when installed (as uvicorn's ``loop="auto"`` picks), else asyncio's."""
    if uvloop_available():
        import uvloop

        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def hub_event_loop() -> asyncio.AbstractEventLoop:
    """The hub's loop: asyncio's, or uvloop with ``AGENTENV_LOOP=uvloop`` (see the module docstring)."""
    if os.environ.get("AGENTENV_LOOP", "").strip().lower() == "uvloop" and uvloop_available():
        return uvloop_or_asyncio_loop()
    return asyncio.new_event_loop()
