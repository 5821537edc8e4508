"""What every httpx client the hub makes shares: one TLS context.

httpx builds a fresh verifying context for each client it creates, loading the CA bundle each time (several ms of
CPU). The hub makes clients by the dozen per episode (A2A clients, gateway control, MCP sessions, card fetches),
almost all to plain-http loopback servers, and each build ran on its event loop: in a profile of a warm hub at
`--concurrency 50` they took a fifth of the loop's time. `verify=shared_tls_context()` builds it once per process,
the same way httpx would (its own `create_ssl_context`, so SSL_CERT_FILE / SSL_CERT_DIR still count, as read the
first time).

`async_client(...)` builds the hub's clients on that context, with agentenv_local/inproc.py's transport: a request
for an app this process serves goes straight into it, the rest over the network with the client's limits.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import ssl

    import httpx2

_context: ssl.SSLContext | None = None
_lock = threading.Lock()


def shared_tls_context() -> ssl.SSLContext:
    """The process's verifying TLS context for httpx clients (`verify=` it)."""
    global _context
    if _context is None:
        with _lock:
            if _context is None:
                import httpx2

                _context = httpx2.create_ssl_context()
    return _context


def async_client(*, limits: httpx2.Limits | None = None, **kwargs: Any) -> httpx2.AsyncClient:
    """An `httpx2.AsyncClient(**kwargs)` for the hub's parts: the shared TLS context, and in-process calls to the
    apps the hub serves (inproc.py); `limits` bound its network connections as they would the client's."""
    import httpx2

    from agentenv_local.inproc import InProcTransport

    network = httpx2.AsyncHTTPTransport(verify=shared_tls_context(),
                                        limits=limits if limits is not None else httpx2.Limits(
                                            max_connections=100, max_keepalive_connections=20, keepalive_expiry=5.0))
    return httpx2.AsyncClient(transport=InProcTransport(network), **kwargs)
