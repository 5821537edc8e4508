"""The gateway's backing servers ("children"): one persistent MCP client session per child, shared by every
caller, reopened when it dies.

A child is an in-process :class:`~agentenv_local.env.Env` (an in-memory ``mcp.Client`` on ``env.mcp_server()``,
no HTTP hop), the URL of an MCP server (``http://host:port/mcp``; its card and data plane at the same base), or
the path of an env's ``server.py`` (run as ``python -m agentenv_local.env PATH --port 0``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import subprocess
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from agentenv_local import jsonrpc
from agentenv_local.http_guard import ADMIN_TOKEN_ENV

from .wire import HttpStatusError, LeanHttp, dumps, jsonrpc_reply, next_id

logger = logging.getLogger(__name__)

READY_TIMEOUT_S = 60.0
TOOLS_CHANGED_DEBOUNCE_S = 0.2  # a burst of tools/list_changed from a child re-lists its tools once
REOPEN_TIMEOUT_S = 10.0
# An idle kept-alive connection to a child is dropped by our side well before the child's keep-alive timeout
# (uvicorn's default, 5 s, in servers we do not start; ours keep 30 s). With the two equal (httpx's default
# expiry is 5 s too), a call sent on a connection idle that long could meet the child closing it, and be lost
# to a connection reset: the race that lost A2A prompts under load (agents/client.py KEEPALIVE_EXPIRY_S).
KEEPALIVE_EXPIRY_S = 1.0


class ChildError(RuntimeError):
    """A child could not be reached (at start, or when its session died and could not be reopened)."""


@dataclass
class ChildSpec:
    """``name``: the child's service name (``/svc/mcp-<name>``); ``target``: an Env instance, an MCP URL or
    the path of a ``server.py``; ``prefix``: serve its tools as ``<prefix>_<tool>`` (None: same name);
    ``token``: the credential its data plane and extension writes need (a server we started), sent as
    ``Authorization: Bearer`` on what the gateway forwards to it."""

    name: str
    target: Any
    prefix: str | None = None
    token: str | None = field(default=None, repr=False)


def _is_env(target: Any) -> bool:
    return hasattr(target, "mcp_server") and hasattr(target, "_ae_runtime")


def wire(model: Any) -> dict:
    """An mcp model (or dict) as a plain JSON dict, without the 2026 result bookkeeping keys."""
    if hasattr(model, "model_dump"):
        data = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    else:
        data = dict(model)
    for key in ("resultType", "ttlMs", "cacheScope"):
        data.pop(key, None)
    meta = data.get("_meta")
    if isinstance(meta, dict) and "io.modelcontextprotocol/serverInfo" in meta:
        meta = {k: v for k, v in meta.items() if k != "io.modelcontextprotocol/serverInfo"}
        if meta:
            data["_meta"] = meta
        else:
            del data["_meta"]
    return data


def _modern_versions() -> frozenset[str]:
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    return frozenset(str(v) for v in MODERN_PROTOCOL_VERSIONS)


class Child:
    def __init__(self, spec: ChildSpec, *, ready_timeout: float = READY_TIMEOUT_S):
        self.spec = spec
        self.name = spec.name
        self.ready_timeout = ready_timeout
        self.env = spec.target if _is_env(spec.target) else None
        self.url: str | None = None  # the MCP URL of an HTTP child
        self.base: str | None = None  # its base URL (card, data plane, extensions)
        self.proc: subprocess.Popen | None = None
        self._output: deque[str] = deque(maxlen=40)
        self.client: Any = None
        self.tools: list[dict] = []  # as the child lists them (its own names)
        self._runner: asyncio.Task | None = None
        self._stop: asyncio.Event | None = None
        self._lock = asyncio.Lock()
        self._generation = 0
        # called (debounced) after the child said notifications/tools/list_changed; the gateway sets it
        self.on_tools_changed: Callable[[Child], Awaitable[None]] | None = None
        self.tools_changed_debounce = TOOLS_CHANGED_DEBOUNCE_S
        self._tools_dirty = False
        self._tools_task: asyncio.Task | None = None
        self.lean: _LeanSession | None = None  # the hot path for tools/call to a URL child (None: the Client)
        # the hot path for tools/call to an in-process env: its runtime, called as its MCP server would call it,
        # with the _meta envelope the session's Client would add (None: the Client carries every call)
        self._inproc: tuple[Any, dict] | None = None
        self._lean_next: _LeanSession | None = None
        self._http_clients: list[Any] = []
        self._lean_ok: set[str] = set()  # tools the lean path may call (no x-mcp-header argument to mirror)
        if self.env is None:
            target = str(spec.target)
            if target.startswith(("http://", "https://")):
                self.url = target if target.rstrip("/").endswith("/mcp") else target.rstrip("/") + "/mcp"
                self.base = self.url.rstrip("/")[: -len("/mcp")]

    @property
    def kind(self) -> str:
        return "inprocess" if self.env is not None else "http"

    def last_output(self) -> str:
        return "\n".join(self._output) or "(nothing)"

    # --- lifecycle ---------------------------------------------------------------------------------------------

    async def start(self) -> None:
        if self.env is None and self.url is None:
            await self._spawn()
        if self.url is not None:
            await self._wait_ready()
        await self._open()
        await self.discover()

    async def _spawn(self) -> None:
        path = str(self.spec.target)
        if not os.path.exists(path):
            raise ChildError(f"child {self.name!r}: {path!r} is neither an Env, an http(s) URL nor a file")
        # imported here: procs is kept off the gateway's import path
        from agentenv_local.procs import host_env

        command = [sys.executable, "-m", "agentenv_local.env", path, "--port", "0"]
        env = host_env()  # a minimal environment, never our secrets
        if self.spec.token:  # its data plane requires the token (read, then dropped from its environment)
            env[ADMIN_TOKEN_ENV] = self.spec.token
        # starting it doesn't block; its output is read off the loop
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True, env=env)
        stderr = self.proc.stderr
        assert stderr is not None  # a pipe
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.ready_timeout
        while True:
            line = await asyncio.wait_for(loop.run_in_executor(None, stderr.readline),
                                          max(0.1, deadline - loop.time()))
            if line:
                self._output.append(line.rstrip())
                # imported here: procs (and what it imports) is kept off the gateway's import path
                from agentenv_local.procs import announced_url

                base = announced_url(line)
                if base:
                    self.url = base + "/mcp"
                    self.base = base
                    break
            elif self.proc.poll() is not None:
                raise ChildError(f"child {self.name!r} exited with code {self.proc.returncode} before serving; "
                                 f"its last output:\n{self.last_output()}")
            if loop.time() > deadline:
                raise ChildError(f"child {self.name!r} did not start serving in {self.ready_timeout:g}s; "
                                 f"its last output:\n{self.last_output()}")
        # keep draining its stderr so it never blocks on a full pipe
        loop.run_in_executor(None, self._drain_stderr)

    def _drain_stderr(self) -> None:
        proc = self.proc
        if proc is None or proc.stderr is None:
            return
        with contextlib.suppress(Exception):
            for line in proc.stderr:
                self._output.append(line.rstrip())

    async def _wait_ready(self) -> None:
        """Wait for `/ready` 200 (else `/mcp` answering below 500), as the reference's gateway does."""
        import httpx2

        url, base = self.url, self.base
        assert url is not None and base is not None  # start() waits only on a child with a URL
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.ready_timeout
        last = "(no answer yet)"
        async with httpx2.AsyncClient(timeout=5.0) as http:
            while True:
                try:
                    r = await http.get(base + "/ready")
                    if r.status_code == 200:
                        return
                    last = f"GET /ready -> {r.status_code} {r.text[:300]}"
                    if r.status_code == 404:
                        r = await http.get(url)
                        if r.status_code < 500:
                            return
                        last = f"GET /mcp -> {r.status_code} {r.text[:300]}"
                except Exception as e:  # any transport failure means "not yet"
                    last = f"{type(e).__name__}: {e}"
                if self.proc is not None and self.proc.poll() is not None:
                    raise ChildError(f"child {self.name!r} exited with code {self.proc.returncode}; its last "
                                     f"output:\n{self.last_output()}")
                if loop.time() > deadline:
                    said = self.last_output() if self.proc is not None else last
                    raise ChildError(f"child {self.name!r} at {self.url} did not become ready in "
                                     f"{self.ready_timeout:g}s; the last thing it said: {said}")
                await asyncio.sleep(0.1)

    def _client(self) -> Any:
        from mcp import Client

        if self.env is not None:
            return Client(self.env.mcp_server(), message_handler=self._on_message)
        from mcp.client.streamable_http import streamable_http_client

        # The session's own HTTP client, watched: what it sends (protocol version, session id, the 2026 request
        # envelope) is what the lean tools/call path must send on the same session. (Over https the Client keeps
        # every call: its TLS settings are httpx's, not ours to mirror.)
        url = self.url
        assert url is not None  # a child is an in-process env or has a URL (start() spawned it for one)
        http = child_http_client()
        if url.startswith("http://"):
            lean = self._lean_next = _LeanSession(url)
            http.event_hooks["request"].append(lean.observe)
        self._http_clients.append(http)
        return Client(streamable_http_client(url, http_client=http), mode="auto",
                      message_handler=self._on_message)

    # --- tools/list_changed from the child ---------------------------------------------------------------------

    def _on_lean_notification(self, message: dict) -> None:
        if message.get("method") == "notifications/tools/list_changed":
            self.tools_changed()

    async def _on_message(self, message: Any) -> None:
        """The session's message handler: a handshake-era child's ``notifications/tools/list_changed``."""
        root = getattr(message, "root", message)
        if getattr(root, "method", None) == "notifications/tools/list_changed":
            self.tools_changed()

    async def _listen(self, client: Any) -> None:
        """A 2026-revision child: its change notifications come on a ``subscriptions/listen`` stream."""
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    self.tools_changed()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a child without subscriptions/listen simply never says
            logger.debug("child %s: no subscriptions/listen stream: %r", self.name, e)

    def tools_changed(self) -> None:
        """Schedule one re-listing of the child's tools (a burst of notifications is debounced into one)."""
        self._tools_dirty = True
        if self._tools_task is None or self._tools_task.done():
            self._tools_task = asyncio.get_running_loop().create_task(self._refresh_tools(),
                                                                      name=f"gateway-child-{self.name}-tools")

    async def _refresh_tools(self) -> None:
        while self._tools_dirty:
            await asyncio.sleep(self.tools_changed_debounce)
            self._tools_dirty = False
            if self.on_tools_changed is None or self.client is None:
                continue
            try:
                await self.on_tools_changed(self)
            except Exception as e:  # the previous tool list keeps serving
                logger.warning("child %s: re-listing its tools after tools/list_changed failed: %r", self.name, e)

    async def _open(self, timeout: float | None = None) -> None:
        """Open the session in a task of its own (the client's task groups must be entered and left in one task)."""
        loop = asyncio.get_running_loop()
        opened: asyncio.Future = loop.create_future()
        stop = asyncio.Event()

        async def hold() -> None:
            try:
                async with self._client() as client:
                    opened.set_result(client)
                    listener = None
                    if str(getattr(client.session, "protocol_version", "")) in _modern_versions():
                        listener = asyncio.create_task(self._listen(client), name=f"gateway-child-{self.name}-listen")
                    try:
                        await stop.wait()
                    finally:
                        if listener is not None:
                            listener.cancel()
                            with contextlib.suppress(BaseException):
                                await listener
            except BaseException as e:  # reported to whoever waits for the session
                if not opened.done():
                    opened.set_exception(e if isinstance(e, Exception) else ChildError(repr(e)))
                elif not isinstance(e, asyncio.CancelledError):
                    logger.debug("child %s session ended: %r", self.name, e)

        self._stop = stop
        self._runner = asyncio.create_task(hold(), name=f"gateway-child-{self.name}")
        try:
            self.client = await asyncio.wait_for(opened, timeout or self.ready_timeout)
        except Exception as e:
            await self._close_session()
            raise ChildError(f"child {self.name!r}: could not open an MCP session to "
                             f"{self.url or 'the in-process env'}: {type(e).__name__}: {e}") from e
        self.lean, self._lean_next = self._lean_next, None
        if self.env is not None:
            self._inproc = _inprocess_lane(self.env, self.client)
        self._generation += 1

    async def _close_session(self) -> None:
        runner, self._runner = self._runner, None
        self.client = None
        self._inproc = None
        lean, self.lean = self.lean, None
        if lean is not None:
            lean.close()
        if self._stop is not None:
            self._stop.set()
        if runner is not None:
            try:
                await asyncio.wait_for(asyncio.shield(runner), 5)
            except BaseException:
                runner.cancel()
                with contextlib.suppress(BaseException):
                    await runner
        clients, self._http_clients = self._http_clients, []
        for http in clients:
            with contextlib.suppress(Exception):
                await http.aclose()

    async def discover(self) -> list[dict]:
        listed = await self.client.list_tools(cache_mode="refresh")
        self.tools = [wire(t) for t in listed.tools]
        # a tool with x-mcp-header arguments needs Mcp-Param-* headers: the Client computes those
        self._lean_ok = {t["name"] for t in self.tools if "x-mcp-header" not in json.dumps(t.get("inputSchema"))}
        return self.tools

    async def reopen(self, seen_generation: int) -> None:
        """Retire a dead session and open a new one (once per death, however many callers noticed it)."""
        async with self._lock:
            if self._generation != seen_generation and self.client is not None:
                return
            await self._close_session()
            await self._open(timeout=REOPEN_TIMEOUT_S)

    async def call(self, tool: str, arguments: dict, meta: dict) -> dict:
        if self.client is None:
            await self.reopen(self._generation)
        generation, lean = self._generation, self.lean
        outcome: dict | BaseException | None = None
        if self._inproc is not None:
            runtime, envelope = self._inproc
            # what the env's MCP server does with the request, minus the in-memory client and server stacks
            # (about half of the hub's work per call); the env's lifespan is held by the open session
            result = await runtime.call_tool(tool, arguments, meta={**envelope, **meta}, transport="mcp")
            return wire_result(result)
        if lean is not None and tool in self._lean_ok:
            try:
                outcome = await lean.call_tool(tool, arguments, meta, self._on_lean_notification)
            except Exception as e:  # complete() reports it as call() always has
                outcome = e
        return await self.complete(tool, arguments, meta, generation, outcome)

    async def complete(self, tool: str, arguments: dict, meta: dict, generation: int,
                       outcome: dict | BaseException | None) -> dict:
        """Finish a call whose lean exchange ended in ``outcome``: a result (answered as is), None (not a
        complete result, an input_required round say, or no lean exchange at all: the Client drives the call)
        or an exception (the session may be dead: it is reopened, and the call reported failed)."""
        try:
            if isinstance(outcome, BaseException):
                raise outcome
            if outcome is not None:
                return outcome
            if self.client is None:
                raise ConnectionError(f"server {self.name!r} has no open session")
            return wire(await self.client.call_tool(tool, arguments, meta=meta))
        except Exception:
            try:
                await self.reopen(generation)
            except Exception as e:
                logger.warning("child %s: reopening its session failed: %s", self.name, e)
            raise

    def direct_lane(self, tool: str) -> tuple[_LeanSession, Any] | None:
        """For the gateway's task-free hot path: the lean session and an idle connection to call ``tool`` on
        at once, or None when the call needs more (a session to open, a connection to make, the Client)."""
        lean = self.lean
        if self.client is None or lean is None or tool not in self._lean_ok or not lean.ready():
            return None
        conn = lean.http.take_idle()
        return None if conn is None else (lean, conn)

    @property
    def generation(self) -> int:
        """Which session this is (each reopen counts one): a failure reopens only the session it saw."""
        return self._generation

    async def aclose(self) -> None:
        task, self._tools_task = self._tools_task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        await self._close_session()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                await asyncio.get_running_loop().run_in_executor(None, self.proc.wait, 10)
            except Exception:
                self.proc.kill()


def child_http_client() -> Any:
    """The HTTP client of a child's MCP session: mcp's defaults (30 s, 300 s to read a stream), idle connections
    kept only KEEPALIVE_EXPIRY_S."""
    import httpx2
    from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

    return httpx2.AsyncClient(timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
                              limits=httpx2.Limits(keepalive_expiry=KEEPALIVE_EXPIRY_S))


class ExpiringLeanHttp(LeanHttp):
    """LeanHttp whose idle connections are not reused once idle longer than KEEPALIVE_EXPIRY_S (closed instead)."""

    def take_idle(self) -> Any:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if conn.usable() and now - getattr(conn, "idle_since", now) <= KEEPALIVE_EXPIRY_S:
                return conn
            conn.close()
        return None

    def release(self, conn: Any, keep: bool) -> None:
        conn.idle_since = time.monotonic()
        super().release(conn, keep)


def _inprocess_lane(env: Any, client: Any) -> tuple[Any, dict] | None:
    """(the env's runtime, the request ``_meta`` envelope its in-memory Client stamps on every request), or None
    when that envelope can't be learnt (a handshake-era session; an mcp whose session keeps it elsewhere): then
    the Client carries every call, as before."""
    try:
        request: dict[str, Any] = {"method": "tools/call", "params": {}}
        client.session._stamp(request, {})  # the modern revision's per-request stamp (mcp keeps it private)
        meta = request["params"].get("_meta") or {}
    except Exception:
        return None
    envelope = {k: v for k, v in meta.items() if k.startswith(_ENVELOPE_PREFIX)}
    if _ENVELOPE_PREFIX + "protocolVersion" not in envelope:
        return None
    return env._ae_runtime(), envelope


_RESULT_BOOKKEEPING = ("resultType", "ttlMs", "cacheScope")
_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
_ENVELOPE_PREFIX = "io.modelcontextprotocol/"
_PLAIN_RESULT_KEYS = frozenset({"content", "structuredContent", "isError", "_meta", *_RESULT_BOOKKEEPING})


def _text_item(item: Any) -> bool:
    return type(item) is dict and len(item) == 2 and item.get("type") == "text" and type(item.get("text")) is str


def wire_result(result: dict) -> dict:
    """A raw tools/call result shaped as :func:`wire` shapes the Client's model of it. The usual plain shape
    is taken as is; anything else goes through the model (so it is checked, and defaults filled, the same)."""
    content = result.get("content")
    if (type(content) is not list or not result.keys() <= _PLAIN_RESULT_KEYS
            or type(result.get("isError", False)) is not bool or type(result.get("_meta") or {}) is not dict
            or not all(map(_text_item, content))):
        from mcp_types import CallToolResult

        return wire(CallToolResult.model_validate(result))
    data = {k: v for k, v in result.items() if v is not None and k not in _RESULT_BOOKKEEPING}
    if "isError" not in data:
        data["isError"] = False
    meta = data.get("_meta")
    if meta is not None and _SERVER_INFO in meta:
        meta = {k: v for k, v in meta.items() if k != _SERVER_INFO}
        if meta:
            data["_meta"] = meta
        else:
            del data["_meta"]
    return data


class _LeanSession:
    """tools/call on the child's MCP session without the Client: the same headers and envelope the session's
    Client sends (learnt by watching its requests), one POST on a pooled connection, the JSON or SSE answer."""

    def __init__(self, url: str):
        self.http = ExpiringLeanHttp(url)
        self._name_headers: dict[str, bytes] = {}
        self.version: str | None = None
        self.session_id: str | None = None
        self.envelope: dict | None = None  # the 2026 revision's per-request _meta (protocol version, client)
        self.modern = False
        self._headers = b""
        self._ready: bool | None = None

    async def observe(self, request: Any) -> None:
        """httpx request hook on the session's Client: remember its protocol version, session id, envelope."""
        headers = request.headers
        version = headers.get("mcp-protocol-version")
        if version:
            self.version = version
            self.session_id = headers.get("mcp-session-id")
        if self.envelope is None and request.method == "POST" and self.version in _modern_versions():
            with contextlib.suppress(Exception):
                meta = json.loads(request.content)["params"]["_meta"]
                self.envelope = {k: v for k, v in meta.items() if k.startswith(_ENVELOPE_PREFIX)}

    def ready(self) -> bool:
        """Whether the session's Client has shown what its requests carry (a handshake-era session's version
        and id come with its first request after initialize, which may not have gone out yet)."""
        if self._ready is None:
            self._ready = self._prepare()
        return bool(self._ready)

    def _prepare(self) -> bool | None:
        """The request headers of the lean path; None: not known yet, False: this session can't take it."""
        version = self.version
        if not version:
            return None
        modern = version in _modern_versions()
        if modern and not self.envelope:
            return None
        if not all(v.isascii() and v.isprintable() for v in (version, self.session_id or "")):
            return False
        lines = "accept: application/json, text/event-stream\r\ncontent-type: application/json\r\n"
        lines += f"mcp-protocol-version: {version}\r\n"
        if self.session_id:
            lines += f"mcp-session-id: {self.session_id}\r\n"
        if modern:
            lines += "mcp-method: tools/call\r\n"
        self._headers = lines.encode("latin-1")
        self.modern = modern
        return True

    def close(self) -> None:
        self.http.close()

    async def call_tool(self, tool: str, arguments: dict, meta: dict, on_notification: Any) -> dict | None:
        """The child's result (shaped as :func:`wire`), None when it is not a complete one (the caller asks the
        Client then); a JSON-RPC error raises MCPError, as the Client does."""
        if self._ready is not True and not self.ready():
            return None
        request_id, headers, body = self._request(tool, arguments, meta)
        status, content_type, data = await self.http.post(headers, body)
        return self._read_answer(request_id, status, content_type, data, on_notification)

    def send_direct(self, conn: Any, tool: str, arguments: dict, meta: dict, on_notification: Any,
                    on_outcome: Any) -> None:
        """:meth:`call_tool` on ``conn`` (from :meth:`Child.direct_lane`) without a task: ``on_outcome`` is
        called once, from the event loop, with the result, None, or the exception call_tool would raise."""
        request_id, headers, body = self._request(tool, arguments, meta)
        http = self.http

        def answered(answer: Any) -> None:
            if isinstance(answer, BaseException):
                http.release(conn, False)
                on_outcome(answer)
                return
            status, content_type, data, keep = answer
            http.release(conn, keep)
            outcome: dict | Exception | None
            try:
                outcome = self._read_answer(request_id, status, content_type, data, on_notification)
            except Exception as e:  # handed on, as call_tool would raise it
                outcome = e
            on_outcome(outcome)

        conn.send_then(http.request_bytes(headers, body), answered)

    def _request(self, tool: str, arguments: dict, meta: dict) -> tuple[int, bytes, bytes]:
        """(request id, extra headers, body) of a tools/call on this session."""
        request_id = next_id()
        headers = self._headers
        if self.modern:
            name_header = self._name_headers.get(tool)
            if name_header is None:
                from mcp.shared.inbound import encode_header_value

                name_header = self._name_headers[tool] = b"mcp-name: %s\r\n" % encode_header_value(tool).encode()
            headers += name_header
            meta = {**self.envelope, **meta}  # type: ignore[dict-item]  # modern is set only once an envelope was seen
        params: dict[str, Any] = {"name": tool, "arguments": arguments}
        if meta:
            params["_meta"] = meta
        return request_id, headers, dumps(jsonrpc.request("tools/call", params, request_id))

    @staticmethod
    def _read_answer(request_id: int, status: int, content_type: bytes, data: bytes,
                     on_notification: Any) -> dict | None:
        message = jsonrpc_reply(content_type, data, request_id, on_notification)
        if message is not None and isinstance(message.get("error"), dict):
            from mcp.shared.exceptions import MCPError

            error = message["error"]
            raise MCPError(error.get("code", -32603), str(error.get("message", "")), error.get("data"))
        if status >= 300 or message is None or not isinstance(message.get("result"), dict):
            raise HttpStatusError(status, data)
        result = message["result"]
        if result.get("resultType", "complete") != "complete":
            return None
        return wire_result(result)
