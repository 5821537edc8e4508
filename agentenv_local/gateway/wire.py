"""A lean HTTP/1.1 client for the gateway's hot path: ``tools/call`` to a URL child.

The child's MCP session (handshake, ``tools/list``, change notifications) stays with an mcp ``Client``; this
only posts one JSON-RPC request on a pooled keep-alive connection and reads the JSON (or SSE) answer. It
exists because the ``Client``'s per-call machinery (task groups, memory streams, httpx, pydantic) costs
several times the round trip itself.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any
from urllib.parse import urlsplit

__all__ = ["HttpStatusError", "LeanHttp", "dumps", "jsonrpc_reply", "loads", "next_id", "strict_loads"]

_MAX_IDLE = 64  # idle keep-alive connections kept per child; more concurrent calls open (and drop) extras


try:  # orjson is a dependency; the json module stands in where it is missing (a partial install)
    import orjson as _orjson
except ImportError:  # pragma: no cover
    _orjson = None  # type: ignore[assignment]  # checked for None where it is used


def dumps(value: Any) -> bytes:
    """Compact JSON (no spaces, UTF-8 as is), as the mcp stack writes it. orjson, when it can: it is several
    times faster than json on the hot path. It writes a non-finite float as null where json would write the
    non-standard NaN token; values decoded by :func:`loads` never hold one unless a child sent one."""
    if _orjson is not None:
        try:
            return _orjson.dumps(value)
        except TypeError:  # an int beyond 64 bits, a key that is not a str: json knows what to do
            pass
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def strict_loads(data: bytes | str) -> Any:
    """Standard JSON only (orjson: no NaN tokens, ints within 64 bits); ValueError for anything else."""
    return _orjson.loads(data) if _orjson is not None else json.loads(data)


def loads(data: bytes | str) -> Any:
    """JSON from bytes; orjson when it can, json for what orjson refuses (NaN tokens, huge ints). Raises
    ValueError for what is not JSON at all."""
    if _orjson is not None:
        try:
            return _orjson.loads(data)
        except _orjson.JSONDecodeError:
            pass
    return json.loads(data)


class HttpStatusError(RuntimeError):
    """The child answered a non-2xx status without a JSON-RPC error body."""

    def __init__(self, status: int, body: bytes):
        text = body[:300].decode("utf-8", "replace").strip()
        super().__init__(f"HTTP {status} from the child" + (f": {text}" if text else ""))
        self.status = status


Answer = tuple[int, bytes, bytes, bool]  # status, content type, body, keep-alive


class _Conn(asyncio.Protocol):
    """One keep-alive connection to the child, parsing one HTTP/1.1 answer at a time straight from
    ``data_received`` (a stream reader's waiters cost more than the parse). An exchange is settled through a
    future (:meth:`send`) or a plain callback (:meth:`send_then`, for the gateway's task-free hot path)."""

    def __init__(self) -> None:
        self.transport: Any = None
        self.closed = False
        self._buf = bytearray()
        self.waiter: asyncio.Future | None = None
        self.on_answer: Any = None  # send_then's callback: called once with an Answer or an exception
        self._head: tuple[int, bytes, int | None, bool, bool] | None = None  # the answer being parsed
        self._chunks: list[bytes] = []
        self._body_at = 0

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self._loop = asyncio.get_running_loop()

    def _pending(self) -> bool:
        return self.on_answer is not None or (self.waiter is not None and not self.waiter.done())

    def _settle(self, outcome: Answer | BaseException) -> None:
        """End the exchange with an answer or an exception, through whichever of future or callback waits."""
        callback, self.on_answer = self.on_answer, None
        if callback is not None:
            callback(outcome)
            return
        waiter = self.waiter
        if waiter is None or waiter.done():
            return
        if isinstance(outcome, BaseException):
            waiter.set_exception(outcome)
        else:
            waiter.set_result(outcome)

    def data_received(self, data: bytes) -> None:
        self._buf += data
        if not self._pending():
            return
        try:
            answer = self._parse()
        except Exception as e:  # a garbled answer fails the call and the connection
            self.close()
            self._settle(ConnectionError(f"the child answered unreadable HTTP: {e!r}"))
            return
        if answer is not None:
            self._settle(answer)

    def eof_received(self) -> bool:
        self._lost(None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost(exc)

    def _lost(self, exc: Exception | None) -> None:
        self.closed = True
        if not self._pending():
            return
        head = self._head
        if head is not None and head[2] is None and not head[3]:
            # a body without a length runs to the end of the connection
            self._settle((head[0], head[1], bytes(self._buf[self._body_at:]), False))
            return
        self._settle(ConnectionError("the child closed the connection" + (f": {exc!r}" if exc else "")))

    def abort(self, exc: BaseException) -> None:
        """Give up on the exchange in flight (a timeout): the connection is closed, the exchange fails with exc."""
        self.close()
        if self._pending():
            self._settle(exc)

    def usable(self) -> bool:
        # an idle connection the server closed (keep-alive timeout) has seen EOF by the time we look
        return not self.closed and self.transport is not None and not self.transport.is_closing()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def send(self, request: bytes) -> asyncio.Future:
        """Write ``request``; the future answers (status, content type, body, keep-alive)."""
        self._reset()
        self.waiter = waiter = self._loop.create_future()
        self.transport.write(request)
        return waiter

    def send_then(self, request: bytes, on_answer: Any) -> None:
        """Write ``request``; ``on_answer`` is called once, from the event loop, with the Answer or the
        exception that ended the exchange."""
        self._reset()
        self.waiter = None
        self.on_answer = on_answer
        self.transport.write(request)

    def _reset(self) -> None:
        self._buf.clear()
        self._head = None
        self._chunks = []

    def _parse(self) -> Answer | None:
        buf = self._buf
        if self._head is None:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                return None
            self._head = _parse_head(bytes(buf[:end]))
            self._body_at = end + 4
        status, content_type, length, chunked, keep = self._head
        if chunked:
            return self._parse_chunks()
        if length is None:
            return None  # the body runs to the end of the connection (see _lost)
        if len(buf) - self._body_at < length:
            return None
        return status, content_type, bytes(buf[self._body_at:self._body_at + length]), keep

    def _parse_chunks(self) -> Answer | None:
        buf = self._buf
        while True:
            line_end = buf.find(b"\r\n", self._body_at)
            if line_end < 0:
                return None
            size = int(bytes(buf[self._body_at:line_end]).split(b";", 1)[0].strip(), 16)
            if size == 0:  # the last chunk; then trailers, up to an empty line
                end = line_end if buf[line_end:line_end + 4] == b"\r\n\r\n" else buf.find(b"\r\n\r\n", line_end)
                if end < 0:
                    return None
                status, content_type, _length, _chunked, keep = self._head  # type: ignore[misc]  # set before the body is parsed
                return status, content_type, b"".join(self._chunks), keep
            start = line_end + 2
            if len(buf) < start + size + 2:
                return None
            self._chunks.append(bytes(buf[start:start + size]))
            self._body_at = start + size + 2


class LeanHttp:
    """Plain-HTTP keep-alive connections to one child URL (https children keep the Client's httpx)."""

    def __init__(self, url: str):
        parts = urlsplit(url)
        if parts.scheme != "http":
            raise ValueError(f"LeanHttp speaks plain http only, not {parts.scheme!r}")
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        netloc = parts.netloc.rpartition("@")[2]
        self._start = f"POST {self.target} HTTP/1.1\r\nhost: {netloc}\r\n".encode("latin-1")
        self._idle: list[_Conn] = []
        self._closed = False

    async def _connect(self) -> _Conn:
        _transport, conn = await asyncio.get_running_loop().create_connection(_Conn, self.host, self.port)
        return conn

    def take_idle(self) -> _Conn | None:
        """An idle keep-alive connection, or None (none is open: :meth:`post` opens one)."""
        while self._idle:
            conn = self._idle.pop()
            if conn.usable():
                return conn
            conn.close()
        return None

    def release(self, conn: _Conn, keep: bool) -> None:
        """Done with ``conn``: back to the idle pool when its answer allowed keep-alive, else closed."""
        conn.waiter = None
        if not keep or self._closed or len(self._idle) >= _MAX_IDLE or not conn.usable():
            conn.close()
        else:
            self._idle.append(conn)

    def request_bytes(self, headers: bytes, body: bytes) -> bytes:
        """The whole HTTP request posting ``body`` with the extra ``headers`` (``name: value\r\n`` lines)."""
        return b"%s%scontent-length: %d\r\n\r\n%s" % (self._start, headers, len(body), body)

    def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    async def post(self, headers: bytes, body: bytes) -> tuple[int, bytes, bytes]:
        """POST ``body`` with the extra ``headers`` (``name: value\\r\\n`` lines); answers
        (status, content-type, body). An idle connection the child closed is never reused (its EOF has
        arrived by then); a failure once the request is out is not retried: a tool call is not idempotent."""
        request = self.request_bytes(headers, body)
        conn = self.take_idle() or await self._connect()
        keep = False
        try:
            status, content_type, data, keep = await conn.send(request)
            return status, content_type, data
        finally:
            self.release(conn, keep)


def _parse_head(head: bytes) -> tuple[int, bytes, int | None, bool, bool]:
    lines = head.split(b"\r\n")
    status_line = lines[0].split(b" ", 2)
    if len(status_line) < 2 or not status_line[0].startswith(b"HTTP/1."):
        raise ConnectionError(f"the child answered something that is not HTTP/1.x: {lines[0][:80]!r}")
    status = int(status_line[1])
    keep = status_line[0] != b"HTTP/1.0"
    content_type = b""
    length: int | None = None
    chunked = False
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep:
            continue
        name = name.strip().lower()
        value = value.strip()
        if name == b"content-length":
            length = int(value)
        elif name == b"content-type":
            content_type = value.lower()
        elif name == b"transfer-encoding":
            chunked = b"chunked" in value.lower()
        elif name == b"connection":
            lowered = value.lower()
            if b"close" in lowered:
                keep = False
            elif b"keep-alive" in lowered:
                keep = True
    return status, content_type, None if chunked else length, chunked, keep


_ids = itertools.count(1_000_000_000)  # far from the ids the child's mcp Client uses on the same session


def next_id() -> int:
    return next(_ids)


def jsonrpc_reply(content_type: bytes, data: bytes, request_id: int,
                  on_notification: Any = None) -> dict | None:
    """The JSON-RPC message answering ``request_id`` in a JSON body or an SSE stream (None if absent);
    ``on_notification(message)`` sees the notifications an SSE stream carried before it."""
    if content_type[:17] == b"text/event-stream":
        text = data.decode("utf-8").replace("\r\n", "\n")
        for event in text.split("\n\n"):
            lines = [line[5:].lstrip(" ") if line.startswith("data:") else None for line in event.split("\n")]
            payload = "\n".join(line for line in lines if line is not None)
            if not payload:
                continue
            try:
                message = loads(payload)
            except ValueError:
                continue
            if not isinstance(message, dict):
                continue
            if message.get("id") == request_id and ("result" in message or "error" in message):
                return message
            if "method" in message and "id" not in message and on_notification is not None:
                on_notification(message)
        return None
    if not data:
        return None
    try:
        message = loads(data)
    except ValueError:  # UnicodeDecodeError included
        return None
    return message if type(message) is dict else None
