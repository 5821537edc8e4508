"""The gateway's backing servers ("children"): one persistent MCP client session per child, shared by every
caller, reopened when it dies.

A child is an in-process :class:`~agentenv_local.env.Env` (an in-memory ``mcp.Client`` on ``env.mcp_server()``,
no HTTP hop), the URL of an MCP server (``http://host:port/mcp``; its card and data plane at the same base), or
the path of an env's ``server.py`` (run as ``python -m agentenv_local.env PATH --port 0``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import subprocess
import sys
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

READY_TIMEOUT_S = 60.0
TOOLS_CHANGED_DEBOUNCE_S = 0.2  # a burst of tools/list_changed from a child re-lists its tools once
REOPEN_TIMEOUT_S = 10.0
_ANNOUNCE = re.compile(r"serving on (http://\S+)")


class ChildError(RuntimeError):
    """A child could not be reached (at start, or when its session died and could not be reopened)."""


@dataclass
class ChildSpec:
    """``name``: the child's service name (``/svc/mcp-<name>``); ``target``: an Env instance, an MCP URL or
    the path of a ``server.py``; ``prefix``: serve its tools as ``<prefix>_<tool>`` (None: same name)."""

    name: str
    target: Any
    prefix: str | None = None


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
        command = [sys.executable, "-m", "agentenv_local.env", path, "--port", "0"]
        # starting it doesn't block; its output is read off the loop
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,  # noqa: ASYNC220
                                     text=True)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.ready_timeout
        while True:
            line = await asyncio.wait_for(loop.run_in_executor(None, self.proc.stderr.readline),
                                          max(0.1, deadline - loop.time()))
            if line:
                self._output.append(line.rstrip())
                match = _ANNOUNCE.search(line)
                if match:
                    self.url = match.group(1).rstrip("/") + "/mcp"
                    self.base = match.group(1).rstrip("/")
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

        assert self.base is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.ready_timeout
        last = "(no answer yet)"
        async with httpx2.AsyncClient(timeout=5.0) as http:
            while True:
                try:
                    r = await http.get(self.base + "/ready")
                    if r.status_code == 200:
                        return
                    last = f"GET /ready -> {r.status_code} {r.text[:300]}"
                    if r.status_code == 404:
                        r = await http.get(self.url)  # type: ignore[arg-type]
                        if r.status_code < 500:
                            return
                        last = f"GET /mcp -> {r.status_code} {r.text[:300]}"
                except Exception as e:  # noqa: BLE001 - any transport failure means "not yet"
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
        return Client(self.url, mode="auto", message_handler=self._on_message)

    # --- tools/list_changed from the child ---------------------------------------------------------------------

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
        except Exception as e:  # noqa: BLE001 - a child without subscriptions/listen simply never says
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
            except Exception as e:  # noqa: BLE001 - the previous tool list keeps serving
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
            except BaseException as e:  # noqa: BLE001 - reported to whoever waits for the session
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
        self._generation += 1

    async def _close_session(self) -> None:
        runner, self._runner = self._runner, None
        self.client = None
        if self._stop is not None:
            self._stop.set()
        if runner is not None:
            try:
                await asyncio.wait_for(asyncio.shield(runner), 5)
            except BaseException:  # noqa: BLE001
                runner.cancel()
                with contextlib.suppress(BaseException):
                    await runner

    async def discover(self) -> list[dict]:
        listed = await self.client.list_tools(cache_mode="refresh")
        self.tools = [wire(t) for t in listed.tools]
        return self.tools

    async def reopen(self, seen_generation: int) -> None:
        """Retire a dead session and open a new one (once per death, however many callers noticed it)."""
        async with self._lock:
            if self._generation != seen_generation and self.client is not None:
                return
            await self._close_session()
            await self._open(timeout=REOPEN_TIMEOUT_S)

    async def call(self, tool: str, arguments: dict, meta: dict) -> dict:
        client, generation = self.client, self._generation
        if client is None:
            await self.reopen(generation)
            client, generation = self.client, self._generation
        try:
            result = await client.call_tool(tool, arguments, meta=meta)
        except Exception:
            # the session may be dead: reopen it in the background of this failure, report the call failed
            try:
                await self.reopen(generation)
            except Exception as e:  # noqa: BLE001
                logger.warning("child %s: reopening its session failed: %s", self.name, e)
            raise
        return wire(result)

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
            except Exception:  # noqa: BLE001
                self.proc.kill()
