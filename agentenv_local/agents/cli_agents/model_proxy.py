"""A coding-CLI agent's model proxy: the CLI gets a loopback URL and a random token, never the real `[model]` key.

Each agent starts one small HTTP server on 127.0.0.1 (behind http_guard: Host, Origin, bounded bodies) the first
time a turn needs it. ``route(base_url, key, headers)`` answers the URL to hand the CLI (the proxy's origin with
the upstream's path, so each CLI builds its paths as it would against the upstream) and a token for that upstream.
A request that carries a known token where the CLI puts its key (``x-api-key``, ``Authorization: Bearer``,
``x-goog-api-key`` or ``?key=``) goes to the upstream with method, path, query and body unchanged, the token
replaced by the real key in the same place, plus the `[model.headers]`; the answer flows back as it arrives (an
SSE stream is not buffered). Without a known token: 401, nothing forwarded.

A shell command the CLI runs can read the token and so call the model through the proxy while the agent lives,
but it never sees the key: the key is in no environment, argument or file of the CLI's.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import secrets
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

KEY_HEADERS = ("x-api-key", "authorization", "x-goog-api-key")
# not forwarded either way: the connection's own, and what the upstream's client library sets itself
HOP_HEADERS = frozenset({"host", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade",
                         "te", "trailer", "content-length", "proxy-authorization"})
CONNECT_TIMEOUT_S = 30.0
READ_TIMEOUT_S = 600.0  # between two chunks of an answer: a model may think long before its first token


@dataclass(frozen=True)
class Upstream:
    origin: str  # scheme://host[:port] of the real endpoint
    key: str | None
    headers: tuple[tuple[str, str], ...]


class ModelProxy:
    """One agent's proxy; see the module doc. ``close()`` stops it (the agent's shutdown calls it)."""

    def __init__(self) -> None:
        self._routes: dict[str, Upstream] = {}  # token -> upstream
        self._tokens: dict[Upstream, str] = {}
        self._lock = threading.Lock()
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._port = 0

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def route(self, base_url: str, key: str | None, headers: Mapping[str, str] | None = None) -> tuple[str, str]:
        """(the URL to give the CLI instead of `base_url`, the token it must send instead of `key`)."""
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"the model endpoint {base_url!r} is not an http(s) URL")
        upstream = Upstream(f"{parts.scheme}://{parts.netloc}", key, tuple(sorted((headers or {}).items())))
        with self._lock:
            token = self._tokens.get(upstream)
            if token is None:
                token = "agentenv-proxy-" + secrets.token_urlsafe(24)
                self._tokens[upstream] = token
                self._routes[token] = upstream
            if not self.running:
                self._start()
        return f"http://127.0.0.1:{self._port}{parts.path.rstrip('/')}", token

    def _start(self) -> None:
        import uvicorn

        from agentenv_local.env.app import guarded
        from agentenv_local.env.serve import bind_socket

        sock = bind_socket("127.0.0.1", 0)  # bound now: a CLI that connects before uvicorn runs waits in the backlog
        sock.listen(128)
        self._port = sock.getsockname()[1]
        proxy_app = _ProxyApp(self._routes)
        self._server = server = uvicorn.Server(uvicorn.Config(guarded(proxy_app, ["127.0.0.1"]), log_level="warning",
                                                              lifespan="off", access_log=False,
                                                              timeout_graceful_shutdown=2))

        async def serve() -> None:
            try:
                await server.serve(sockets=[sock])
            finally:  # the upstream connections and the listening socket go with the server
                await proxy_app.aclose()
                sock.close()

        self._thread = threading.Thread(target=lambda: asyncio.run(serve()), name="agentenv-model-proxy",
                                        daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop the server and forget every token."""
        with self._lock:
            server, thread = self._server, self._thread
            self._server = self._thread = None
            self._routes.clear()
            self._tokens.clear()
        if server is not None:
            server.should_exit = True
        if thread is not None:
            thread.join(timeout=10)


def _token_of(headers: dict[str, str], query: list[tuple[str, str]]) -> tuple[str | None, str | None]:
    """(the token the CLI sent, where: a header name or "query")."""
    for name in KEY_HEADERS:
        value = headers.get(name)
        if value:
            if name == "authorization":
                scheme, _, value = value.partition(" ")
                if scheme.lower() != "bearer":
                    continue
            return value.strip(), name
    for name, value in query:
        if name == "key":
            return value, "query"
    return None, None


class _ProxyApp:
    """The ASGI app: check the token, forward, stream the answer back."""

    def __init__(self, routes: dict[str, Upstream]) -> None:
        self.routes = routes
        self._client: Any = None

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def _find(self, token: str | None) -> Upstream | None:
        if not token:
            return None
        found = None
        for known, upstream in list(self.routes.items()):  # compare each in constant time
            if hmac.compare_digest(known.encode(), token.encode()):
                found = upstream
        return found

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        token, where = _token_of(headers, query)
        upstream = self._find(token)
        if upstream is None:
            await _error(send, 401, "the model proxy needs this agent's token (x-api-key, Authorization: Bearer, "
                                    "x-goog-api-key or ?key=)")
            return
        body = bytearray()
        while True:  # the guard in front bounds the body
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        out = [(k, v) for k, v in headers.items() if k not in HOP_HEADERS and k not in KEY_HEADERS]
        query = [(k, v) for k, v in query if k != "key"]
        if upstream.key is not None:
            if where == "query":
                query.append(("key", upstream.key))
            elif where == "authorization":
                out.append(("authorization", f"Bearer {upstream.key}"))
            else:
                out.append((str(where), upstream.key))
        out += [(k.lower(), v) for k, v in upstream.headers]
        url = upstream.origin + scope.get("raw_path", scope["path"].encode()).decode("latin-1").split("?")[0]
        if query:
            url += "?" + urlencode(query)
        await self._forward(scope["method"], url, out, bytes(body), send)

    async def _forward(self, method: str, url: str, headers: list[tuple[str, str]], body: bytes, send: Any) -> None:
        import httpx2 as httpx  # mcp 2.x ships httpx2 (agentenv declares no httpx; the runtime image has none)

        if self._client is None:  # made in the proxy's own loop, on its first request
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S),
                                             follow_redirects=False)
        request = self._client.build_request(method, url, headers=headers, content=body)
        try:
            response = await self._client.send(request, stream=True)
        except httpx.HTTPError as exc:
            await _error(send, 502, f"the model endpoint could not be reached: {type(exc).__name__}")
            return
        try:
            answer = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.headers.multi_items()
                      if k.lower() not in HOP_HEADERS or k.lower() == "content-length"]
            await send({"type": "http.response.start", "status": response.status_code, "headers": answer})
            async for chunk in response.aiter_raw():  # as it arrives: an SSE answer streams through
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except httpx.HTTPError:
            pass  # the upstream broke off mid-answer: the CLI sees a cut stream, as it would without the proxy
        finally:
            await response.aclose()


async def _error(send: Any, status: int, message: str) -> None:
    body = json.dumps({"error": {"type": "proxy_error", "message": message}}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
