"""One guard in front of every HTTP server agentenv starts (gateways, env servers, agent servers).

    app = HttpGuard(app, GuardPolicy.from_settings(own_hosts=[bind_host]))

It answers, before the app sees the request:

- **421** when the `Host` header names a host that is not allowed: loopback (127.0.0.1, localhost, [::1]),
  10.0.2.2 (the host's loopback as Podman containers see it), the server's own address and
  `[security] allowed_hosts`. A web page that rebinds its DNS name to 127.0.0.1 still sends its own name.
- **403** when an `Origin` header is present and is not an http(s) origin on an allowed host (the literal
  `null` of a sandboxed iframe or a file:// page included). Requests with no Origin (every non-browser
  client) pass.
- **413** when the body is larger than `[security] max_body_bytes` (`max_data_body_bytes` for the data
  plane, `POST .../agentenv`): checked on Content-Length first, else counted while it streams in, never
  held past the limit. The rest of the body is read and dropped (up to a bound) so the client gets the
  answer instead of a reset connection.

The per-request work is one pass over the headers and a set lookup: the gateway's hot path pays nothing more.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

__all__ = ["DEFAULT_MAX_BODY", "DEFAULT_MAX_DATA_BODY", "LOOPBACK_HOSTS", "GuardPolicy", "HttpGuard", "host_name"]

logger = logging.getLogger(__name__)

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "10.0.2.2"})
_ANY_ADDRESS = frozenset({"0.0.0.0", "::", ""})
DEFAULT_MAX_BODY = 4 * 1024 * 1024
DEFAULT_MAX_DATA_BODY = 128 * 1024 * 1024
DRAIN_MAX = 1 << 30  # past this much of an oversize body, the connection is closed instead of read to the end
DATA_PLANE_PATH = "/agentenv"
# Hands a server we start its instance's admin token, which its data plane then requires (env/app.py reads it).
ADMIN_TOKEN_ENV = "AGENTENV_ADMIN_TOKEN"
_SEEN_MAX = 256  # raw Host values remembered as allowed


def host_name(value: str) -> str | None:
    """The host of a `Host` header value (`name`, `name:port`, `[v6]:port`), lowercased, without brackets or
    port; None when it is not one."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0 or (value[end + 1:] and not (value[end + 1] == ":" and value[end + 2:].isdigit())):
            return None
        return value[1:end] or None
    name, sep, port = value.rpartition(":")
    if sep and port.isdigit() and ":" not in name:
        value = name
    elif ":" in value:
        return None if value.count(":") == 1 else value  # a bare IPv6 address
    return value.removesuffix(".") or None


class GuardPolicy:
    """What a server accepts: allowed host names, extra exact origins, and body limits."""

    def __init__(self, allowed_hosts: Iterable[str] = (), *, allowed_origins: Iterable[str] = (),
                 max_body_bytes: int = DEFAULT_MAX_BODY, max_data_body_bytes: int = DEFAULT_MAX_DATA_BODY):
        hosts = set(LOOPBACK_HOSTS)
        for item in allowed_hosts:
            name = host_name(str(item))
            if name and name not in _ANY_ADDRESS:
                hosts.add(name)
        self.hosts = frozenset(hosts)
        self.origins = frozenset(str(o).rstrip("/") for o in allowed_origins)
        self.max_body_bytes = int(max_body_bytes)
        self.max_data_body_bytes = int(max_data_body_bytes)
        self._seen: set[bytes] = set()

    @classmethod
    def from_settings(cls, own_hosts: Iterable[str] = (), allowed_origins: Iterable[str] = (),
                      config: Any = None) -> GuardPolicy:
        """A policy from the project's `[security]` settings (or AGENTENV_SECURITY_* variables) plus the
        server's own host names. An unreadable config falls back to the defaults, which only narrow."""
        hosts, max_body, max_data = [], DEFAULT_MAX_BODY, DEFAULT_MAX_DATA_BODY
        try:
            if config is None:
                from agentenv_local.config import load_config

                config = load_config()
            hosts = list(config.get("security.allowed_hosts") or [])
            max_body = int(config.get("security.max_body_bytes") or max_body)
            max_data = int(config.get("security.max_data_body_bytes") or max_data)
        except Exception as e:  # a broken config must not open a server wider than the defaults
            logger.warning("reading [security] settings failed (%s); using the defaults", e)
        return cls([*hosts, *own_hosts], allowed_origins=allowed_origins, max_body_bytes=max_body,
                   max_data_body_bytes=max_data)

    def host_ok(self, raw: bytes | None) -> bool:
        """Whether a raw `Host` header value is allowed (no Host at all is: HTTP/1.0 clients, never browsers)."""
        if raw is None or raw in self._seen:
            return True
        name = host_name(raw.decode("latin-1"))
        if name is None or name not in self.hosts:
            return False
        if len(self._seen) < _SEEN_MAX:
            self._seen.add(raw)
        return True

    def origin_ok(self, raw: bytes) -> bool:
        origin = raw.decode("latin-1").strip()
        if origin.rstrip("/") in self.origins:
            return True
        try:
            parts = urlsplit(origin)
            host = parts.hostname
        except ValueError:
            return False
        return parts.scheme in ("http", "https") and host is not None and host in self.hosts

    def body_limit(self, path: str) -> int:
        return self.max_data_body_bytes if path.endswith(DATA_PLANE_PATH) else self.max_body_bytes


def _json_response(status: int, body: dict, close: bool = False) -> tuple[dict, dict]:
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    if close:
        headers.append((b"connection", b"close"))
    return ({"type": "http.response.start", "status": status, "headers": headers},
            {"type": "http.response.body", "body": data})


class _TooLarge(Exception):
    pass


class HttpGuard:
    """ASGI middleware applying a :class:`GuardPolicy` (see the module docstring)."""

    def __init__(self, app: Any, policy: GuardPolicy):
        self.app = app
        self.policy = policy

    def __getattr__(self, name: str) -> Any:  # the wrapped app's `state`, `routes`...
        return getattr(self.app, name)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        policy = self.policy
        host = origin = length = None
        expect = False
        for key, value in scope["headers"]:
            if key == b"host":
                host = value
            elif key == b"origin":
                origin = value
            elif key == b"content-length":
                length = value
            elif key == b"expect":
                expect = True
        if scope["type"] == "websocket":
            if not policy.host_ok(host) or (origin is not None and not policy.origin_ok(origin)):
                await send({"type": "websocket.close", "code": 1008})
                return
            await self.app(scope, receive, send)
            return
        if not policy.host_ok(host):
            shown = (host or b"").decode("latin-1")[:200]
            await _refuse(send, 421, f"Host {shown!r} is not allowed on this server",
                          "reach it at 127.0.0.1, or add the host name to [security] allowed_hosts in "
                          ".agentenv/config.toml (AGENTENV_SECURITY_ALLOWED_HOSTS)")
            return
        if origin is not None and not policy.origin_ok(origin):
            shown = origin.decode("latin-1")[:200]
            await _refuse(send, 403, f"Origin {shown!r} is not allowed",
                          "browser pages may call this server only from an allowed host; add the host name "
                          "to [security] allowed_hosts")
            return
        limit = policy.body_limit(scope["path"])
        if length is not None:
            try:
                declared = int(length)
            except ValueError:
                declared = -1
            if declared > limit:
                if not expect:  # read and drop what the client sends, so it gets the answer, not a reset
                    await _drain(receive, declared)
                await _too_large(send, limit, close=expect or declared > DRAIN_MAX)
                return
            await self.app(scope, receive, send)
            return
        if scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        await self._counted(scope, receive, send, limit)

    async def _counted(self, scope: dict, receive: Any, send: Any, limit: int) -> None:
        """A body without Content-Length (chunked): counted as it streams; past the limit the app sees the
        client leave and the client gets 413."""
        seen = 0
        refused = False
        started = False

        async def counting_receive() -> dict:
            nonlocal seen, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    refused = True
                    if not started:
                        if message.get("more_body"):
                            await _drain(receive, DRAIN_MAX)
                        await _too_large(send, limit, close=True)
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: dict) -> None:
            nonlocal started
            if refused:
                return  # the 413 went out; the app's answer to a client that "left" goes nowhere
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except Exception:
            if not refused:
                raise


async def _drain(receive: Any, most: int) -> None:
    """Read and drop up to `most` bytes of a request body."""
    seen = 0
    while seen <= min(most, DRAIN_MAX):
        message = await receive()
        if message["type"] != "http.request":
            return
        seen += len(message.get("body", b""))
        if not message.get("more_body"):
            return


async def _too_large(send: Any, limit: int, close: bool) -> None:
    await _refuse(send, 413, f"the request body is larger than this server accepts ({limit} bytes)",
                  "send less, or raise [security] max_body_bytes (max_data_body_bytes for the data plane)",
                  close=close, limit=limit)


async def _refuse(send: Any, status: int, message: str, hint: str, close: bool = False, **extra: Any) -> None:
    start, body = _json_response(status, {"error": message, "hint": hint, **extra}, close)
    await send(start)
    await send(body)
