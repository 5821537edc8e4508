"""One HTTP exchange for the probe: no proxy, no cookies, no headers but the task's, a bounded body, and
redirects followed only to hosts the probe may reach (headers are dropped when a redirect changes origin).

Blocking (http.client); the step runs it in a thread. `HttpClient.close()` closes the open connection, so a
cancelled step leaves no socket behind (its teardown calls it too).
"""

from __future__ import annotations

import http.client
import ipaddress
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

REDIRECTS = (301, 302, 303, 307, 308)


class ProbeRefused(Exception):
    """The probe will not send this request (a host it may not reach); not retried."""


@dataclass
class Reply:
    status: int
    body: bytes
    truncated: bool
    url: str  # after redirects
    redirects: int


def is_loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_problem(url: str, allowed_hosts: frozenset[str], allow_remote: bool) -> str | None:
    """Why the probe may not send a request to `url`, or None."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return f"{url!r}: only http:// and https:// URLs are probed"
    host = (parts.hostname or "").lower()
    if not host:
        return f"{url!r} names no host"
    if parts.username or parts.password:
        return f"{url!r} carries credentials in the URL; send them as a header"
    if allow_remote or is_loopback(host) or host in allowed_hosts:
        return None
    return (f"{url!r} is not on this machine or a sandbox of the run (a probe reaches loopback hosts and "
            "sandbox tunnel URLs); set allow_remote = true to probe it")


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port


class HttpClient:
    def __init__(self, *, timeout: float, max_bytes: int, max_redirects: int, allowed_hosts: frozenset[str],
                 allow_remote: bool) -> None:
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.max_redirects = max_redirects
        self.allowed_hosts = allowed_hosts
        self.allow_remote = allow_remote
        self._conn: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()
        self.requests_sent = 0

    def close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def send(self, method: str, url: str, headers: dict[str, str], body: bytes | None,
             on_redirect: Callable[[str], None] | None = None) -> Reply:
        """The reply to METHOD url, redirects followed as the module's doc says. OSError when unreachable."""
        first = url
        redirects = 0
        while True:
            if problem := host_problem(url, self.allowed_hosts, self.allow_remote):
                raise ProbeRefused(problem if url == first else f"redirected to {url!r}, which the probe does not "
                                   f"follow: {problem}")
            status, location, data, truncated = self._once(method, url, headers, body)
            if status not in REDIRECTS or not location or self.max_redirects == 0:
                return Reply(status, data, truncated, url, redirects)
            if redirects >= self.max_redirects:
                raise ProbeRefused(f"more than {self.max_redirects} redirect(s) from {first!r}")
            target = urljoin(url, location)
            if _origin(target) != _origin(url):
                headers = {}  # the task's headers were meant for the first origin only
            if status == 303 or (status in (301, 302) and method == "POST"):
                method, body = "GET", None
            redirects += 1
            if on_redirect is not None:
                on_redirect(target)
            url = target

    def _once(self, method: str, url: str, headers: dict[str, str],
              body: bytes | None) -> tuple[int, str | None, bytes, bool]:
        parts = urlsplit(url)
        conn: http.client.HTTPConnection
        if parts.scheme == "https":
            conn = http.client.HTTPSConnection(parts.hostname or "", parts.port, timeout=self.timeout,
                                               context=ssl.create_default_context())
        else:
            conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=self.timeout)
        with self._lock:
            self._conn = conn
        try:
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            conn.request(method, target, body=body, headers={"Connection": "close", **headers})
            self.requests_sent += 1
            reply = conn.getresponse()
            data = reply.read(self.max_bytes + 1) if method != "HEAD" else b""
            return reply.status, reply.getheader("Location"), data[:self.max_bytes], len(data) > self.max_bytes
        finally:
            self.close()
