"""The gateway's hot path: ``POST /mcp`` for ``tools/call`` and ``tools/list``, answered without the mcp server
stack, whose per-request tasks, streams and models cost more than the gateway's own work: on the 2026 revision,
and on the handshake-era revisions (2024-11-05 .. 2025-11-25, what mcp 1.x clients, the reference's
``ToolSession`` and most editors speak) once the stack has opened and initialized the session (sessions.py).

Only a request the stack would accept as is takes this path: an allowed Host (agentenv_local/http_guard.py owns
every refusal), a served modern protocol version in header and
envelope alike, routing headers that match the body, no ``Mcp-Param-*``, session or ``Origin`` header, an Accept
that takes JSON, a JSON content type, params the method's model validates. Anything else (handshake-era sessions,
other methods, notifications, every malformed or doubtful request) goes, body included, to the stack, which owns
each rejection and its wording. The answer is the one the stack gives (``Gateway.mcp_fast``; the tests compare
the two).

A handshake-era request qualifies with an ``Mcp-Session-Id`` of a session the stack holds open and has seen
initialized, the version it negotiated (or no version header), a content type and Accept the stack's transport
takes, and params its models validate (no cursor, no progress token, nothing beyond name, arguments and _meta);
``initialize``, ``DELETE``, the GET stream and everything else stay with the stack. Its answer is JSON (the
gateway's stack answers JSON, never an event stream) with the session's ``Mcp-Session-Id``.

Two entries share the checks: :class:`McpFastPath`, an ASGI wrapper (any ASGI server), and
:func:`protocol_class`, a uvicorn HTTP protocol for ``Gateway.serve`` that also skips h11 and the ASGI cycle for
these requests and hands every other one to uvicorn unchanged.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from .wire import dumps, strict_loads

if TYPE_CHECKING:
    from .server import Gateway
    from .sessions import HandshakeSession

__all__ = ["McpFastPath", "fast_request", "protocol_class"]

logger = logging.getLogger(__name__)

FAST_MAX_BODY = 1 << 20  # larger bodies take the stack (the HTTP guard owns the 413 answer)
_SINGLE = frozenset({b"mcp-protocol-version", b"mcp-method", b"mcp-name", b"mcp-session-id", b"content-type",
                     b"accept", b"content-length", b"agentenv-role", b"authorization", b"transfer-encoding",
                     b"origin", b"connection", b"expect", b"host"})
_ENVELOPE_VERSION = "io.modelcontextprotocol/protocolVersion"
_ENVELOPE_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
_ENVELOPE_INFO = "io.modelcontextprotocol/clientInfo"
_modern: frozenset[bytes] | None = None
_handshake: frozenset[bytes] | None = None


def _modern_versions() -> frozenset[bytes]:
    global _modern
    if _modern is None:
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        _modern = frozenset(str(v).encode() for v in MODERN_PROTOCOL_VERSIONS)
    return _modern


def _handshake_versions() -> frozenset[bytes]:
    global _handshake
    if _handshake is None:
        from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

        _handshake = frozenset(str(v).encode() for v in HANDSHAKE_PROTOCOL_VERSIONS)
    return _handshake


def _json_content_type(value: bytes) -> bool:
    """What the stack's session transport takes: a type that starts application/json (its security check), one
    of whose comma-separated parts before any parameter is exactly application/json (its media-type check)."""
    return (value.lower().startswith(b"application/json")
            and any(part.strip() == b"application/json" for part in value.split(b";")[0].split(b",")))


def _accepts_json(accept: bytes) -> bool:
    types = [part.split(b";")[0].strip().lower() for part in accept.split(b",")]
    return b"*/*" in types or b"application/json" in types or b"application/*" in types


def fast_headers(raw: Any) -> tuple[dict[bytes, bytes], str | None] | None:
    """(headers by lowercase name, protocol version) when the headers admit the fast path, else None. The
    version is None only for a handshake-era session's request that names none (its session's applies)."""
    headers: dict[bytes, bytes] = {}
    for key, value in raw:
        if key in headers and key in _SINGLE or key.startswith(b"mcp-param-"):
            return None
        headers[key] = value
    version = headers.get(b"mcp-protocol-version")
    length = headers.get(b"content-length")
    content_type = headers.get(b"content-type", b"")
    if b"mcp-session-id" in headers:  # a handshake-era session's request (a modern version with one: the stack's)
        if (version is not None and version not in _handshake_versions()) or not _json_content_type(content_type):
            return None
    elif version not in _modern_versions() or not content_type.lower().startswith(b"application/json"):
        return None
    if (b"origin" in headers or b"transfer-encoding" in headers or b"expect" in headers
            or not _accepts_json(headers.get(b"accept", b""))
            or length is None or not length.isdigit() or int(length) > FAST_MAX_BODY):
        return None
    return headers, None if version is None else version.decode()


def fast_request(gateway: Gateway, headers: dict[bytes, bytes], version: str | None,
                 body: bytes) -> tuple[dict, HandshakeSession | None] | None:
    """The decoded request (and, on a handshake-era session, that session) if the fast path may answer it, else
    None (the stack will)."""
    try:
        message = strict_loads(body)
    except ValueError:  # not JSON, or what only json reads (NaN tokens, huge ints): the stack answers it
        return None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None
    if b"mcp-session-id" in headers:
        return _session_request(gateway, headers[b"mcp-session-id"].decode("latin-1"), version, message)
    if version is None:
        return None
    modern = _modern_request(gateway, headers, version, message)
    return None if modern is None else (modern, None)


def _session_request(gateway: Gateway, session_id: str, version: str | None,
                     message: dict) -> tuple[dict, HandshakeSession] | None:
    """A handshake-era session's tools/call or tools/list, its params as the stack's models read them."""
    method = message.get("method")
    params = message.get("params")
    if (method not in ("tools/call", "tools/list") or type(message.get("id")) not in (int, str)
            or not message.keys() <= {"jsonrpc", "id", "method", "params"}):
        return None
    if method == "tools/call":
        if not isinstance(params, dict) or not params.keys() <= {"name", "arguments", "_meta"}:
            return None
    elif params is not None and not (isinstance(params, dict) and params.keys() <= {"_meta"}):
        return None  # a cursor: the stack owns pagination
    meta = (params or {}).get("_meta")
    if meta is not None and (not isinstance(meta, dict) or "progressToken" in meta):
        return None  # progress notifications are the stack's
    session = gateway.handshake_sessions.lookup(session_id, version)
    if session is None:
        return None
    if plain_session_params(method, params):  # what the models would read unchanged (the tests check it)
        assert params is None or isinstance(params, dict)  # checked above
        params = params or {}
        read = ({"name": params["name"], "arguments": params.get("arguments"), "_meta": meta}
                if method == "tools/call" else {"_meta": meta})
        return {"jsonrpc": "2.0", "id": message["id"], "method": method, "params": read}, session
    from mcp_types import methods
    from pydantic import ValidationError

    try:
        methods.validate_client_request(method, session.version, params)
        typed = gateway.mcp_server().get_request_handler(method).params_type.model_validate(
            {} if params is None else params, by_name=False)
    except (ValidationError, KeyError, AttributeError):
        return None
    if method == "tools/call":
        read = {"name": typed.name, "arguments": typed.arguments, "_meta": typed.meta}
    else:
        read = {"_meta": typed.meta}
    return {"jsonrpc": "2.0", "id": message["id"], "method": method, "params": read}, session


def plain_session_params(method: str, params: Any) -> bool:
    """Whether a handshake-era session's params (keys and _meta already checked) need no model to know they
    validate as they are: a string name, an object (or no) arguments, a _meta without envelope keys."""
    params = params or {}
    if method == "tools/call" and (type(params.get("name")) is not str
                                   or type(params.get("arguments", {})) not in (dict, type(None))):
        return False
    meta = params.get("_meta")
    return meta is None or (type(meta) is dict and not any(
        type(key) is not str or key.startswith(_ENVELOPE_PREFIX) for key in meta))


def _modern_request(gateway: Gateway, headers: dict[bytes, bytes], version: str, message: dict) -> dict | None:
    method = message.get("method")
    params = message.get("params")
    if (method not in ("tools/call", "tools/list") or type(message.get("id")) not in (int, str)
            or not isinstance(params, dict) or headers.get(b"mcp-method", b"").decode("latin-1") != method
            or not message.keys() <= {"jsonrpc", "id", "method", "params"}):
        return None
    meta = params.get("_meta")
    if (not isinstance(meta, dict) or meta.get(_ENVELOPE_VERSION) != version
            or not isinstance(meta.get(_ENVELOPE_CAPABILITIES), dict)
            or not isinstance(meta.get(_ENVELOPE_INFO, {}), dict) or "progressToken" in meta):
        return None
    if method == "tools/call":
        name = params.get("name")
        # a name the header carries verbatim (no base64 sentinel to decode), nothing beyond name and arguments,
        # and no x-mcp-header argument whose Mcp-Param-* header the stack would check
        if (not isinstance(name, str) or headers.get(b"mcp-name", b"").decode("latin-1") != name
                or name.startswith("=?") or not params.keys() <= {"name", "arguments", "_meta"}
                or not isinstance(params.get("arguments", {}), dict) or name in gateway.mcp_header_tools):
            return None
    elif not params.keys() <= {"_meta"}:  # a cursor: the stack owns pagination
        return None
    if not _plain_envelope(meta):
        from mcp_types import methods
        from pydantic import ValidationError

        try:
            methods.validate_client_request(method, version, params)
        except ValidationError:
            return None
    return message


_ENVELOPE_PREFIX = "io.modelcontextprotocol/"
_PLAIN_RESULT_KEYS = frozenset({"content", "structuredContent", "isError", "_meta", "resultType"})


def _plain_envelope(meta: dict) -> bool:
    """Whether the params (name, arguments, _meta already checked) need no model to know they validate: no
    capabilities, a name/version client info, no other envelope key (those have types to check)."""
    if meta[_ENVELOPE_CAPABILITIES]:
        return False
    info = meta.get(_ENVELOPE_INFO)
    if info is not None and not (info.keys() <= {"name", "version"} and type(info.get("name")) is str
                                 and type(info.get("version")) is str and len(info) == 2):
        return False
    envelope = 2 + (_ENVELOPE_INFO in meta)
    return sum(1 for key in meta if key.startswith(_ENVELOPE_PREFIX)) == envelope


def plain_call_result(result: dict) -> bool:
    """Whether a tools/call result is one the 2026 sieve (``serialize_server_result``) answers unchanged: text
    content, a bool isError, an object structuredContent, a _meta of the gateway's own keys, no nulls where
    the sieve drops them."""
    if not result.keys() <= _PLAIN_RESULT_KEYS or result.get("resultType") != "complete":
        return False
    content = result.get("content")
    if type(content) is not list or not all(
            type(c) is dict and len(c) == 2 and c.get("type") == "text" and type(c.get("text")) is str
            for c in content):
        return False
    if type(result.get("isError", False)) is not bool or type(result.get("structuredContent", {})) is not dict:
        return False
    meta = result.get("_meta")
    return meta is None or (type(meta) is dict and all(
        value is not None and not key.startswith(_ENVELOPE_PREFIX) for key, value in meta.items()))




def _who(headers: dict[bytes, bytes]) -> dict[str, str]:
    """The only headers an answer depends on: who is calling (see ToolAccess.resolve)."""
    who = {}
    if b"agentenv-role" in headers:
        who["AgentEnv-Role"] = headers[b"agentenv-role"].decode("latin-1")
    if b"authorization" in headers:
        who["Authorization"] = headers[b"authorization"].decode("latin-1")
    return who


async def fast_answer(gateway: Gateway, message: dict, headers: dict[bytes, bytes], version: str | None,
                      session: HandshakeSession | None) -> tuple[int, bytes]:
    status, reply = await gateway.mcp_fast(message, _who(headers), version, session)
    return status, dumps(reply)


def _answer_headers(session: HandshakeSession | None) -> list[tuple[bytes, bytes]]:
    """The headers a fast answer carries beyond its length: as the stack's, the session's id on a session."""
    headers = [(b"content-type", b"application/json")]
    if session is not None:
        headers.append((b"mcp-session-id", session.session_id.encode("latin-1")))
    return headers


class McpFastPath:
    """The fast path as an ASGI wrapper around the gateway's Starlette app (see the module docstring)."""

    def __init__(self, app: Any, gateway: Gateway):
        self.app = app
        self.gateway = gateway

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if (scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != "/mcp"
                or not self.gateway.fast_mcp):
            await self.app(scope, receive, send)
            return
        checked = fast_headers(scope["headers"])
        if checked is None:
            await self.app(scope, receive, send)
            return
        headers, version = checked
        chunks = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before its request arrived
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        fast = fast_request(self.gateway, headers, version, body)
        if fast is None:
            replayed = False

            async def replay() -> dict:
                nonlocal replayed
                if not replayed:
                    replayed = True
                    return {"type": "http.request", "body": body, "more_body": False}
                return await receive()

            await self.app(scope, replay, send)
            return
        request, session = fast
        status, data = await fast_answer(self.gateway, request, headers, version, session)
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-length", str(len(data)).encode()), *_answer_headers(session)]})
        await send({"type": "http.response.body", "body": data})


# --- the uvicorn protocol -------------------------------------------------------------------------------------

_REQUEST_LINE = b"POST /mcp HTTP/1.1\r\n"
_MAX_HEAD = 64 * 1024
_REASONS = {200: b"OK", 400: b"Bad Request", 404: b"Not Found"}


def protocol_class(gateway: Gateway) -> type:
    """A uvicorn ``H11Protocol`` that answers fast-path requests itself, straight off the socket.

    It only looks at bytes that arrive while h11 is idle between requests (nothing buffered, no response
    pending); a request that does not qualify, and every byte after it until h11 is idle again, is handed to
    h11 untouched, so uvicorn serves it exactly as it would have."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GatewayHttpProtocol(H11Protocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._held = b""  # the start of a request that may take the fast path, waiting for the rest
            self._busy = False  # a fast request is being answered
            self._after = b""  # bytes that came in meanwhile (pipelining), handled once it is answered
            self._close_after = False
            self._answer_head = b""  # the answer's headers beyond the defaults and its length (_answer_headers)

        def _h11_idle(self) -> bool:
            conn = self.conn
            return (conn.our_state is h11.IDLE and conn.their_state is h11.IDLE and not conn.trailing_data[0]
                    and (self.cycle is None or self.cycle.response_complete))

        def data_received(self, data: bytes) -> None:
            if self._busy:
                self._after += data
                if len(self._after) > _MAX_HEAD:
                    self.flow.pause_reading()  # resumed once the answer is out
                return
            if self._held:
                data = self._held + data
                self._held = b""
            elif not (gateway.fast_mcp and data.startswith(_REQUEST_LINE[:5]) and self._h11_idle()):
                super().data_received(data)
                return
            if not data.startswith(_REQUEST_LINE[: len(data)]) or not self._try_fast(data):
                super().data_received(data)

        def _try_fast(self, data: bytes) -> bool:
            """Start answering ``data`` on the fast path (True), or hold it for more bytes (True), or let h11
            have it (False)."""
            self._unset_keepalive_if_required()  # bytes came in: the connection is not idle
            if not data.startswith(_REQUEST_LINE):
                if len(data) < len(_REQUEST_LINE):
                    self._held = data
                    return True
                return False
            end = data.find(b"\r\n\r\n")
            if end < 0:
                if len(data) > _MAX_HEAD:
                    return False
                self._held = data
                return True
            raw = []
            for line in data[len(_REQUEST_LINE):end].split(b"\r\n"):
                name, sep, value = line.partition(b":")
                if not sep or not name or name != name.strip() or line[:1] in (b" ", b"\t"):
                    return False  # malformed, or folded: h11 answers it
                raw.append((name.lower(), value.strip(b" \t")))
            checked = fast_headers(raw)
            if checked is None:
                return False
            headers, version = checked
            if not gateway.guard.host_ok(headers.get(b"host")):
                return False  # the ASGI app's HTTP guard answers it (421)
            body_start = end + 4
            body_end = body_start + int(headers[b"content-length"])
            if len(data) < body_end:
                self._held = data
                return True
            fast = fast_request(gateway, headers, version, data[body_start:body_end])
            if fast is None:
                return False
            request, session = fast
            self._answer_head = b"".join(b"%s: %s\r\n" % pair for pair in _answer_headers(session))
            self._unset_keepalive_if_required()
            self._busy = True
            self._after = data[body_end:]
            if b"close" in headers.get(b"connection", b"").lower():
                self._close_after = True
            # a plain tools/call goes to its child straight from here, and is answered from the child's answer
            if request["method"] == "tools/call" and gateway.mcp_call_direct(request, _who(headers), version,
                                                                                 self._respond_direct, session):
                return True
            self._track(self.loop.create_task(self._answer(request, headers, version, session)))
            return True

        async def _answer(self, request: dict, headers: dict[bytes, bytes], version: str | None,
                          session: HandshakeSession | None) -> None:
            try:
                status, data = await fast_answer(gateway, request, headers, version, session)
            except BaseException:
                self.transport.close()  # as uvicorn does when an app fails before answering
                raise
            await self._write_when_drained(status, data)

        def _respond_direct(self, status: int, reply: dict) -> None:
            """The answer of a call the gateway took without a task (called from the child's answer)."""
            try:
                data = dumps(reply)
            except Exception:  # never into the child connection's callback that called us
                logger.exception("the gateway could not encode its answer")
                self.transport.close()  # as uvicorn does when an app fails before answering
                return
            if self.flow.write_paused:
                self._track(self.loop.create_task(self._write_when_drained(status, data)))
            elif not self.transport.is_closing():
                self._write_answer(status, data)

        async def _write_when_drained(self, status: int, data: bytes) -> None:
            if self.flow.write_paused:
                await self.flow.drain()  # the client is not reading its answers: wait, as uvicorn does
            if not self.transport.is_closing():
                self._write_answer(status, data)

        def _track(self, task: Any) -> None:
            """Keep a task uvicorn's shutdown waits for (its ``tasks`` set) until it ends."""
            task.add_done_callback(self.tasks.discard)
            self.tasks.add(task)

        def _write_answer(self, status: int, data: bytes) -> None:
            head = [b"HTTP/1.1 %d %s\r\n" % (status, _REASONS.get(status, b"Error"))]
            for name, value in self.server_state.default_headers:
                head.append(b"%s: %s\r\n" % (name, value))
            if self._close_after:
                head.append(b"connection: close\r\n")
            head.append(b"content-length: %d\r\n%s\r\n" % (len(data), self._answer_head))
            self.transport.write(b"".join(head) + data)
            self.server_state.total_requests += 1
            self._busy = False
            if self._close_after:
                self.transport.close()
                return
            self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive,
                                                                self.timeout_keep_alive_handler)
            self.flow.resume_reading()
            after, self._after = self._after, b""
            if after:
                self.data_received(after)

        def shutdown(self) -> None:
            if self._busy:
                self._close_after = True  # answer first, then close
                return
            super().shutdown()

    return GatewayHttpProtocol
