"""Calls between parts of one hub without a socket: the apps the hub serves itself, reachable in-process.

Every app the hub serves (hosting/asgi.py: env gateways, env servers loaded in the hub, in-hub agents) listens on
127.0.0.1:PORT for outside clients, and registers here while it runs: its origin -> the app uvicorn calls (its
``loaded_app``, uvicorn's own middleware included). The hub's HTTP clients (http_clients.async_client) carry an
``InProcTransport``: a request for a registered origin goes straight into that app, as one ASGI cycle shaped like
uvicorn's (scope, lifespan state, default response headers, 500 on an app error, disconnect when the client goes
away), every other request over the network as before. So the app's own checks (the HTTP guard's Host, Origin and
body size) answer exactly as they do over TCP; only the socket and uvicorn's HTTP parser are skipped, twice per
call (in a profile of a hub at --concurrency 50 they were a quarter of its loop).

Answers stream: each body message the app sends reaches the client as it is sent (SSE event by event), with the
client's read timeout per message. A stopped app unregisters first, so later requests take the network (and get
its refusal). A caller on another event loop than the app's goes over the socket too. The table is per process:
subprocess and container agents reach the hub over TCP as before.
``AGENTENV_INPROC=0`` (read when an app starts) turns it off: everything over the network, for debugging.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import logging
import os
from collections.abc import AsyncIterator, MutableMapping
from typing import Any
from urllib.parse import unquote

import httpx2

__all__ = ["InProcTransport", "abort_open", "enabled", "register", "registered", "unregister"]

log = logging.getLogger("uvicorn.error")  # where uvicorn logs an app's errors: the same lines either way

HOST = "127.0.0.1"
QUEUED_MESSAGES = 64        # body messages buffered per answer; a slower reader holds the app back, as TCP would
_client_ports = itertools.count(1)  # a distinct (fake) peer port per request, as connections have


def enabled() -> bool:
    """Whether apps that start now register (``AGENTENV_INPROC=0`` turns it off)."""
    return os.environ.get("AGENTENV_INPROC", "1").strip().lower() not in ("0", "false", "no", "off")


class _Served:
    """One registered app: what uvicorn would hand each request, and the requests in flight."""

    def __init__(self, server: Any, port: int) -> None:
        self.server = server
        self.port = port
        self.app = server.config.loaded_app
        self.root_path: str = server.config.root_path or ""
        self.context = contextvars.copy_context()  # the context the server's own tasks run in
        self.loop = asyncio.get_running_loop()     # its app's objects belong to this loop: callers on another
        self.exchanges: set[_Exchange] = set()

    def state(self) -> dict[str, Any]:
        lifespan = getattr(self.server, "lifespan", None)
        return dict(getattr(lifespan, "state", None) or {})

    def default_headers(self) -> list[tuple[bytes, bytes]]:
        state = getattr(self.server, "server_state", None)
        return list(getattr(state, "default_headers", None) or [])


_served: dict[int, _Served] = {}  # port on 127.0.0.1 -> app


def register(server: Any, port: int) -> None:
    """Make the app a started uvicorn `server` serves on 127.0.0.1:`port` reachable in-process (if enabled)."""
    if enabled():
        _served[port] = _Served(server, port)


def unregister(server: Any) -> list[_Served]:
    """Forget `server`'s app: later requests take the network. What it had (for `abort_open`)."""
    gone = [served for served in _served.values() if served.server is server]
    for served in gone:
        del _served[served.port]
    return gone


def registered(port: int) -> bool:
    return port in _served


def abort_open(gone: list[_Served]) -> None:
    """End the in-process requests still open on a stopped server's apps, as uvicorn drops its connections."""
    for served in gone:
        for exchange in list(served.exchanges):
            exchange.abort()


class InProcTransport(httpx2.AsyncBaseTransport):
    """Requests for an app registered here go into it; the rest to `network` (the transport httpx would use)."""

    def __init__(self, network: httpx2.AsyncBaseTransport) -> None:
        self.network = network

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        served = _served.get(url.port or 0) if _served and url.host == HOST and url.scheme == "http" else None
        if served is None or served.loop is not asyncio.get_running_loop():  # (another loop: over the socket)
            return await self.network.handle_async_request(request)
        return await _Exchange(served, request).run()

    async def aclose(self) -> None:
        await self.network.aclose()


_START = "start"
_BODY = "body"
_END = "end"
_BROKEN = "broken"


class _Exchange:
    """One request through a registered app: the app runs as its own task (as uvicorn runs it), its messages
    cross an asyncio queue to the response's stream."""

    def __init__(self, served: _Served, request: httpx2.Request) -> None:
        self.served = served
        self.request = request
        self.queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue(QUEUED_MESSAGES)
        self.disconnected = False
        self.gone = asyncio.Event()          # the client went away, or the answer is complete
        self.started = False
        self.complete = False
        self.task: asyncio.Task[None] | None = None
        self.body_chunks: AsyncIterator[bytes] | None = None  # the request's body, read as the app asks
        self.body_done = False
        timeouts = request.extensions.get("timeout") or {}
        self.read_timeout: float | None = timeouts.get("read")

    def scope(self) -> dict[str, Any]:
        url = self.request.url
        raw_path = url.raw_path.split(b"?", 1)[0]
        root = self.served.root_path
        return {
            "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
            "server": (HOST, self.served.port), "client": (HOST, next(_client_ports)), "scheme": "http",
            "method": self.request.method, "root_path": root, "path": root + unquote(raw_path.decode("ascii")),
            "raw_path": root.encode("ascii") + raw_path, "query_string": url.query,
            "headers": [(k.lower(), v) for k, v in self.request.headers.raw], "state": self.served.state(),
        }

    async def run(self) -> httpx2.Response:
        scope = self.scope()
        self.task = asyncio.get_running_loop().create_task(self._serve(scope), context=self.served.context.copy())
        self.served.exchanges.add(self)
        try:
            kind, value = await self._next()
        except BaseException:
            self.abort(cancel=False)  # cancelled or timed out before the head: the client hung up
            raise
        if kind != _START:  # the app ended (or was stopped) before any answer
            self.abort(cancel=False)
            raise httpx2.RemoteProtocolError("Server disconnected without sending a response.", request=self.request)
        status, headers = value
        return httpx2.Response(status, headers=headers, stream=_Body(self), request=self.request,
                               extensions={"http_version": b"HTTP/1.1"})

    async def _next(self) -> tuple[str, Any]:
        try:
            return await asyncio.wait_for(self.queue.get(), self.read_timeout)
        except TimeoutError:
            raise httpx2.ReadTimeout("timed out reading the in-process answer", request=self.request) from None

    async def _serve(self, scope: dict[str, Any]) -> None:
        try:
            await self.served.app(scope, self._receive, self._send)
        except BaseException as exc:
            if not (self.disconnected and isinstance(exc, asyncio.CancelledError)):  # not when we stopped it
                log.error("Exception in ASGI application\n", exc_info=exc)
            if not self.started:
                await self._send_500()
            else:
                self._break()
            if not isinstance(exc, Exception):
                raise
        else:
            if not self.started and not self.disconnected:
                log.error("ASGI callable returned without starting response.")
                await self._send_500()
            elif not self.complete and not self.disconnected:
                log.error("ASGI callable returned without completing response.")
                self._break()
        finally:
            self.served.exchanges.discard(self)

    async def _send_500(self) -> None:
        await self._send({"type": "http.response.start", "status": 500,
                          "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"connection", b"close")]})
        await self._send({"type": "http.response.body", "body": b"Internal Server Error", "more_body": False})

    def _break(self) -> None:
        """The answer stops short: the client sees a dropped connection."""
        if not self.disconnected:
            self.disconnected = True
            self.gone.set()
            self._drain()
            self.queue.put_nowait((_BROKEN, None))

    async def _receive(self) -> dict[str, Any]:
        if self.disconnected or self.complete:
            return {"type": "http.disconnect"}
        if not self.body_done:
            if self.body_chunks is None:
                stream = self.request.stream
                assert isinstance(stream, httpx2.AsyncByteStream)  # an AsyncClient's request
                self.body_chunks = stream.__aiter__()
            try:
                chunk = await self.body_chunks.__anext__()
            except StopAsyncIteration:
                self.body_done = True
                return {"type": "http.request", "body": b"", "more_body": False}
            return {"type": "http.request", "body": bytes(chunk), "more_body": True}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: MutableMapping[str, Any]) -> None:
        if self.disconnected:
            return
        if not self.started:
            if message["type"] != "http.response.start":
                raise RuntimeError(f"Expected ASGI message 'http.response.start', but got '{message['type']}'.")
            self.started = True
            headers = self.served.default_headers() + list(message.get("headers", []))
            await self.queue.put((_START, (message["status"], headers)))
        elif not self.complete:
            if message["type"] != "http.response.body":
                raise RuntimeError(f"Expected ASGI message 'http.response.body', but got '{message['type']}'.")
            body = message.get("body", b"")
            if body and self.request.method != "HEAD":
                await self.queue.put((_BODY, bytes(body)))
            if not message.get("more_body", False):
                self.complete = True
                self.gone.set()
                await self.queue.put((_END, None))
        else:
            raise RuntimeError(f"Unexpected ASGI message '{message['type']}' sent, after response already completed.")

    def _drain(self) -> None:
        while not self.queue.empty():
            self.queue.get_nowait()

    def abort(self, *, cancel: bool = True) -> None:
        """The client went away (`cancel`: the server is stopping too, so the app's task ends now)."""
        if not self.disconnected:
            self.disconnected = True
            self.gone.set()
            self._drain()  # unblocks an app waiting to queue more; later sends are dropped
            with contextlib.suppress(asyncio.QueueFull):
                self.queue.put_nowait((_BROKEN, None))
        if cancel and self.task is not None and not self.task.done():
            self.task.cancel()


class _Body(httpx2.AsyncByteStream):
    """The answer's body, message by message as the app sends them."""

    def __init__(self, exchange: _Exchange) -> None:
        self.exchange = exchange

    async def __aiter__(self) -> AsyncIterator[bytes]:
        exchange = self.exchange
        while True:
            kind, value = await exchange._next()
            if kind == _BODY:
                yield value
            elif kind == _END:
                return
            else:
                raise httpx2.RemoteProtocolError("peer closed connection without sending complete message body",
                                                 request=exchange.request)

    async def aclose(self) -> None:
        if not self.exchange.complete:
            self.exchange.abort(cancel=False)  # the client closed early: the app sees http.disconnect
