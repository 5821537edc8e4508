"""The MCP gateway: one MCP endpoint (and the reference's REST control plane) in front of an env's servers.

    gw = Gateway("demo", [ChildSpec("echo", Echo()), ChildSpec("mail", "http://127.0.0.1:18802/mcp")])
    app = gw.app()            # Starlette ASGI app; its lifespan starts the children and the trigger driver
    gw.serve(port=18765)      # or: python -m agentenv_local.gateway --child echo=URL ... --port N
    gw.admin_token            # the control plane's credential (Authorization: Bearer ...)

The control plane (RBAC, clock and trigger writes, the data plane, writes through /svc) needs the gateway's
admin token unless it is built with ``control_plane_auth=False`` (the reference's open behaviour).

See docs/environments/gateway.md for every route, body and answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import weakref
from collections.abc import Callable, Iterable
from random import getrandbits
from typing import Any, NamedTuple, Self

from .a2a import send_a2a
from .changes import ChangeLog
from .children import Child, ChildError, ChildSpec
from .clock import (
    GET_TIME_TOOL,
    GET_TIME_TOOL_NAME,
    ClockError,
    VirtualClock,
)
from .mcp_results import McpResults, error_result
from .rbac import (
    DEFAULT_ROLE,
    ROLE_META_KEY,
    SESSION_META_KEY,
    RbacError,
    ToolAccess,
    is_hidden_by_default,
)
from .sessions import HandshakeSession, HandshakeSessions, legacy_error, legacy_reply
from .trajectory import Trajectory

logger = logging.getLogger(__name__)

__all__ = ["ChildError", "ChildSpec", "Gateway", "GatewayError", "ToolNameClash"]

MODES = ("performance", "consistent")
VIRTUAL_TIME_META_KEY = "agentenv.io/virtual_time"
TOOL_CALL_TIMEOUT_S = 600.0  # as the reference: /step answers 504 past it
ADVANCE_SETTLE_S = 10.0  # advance_clock waits this long at most for the fires it started to finish
CLASH_FIX = ("serve each server's tools under a prefix (Gateway(prefix_tools=True), per-server prefixes, or "
             "--prefix-tools), or rename one of the tools")


class _OpenCall(NamedTuple):
    """A proxied call under way: what its events need once it is answered."""

    tool: str
    arguments: dict
    role: str
    call_id: str
    causes: list
    extra: dict  # {"source": ...} when the call has one


class GatewayError(Exception):
    """A REST-level refusal: ``status`` and the JSON ``body`` to answer with."""

    def __init__(self, status: int, message: str, **extra: Any):
        super().__init__(message)
        self.status = status
        self.body = {"error": message, **extra}


def clash_text(clashes: dict[str, list[str]]) -> str:
    def sources(names: list[str]) -> str:
        quoted = [f"'{n}'" for n in names]
        return f"{', '.join(quoted[:-1])} and {quoted[-1]}" if len(quoted) > 1 else quoted[0]

    listed = "; ".join(f"'{name}' from {sources(names)}" for name, names in clashes.items())
    return f"Duplicate tool name{'s' if len(clashes) > 1 else ''} {listed}"


class ToolNameClash(ValueError):
    def __init__(self, clashes: dict[str, list[str]]):
        self.clashes = clashes
        super().__init__(clash_text(clashes))


def _is_url(target: Any) -> bool:
    return isinstance(target, str) and target.startswith(("http://", "https://"))


def _normalize_children(children: Iterable[Any]) -> list[ChildSpec]:
    specs: list[ChildSpec] = []
    for item in children:
        if isinstance(item, ChildSpec):
            specs.append(item)
        elif isinstance(item, tuple):
            specs.append(ChildSpec(*item))
        elif hasattr(item, "_ae_runtime"):
            specs.append(ChildSpec(item._ae_runtime().name, item))
        else:
            raise TypeError(f"a gateway child is a ChildSpec, a (name, target) tuple or an Env, got {item!r}")
    names = [s.name for s in specs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"two gateway children are named {dupes[0]!r}: give each a distinct name")
    return specs


class _Actions:
    """The trigger engine's ActionRunner: internal calls through the child sessions, RBAC changes, A2A sends."""

    def __init__(self, gateway: Gateway):
        self.gw = gateway

    async def call_tool(self, tool: str, args: dict, role: str | None) -> Any:
        return await self.gw._internal_call(tool, args, role or DEFAULT_ROLE)

    async def set_permission(self, action: str, role: str, tools: list[str] | str) -> Any:
        answer = self.gw.access.apply(action, role, tools)
        self.gw._state_changed("rbac")
        return answer

    async def send_nl(self, executor: dict, instruction: str, context_id: str) -> str | None:
        return await send_a2a(executor, instruction, context_id)

    def read_only(self, tool: str) -> bool:
        if tool == GET_TIME_TOOL_NAME:
            return True
        entry = self.gw._tool_entries.get(tool)
        return bool(entry and (entry.get("annotations") or {}).get("readOnlyHint"))


class Gateway:
    def __init__(self, name: str, children: Iterable[Any], *, mode: str = "performance",
                 prefix_tools: bool | dict[str, str] = False, clock: VirtualClock | None = None,
                 access: ToolAccess | None = None, triggers_seed: int = 0,
                 on_event: Callable[[dict], Any] | None = None, ready_timeout: float = 60.0,
                 allowed_origins: Iterable[str] | None = None, tool_timeout: float = TOOL_CALL_TIMEOUT_S,
                 triggers_state: dict | None = None, on_state_change: Callable[[str], Any] | None = None,
                 control_plane_auth: bool = True, admin_token: str | None = None, guard: Any = None,
                 allowed_hosts: Iterable[str] = ()):
        from .triggers import TriggerEngine

        if mode not in MODES:
            raise ValueError(f"mode must be 'performance' or 'consistent', got {mode!r}")
        self.name = name
        self.mode = mode
        specs = _normalize_children(children)
        for spec in specs:
            if spec.prefix is None:
                if prefix_tools is True:
                    spec.prefix = spec.name
                elif isinstance(prefix_tools, dict) and spec.name in prefix_tools:
                    spec.prefix = prefix_tools[spec.name]
        self.children: list[Child] = [Child(s, ready_timeout=ready_timeout) for s in specs]
        for child in self.children:
            child.on_tools_changed = self._rediscover
        self.clock = clock or VirtualClock()
        self.access = access or ToolAccess()
        self._handoff_tasks: set[asyncio.Future] = set()  # tasks the gateway started and awaits nowhere (_keep)
        self.trajectory = Trajectory(self.clock, on_event=on_event, keep=self._keep)
        self.tool_timeout = tool_timeout
        self.allowed_origins = set(allowed_origins or ())
        self.allowed_hosts = list(allowed_hosts)
        self._guard_policy = guard  # http_guard.GuardPolicy; built from the settings on first use
        # the control plane's credential: None only when the reference's open control plane was asked for
        self.control_plane_auth = control_plane_auth
        self.admin_token = (admin_token or secrets.token_urlsafe(32)) if control_plane_auth else None
        self.access.set_admin_token(self.admin_token)
        for spec in specs:  # a server.py child is started by this gateway: its data plane takes the same token
            if spec.token is None and not _is_url(spec.target) and not hasattr(spec.target, "_ae_runtime"):
                spec.token = self.admin_token
        self.clashes: dict[str, list[str]] = {}
        self.discovered = False
        self._routes: dict[str, tuple[Child, str]] = {}  # served name -> (child, the child's own name)
        self._tool_entries: dict[str, dict] = {}  # served name -> tools/list entry (served name)
        self.mcp_header_tools: set[str] = set()  # served tools with x-mcp-header arguments (fastpath.py)
        self._server_tools: list[tuple[str, list[dict]]] = []
        self._call_lock: asyncio.Lock | None = None
        self._started = False
        self._start_lock: asyncio.Lock | None = None
        self._driver: asyncio.Task | None = None
        self._sessions: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._session_ids: dict[str, str] = {}
        self.on_state_change = on_state_change
        options: dict[str, Any] = {
            "seed": triggers_seed, "on_event": self._log_event, "on_change": lambda: self._state_changed("triggers"),
            "known_tools": lambda: set(self._served_names()) if self.discovered else None}
        self.engine = (TriggerEngine.from_dict(triggers_state, self.clock, _Actions(self), **options)
                       if triggers_state else TriggerEngine(self.clock, _Actions(self), **options))
        self._mcp_server: Any = None
        self._notifier: Any = None  # tells the gateway's own MCP sessions tools/list_changed
        self.mcp_results = McpResults(self)
        # answer tools/call and tools/list on POST /mcp without the mcp server stack (fastpath.py): 2026-revision
        # requests, and those of the handshake-era sessions the stack opened (sessions.py); False sends every
        # request through the stack (the tests compare the two)
        self.fast_mcp = True
        self.handshake_sessions = HandshakeSessions()
        self._svc_apps: dict[str, Any] = {}
        self.changes = ChangeLog(self.children, clock=self.clock)

    @property
    def on_event(self) -> Callable[[dict], Any] | None:
        """Given each recorded event once the step that recorded it is done (the hub stores them)."""
        return self.trajectory.on_event

    @on_event.setter
    def on_event(self, callback: Callable[[dict], Any] | None) -> None:
        self.trajectory.on_event = callback

    @property
    def events(self) -> list[dict]:
        """The trajectory's events, oldest first (what /trajectory answers)."""
        return self.trajectory.events

    def _state_changed(self, what: str) -> None:
        """Tell the owner (the hub, which keeps RBAC rules and trigger state in the store) that ``what``
        (``"rbac"``, ``"triggers"``, ``"clock"``) changed: read ``access.to_dict()``, ``engine.to_dict()`` or
        ``clock.to_dict()``."""
        if self.on_state_change is None:
            return
        try:
            self.on_state_change(what)
        except Exception:
            logger.exception("gateway on_state_change callback failed")

    @property
    def guard(self) -> Any:
        """The HTTP guard's policy (Host, Origin, body limits) for this gateway's servers."""
        if self._guard_policy is None:
            from agentenv_local.http_guard import GuardPolicy

            self._guard_policy = GuardPolicy.from_settings(self.allowed_hosts, self.allowed_origins)
        return self._guard_policy

    def is_admin(self, headers: Any) -> bool:
        """Whether a request may use the control plane: it bears the admin token, or the gateway has none."""
        from .rbac import bearer_from

        return self.admin_token is None or self.access.is_admin(bearer_from(headers))

    def change_access(self, action: str, body: Any) -> dict:
        answer = self.access.change(action, body)
        self._state_changed("rbac")
        return answer

    # --- lifecycle -------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start every child (spawn/wait ready/open its session), discover tools; ChildError if one never gets ready."""
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self._started:
                return
            self._call_lock = asyncio.Lock()
            results = await asyncio.gather(*(c.start() for c in self.children), return_exceptions=True)
            failures = [r for r in results if isinstance(r, BaseException)]
            if failures:
                await asyncio.gather(*(c.aclose() for c in self.children), return_exceptions=True)
                first = failures[0]
                if isinstance(first, ChildError):
                    raise first
                raise ChildError(f"gateway {self.name!r}: a child failed to start: {type(first).__name__}: {first}")
            self._register_tools()
            self._started = True

    async def aclose(self) -> None:
        self.trajectory.hand_off()
        if self._driver is not None:
            self._driver.cancel()
            with contextlib.suppress(BaseException):
                await self._driver
            self._driver = None
        with contextlib.suppress(Exception):
            await self.engine.aclose()
        await asyncio.gather(*(c.aclose() for c in self.children), return_exceptions=True)
        self.trajectory.hand_off()  # what the engine logged while it stopped
        if self._handoff_tasks:
            await asyncio.gather(*self._handoff_tasks, return_exceptions=True)
        self._started = False
        self.discovered = False

    def start_driver(self, interval: float = 1.0) -> None:
        if self._driver is None:
            self._driver = asyncio.create_task(self.engine.run_driver(interval), name="gateway-trigger-driver")

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _served_name(self, child: Child, tool: str) -> str:
        return f"{child.spec.prefix}_{tool}" if child.spec.prefix else tool

    def _register_tools(self) -> None:
        sources: dict[str, list[str]] = {}
        for child in self.children:
            for tool in child.tools:
                sources.setdefault(self._served_name(child, tool["name"]), []).append(child.name)
        clashes = {n: s for n, s in sources.items() if len(s) > 1 and n != GET_TIME_TOOL_NAME}
        self._server_tools = []
        self._routes = {}
        self._tool_entries = {}
        self.mcp_header_tools = set()
        if clashes:
            self.clashes = clashes
            logger.error("gateway %s: %s, so the env serves none of its servers' tools; fix: %s",
                         self.name, clash_text(clashes), CLASH_FIX)
            self.discovered = False
            return
        self.clashes = {}
        hidden = []
        for child in self.children:
            served_tools = []
            for tool in child.tools:
                served = self._served_name(child, tool["name"])
                entry = {**tool, "name": served}
                served_tools.append(entry)
                self._routes[served] = (child, tool["name"])
                self._tool_entries[served] = entry
                if is_hidden_by_default(tool.get("_meta")):
                    hidden.append(served)
            self._server_tools.append((child.name, served_tools))
        self.access.set_hidden_by_default(hidden)
        self.mcp_header_tools = {name for name, entry in self._tool_entries.items()
                                  if "x-mcp-header" in json.dumps(entry.get("inputSchema"))}
        self.discovered = True

    async def _rediscover(self, child: Child) -> None:
        """A child said ``notifications/tools/list_changed``: re-list its tools, re-register every served tool
        (clash detection and prefixes as at start, the hidden-by-default set refreshed, RBAC rules untouched),
        record a ``tools_changed`` event and tell the gateway's own MCP sessions."""
        if not self._started or child.client is None:
            return
        before = dict(self._tool_entries)
        clashes_before = dict(self.clashes)
        await child.discover()
        self._register_tools()
        if self._tool_entries == before and self.clashes == clashes_before:
            return
        added = sorted(set(self._tool_entries) - set(before))
        removed = sorted(set(before) - set(self._tool_entries))
        changed = sorted(n for n in set(before) & set(self._tool_entries) if before[n] != self._tool_entries[n])
        event: dict[str, Any] = {"event_type": "tools_changed", "server": child.name, "added": added,
                                 "removed": removed, "changed": changed}
        if self.clashes:
            event["tool_name_clashes"] = self.clashes
        logger.info("gateway %s: server %s changed its tools (+%s -%s)", self.name, child.name, added, removed)
        self.log_event(event)
        if self._notifier is not None:
            await self._notifier.notify()

    def _served_names(self) -> list[str]:
        names = list(self._routes)
        if self.clock.armed and GET_TIME_TOOL_NAME not in self._routes:
            names.append(GET_TIME_TOOL_NAME)
        return names

    def ensure_ready(self) -> None:
        """GatewayError 503 unless the gateway serves its tools (discovery done, no tool name clash)."""
        if self.clashes:
            raise GatewayError(503, f"{clash_text(self.clashes)}, so the env serves none of its servers' tools.",
                               hint=CLASH_FIX)
        if not self.discovered:
            raise GatewayError(503, "Tool discovery has not completed. Internal MCP servers may be unavailable.")

    # --- tools ---------------------------------------------------------------------------------------------

    def list_tools(self, role: str) -> list[dict]:
        """The tools/list entries ``role`` may see (get_time included while the clock is armed)."""
        entries = list(self._tool_entries.values())
        if self.clock.armed and GET_TIME_TOOL_NAME not in self._tool_entries:
            entries.append(GET_TIME_TOOL)
        return self.access.filter_tools(role, entries)

    def _guard(self) -> Any:
        if self.mode == "consistent" and self._call_lock is not None:
            return self._call_lock
        return contextlib.nullcontext()

    async def call(self, tool: str, arguments: dict | None, *, role: str = DEFAULT_ROLE, session: str | None = None,
                   source: str | None = None, raise_failures: bool = False) -> dict:
        """One agent tool call: RBAC-checked, proxied, recorded, triggers evaluated. Answers the MCP result
        (a child that fails or times out answers an isError result, or with ``raise_failures`` a GatewayError
        500/504 as /step does). Raises GatewayError (403 disabled, 404 unknown, 503 not ready) before anything
        is proxied. (:meth:`call_direct` is the same call without a task, for the HTTP hot path.)"""
        self.ensure_ready()
        arguments = arguments or {}
        try:
            self.access.check_call(role, tool)
        except RbacError as e:
            reason = str(e.message if hasattr(e, "message") else e)
            # Denials are part of what happened: the trajectory (and the TUI) show who was refused what.
            denied = {"event_type": "tool_call_denied", "tool_call": {"function_name": tool, "arguments": arguments},
                      "role": role, "error": reason, **({"source": source} if source else {})}
            self.log_event(denied)
            raise GatewayError(e.status, reason) from None
        route = self._routes.get(tool)
        is_clock_tool = route is None and tool == GET_TIME_TOOL_NAME and self.clock.armed
        if route is None and not is_clock_tool:
            raise GatewayError(404, f"Unknown tool: {tool}")
        opened = self._open_call(tool, arguments, role, session, source)
        if is_clock_tool:
            result = self._get_time(arguments)
            server = None
        else:
            assert route is not None  # not the clock tool, so a route was found
            child, child_tool = route
            meta = self._child_meta(role, session)
            try:
                async with self._guard(), asyncio.timeout(self.tool_timeout):
                    result = await child.call(child_tool, arguments, meta)
            except Exception as e:  # a dead or failing child is a tool error, not a hang
                return self._call_failed(opened, child, e, raise_failures)
            server = child.name
        self._close_call(opened, server, result)
        await self._after_call(opened, result)
        return result

    def call_direct(self, tool: str, arguments: dict, role: str, session: str, respond: Callable[[dict], Any]) -> bool:
        """:meth:`call` for the HTTP hot path, without a task or a future: the request goes out to the child at
        once and ``respond(result)`` is called from the child's answer. Only for the plain case (performance
        mode, no trigger registered, an allowed tool of a URL child with an idle connection); answers False,
        having done nothing, for anything else: the caller then takes :meth:`call`. The trajectory is the
        same; the tool_call event is recorded just after the request went out, so it is off the critical path."""
        if (self.mode != "performance" or self.clashes or not self.discovered or not self.engine.idle()
                or self.access.is_disabled(role, tool)):
            return False
        route = self._routes.get(tool)
        if route is None:
            return False
        child, child_tool = route
        lane = child.direct_lane(child_tool)
        if lane is None:
            return False
        lean, conn = lane
        meta = self._child_meta(role, session)
        generation = child.generation
        opened: list[_OpenCall] = []  # set just below, before any answer can come in (that takes a loop turn)
        loop = asyncio.get_running_loop()

        def on_outcome(outcome: Any) -> None:
            timer.cancel()
            if type(outcome) is dict and self.engine.idle():
                self._close_call(opened[0], child.name, outcome)
                respond(outcome)
                return
            # anything else (a failure, an input_required round, a trigger registered meanwhile) finishes as
            # call() finishes it
            self._keep(loop.create_task(self._finish_direct(opened[0], child, child_tool, arguments, meta,
                                                            generation, outcome, respond)))

        timer = loop.call_later(self.tool_timeout, conn.abort, TimeoutError())
        lean.send_direct(conn, child_tool, arguments, meta, child._on_lean_notification, on_outcome)
        opened.append(self._open_call(tool, arguments, role, session, None))
        return True

    async def _finish_direct(self, opened: _OpenCall, child: Child, child_tool: str, arguments: dict, meta: dict,
                             generation: int, outcome: Any, respond: Callable[[dict], Any]) -> None:
        try:
            if isinstance(outcome, TimeoutError):  # as call()'s timeout: no session reopen
                raise outcome
            async with asyncio.timeout(self.tool_timeout):
                result = await child.complete(child_tool, arguments, meta, generation, outcome)
        except Exception as e:
            respond(self._call_failed(opened, child, e, raise_failures=False))
            return
        self._close_call(opened, child.name, result)
        await self._after_call(opened, result)
        respond(result)

    def _open_call(self, tool: str, arguments: dict, role: str, session: str | None, source: str | None) -> _OpenCall:
        """Record the tool_call event of a call about to be (or just) proxied."""
        event: dict[str, Any] = {"event_type": "tool_call"}
        if source:
            event["source"] = source
        event.update(tool_call={"function_name": tool, "arguments": arguments}, role=role)
        if session:
            event["session"] = session
        causes = self.engine.caused_by(role)
        if causes:
            event["caused_by"] = causes
        return _OpenCall(tool, arguments, role, self.log_event(event), causes, {"source": source} if source else {})

    def _child_meta(self, role: str, session: str | None, *, tick: bool = True) -> dict:
        """The request _meta a proxied call carries to its child: the caller's role, session and virtual time
        (an agent's call moves a stepped clock one step here; a trigger's action, ``tick=False``, does not)."""
        meta = {ROLE_META_KEY: role}
        if session:
            meta[SESSION_META_KEY] = session
        if self.clock.armed:  # unarmed, both are no-ops (and reading the clock is not free)
            if tick:
                self.clock.tick_tool_call()
            stamp = self.clock.virtual_timestamp()
            if stamp is not None:
                meta[VIRTUAL_TIME_META_KEY] = stamp
        return meta

    def _call_failed(self, opened: _OpenCall, child: Child, e: Exception, raise_failures: bool) -> dict:
        """Record a proxied call that failed; answer its isError result (or raise the /step error)."""
        tool = opened.tool
        head = self.changes.head_or_none()
        self.log_event({"event_type": "tool_call_failed", **opened.extra, "tool_call_event_id": opened.call_id,
                        "error": f"{type(e).__name__}: {str(e)[:300]}", "changelog_id_before": head,
                        "changelog_id": head})
        timed_out = isinstance(e, TimeoutError)
        if raise_failures:
            if timed_out:
                raise GatewayError(504, f"Tool '{tool}' timed out after {self.tool_timeout:g}s") from None
            raise GatewayError(500, f"Tool execution failed ({type(e).__name__}): {str(e) or repr(e)}") from None
        if timed_out:
            return error_result(f"Tool '{tool}' timed out after {self.tool_timeout:g}s")
        return error_result(f"Tool '{tool}' failed: server '{child.name}' did not answer "
                             f"({type(e).__name__}: {str(e)[:300] or 'connection lost'}); the gateway "
                             f"reopens its session, so the call may be retried")

    def _close_call(self, opened: _OpenCall, server: str | None, result: dict) -> None:
        """Record a call's result: the rows it changed (an env's rows ride in _meta, and wire() drops an empty
        one), then its tool_call_result event."""
        if server is None or "_meta" not in result:
            changelog_before = changelog_id = self.changes.head_or_none()
        else:
            actor = {"event_type": "tool_call", "role": opened.role, "tool": opened.tool,
                     "tool_call_event_id": opened.call_id, **opened.extra}
            if opened.causes:
                actor["caused_by"] = opened.causes
            changelog_before, changelog_id = self._absorb_changes(server, result, actor)
        self.log_event({"event_type": "tool_call_result", **opened.extra, "tool_call_event_id": opened.call_id,
                        "tool_call_result": result, "changelog_id_before": changelog_before,
                        "changelog_id": changelog_id})

    async def _after_call(self, opened: _OpenCall, result: dict) -> None:
        try:
            await self.engine.on_tool_call(opened.tool, opened.arguments, result, opened.role)
        except Exception:  # fail-open, as the reference
            logger.exception("trigger evaluation failed (fail-open)")

    def _get_time(self, arguments: dict) -> dict:
        try:
            reading = self.clock.get_time_tool(arguments.get("time_zone"))
        except ClockError as e:
            return error_result(e.message if hasattr(e, "message") else str(e))
        return {"content": [{"type": "text", "text": json.dumps(reading)}], "structuredContent": reading,
                "isError": False}

    async def _internal_call(self, tool: str, arguments: dict, role: str) -> dict:
        """A trigger's tool action: straight to the child session (no RBAC, no trigger re-evaluation)."""
        route = self._routes.get(tool)
        if route is None:
            if tool == GET_TIME_TOOL_NAME and self.clock.armed:
                return self._get_time(arguments)
            return error_result(f"Unknown tool: {tool}")
        child, child_tool = route
        meta = self._child_meta(role, None, tick=False)
        try:
            async with self._guard():
                result = await child.call(child_tool, arguments, meta)
        except Exception as e:
            return error_result(f"Tool '{tool}' failed: {type(e).__name__}: {e}")
        self._absorb_changes(child.name, result, self._internal_actor(tool, role))
        return result

    def _internal_actor(self, tool: str, role: str) -> dict:
        """The actor of a trigger's tool action: the trigger whose firing runs it (the engine runs each firing in
        a task named after the trigger) and that firing's ``trigger_fired`` event."""
        actor: dict[str, Any] = {"event_type": "internal_tool_call", "role": role, "tool": tool,
                                 "tool_call_event_id": None, "source": "trigger_engine"}
        task = asyncio.current_task()
        trigger_id = task.get_name() if task is not None else None
        if trigger_id and trigger_id in self.engine.statuses():
            cause: dict[str, Any] = {"trigger_id": trigger_id}
            fired = self.trajectory.last_firing(trigger_id)
            if fired is not None:
                cause["event_id"] = fired
            actor["caused_by"] = [cause]
        return actor

    # --- trajectory ----------------------------------------------------------------------------------------

    def _absorb_changes(self, server: str, result: dict, actor: dict) -> tuple[int | None, int | None]:
        """Take the rows a child's tool call changed out of its ``result`` into the changelog, attributed to
        ``actor``; answers ``(changelog_id_before, changelog_id)`` for the call's trajectory event."""
        try:
            return self.changes.absorb(server, result, actor)
        except Exception:  # a bad row never fails the call
            logger.exception("changelog: absorbing the changes of %s on %s failed", actor.get("tool"), server)
            return self.changes.head_or_none(), self.changes.head_or_none()

    async def _log_event(self, event: dict) -> str:
        """:meth:`log_event` for callers that await (the trigger engine)."""
        return self.log_event(event)

    def log_event(self, event: dict) -> str:
        """Record ``event`` for /trajectory (its id answers) and queue it for ``on_event`` (see trajectory.py)."""
        return self.trajectory.log(event)

    def _keep(self, task: asyncio.Future) -> None:
        """Hold a task the gateway started and awaits nowhere until it ends (aclose waits for what is left)."""
        self._handoff_tasks.add(task)
        task.add_done_callback(self._handoff_tasks.discard)

    def trajectory_jsonl(self) -> str:
        return self.trajectory.jsonl()

    # --- REST bodies -----------------------------------------------------------------------------------------

    def state(self) -> dict:
        servers = [{"name": name, "tools": [{"name": t["name"], "description": t.get("description") or "",
                                             "parameters": t.get("inputSchema") or {"type": "object",
                                                                                    "properties": {}}}
                                            for t in tools]}
                   for name, tools in self._server_tools]
        return {"mcp_servers": servers, "changelog_id": self.changes.head_or_none(),
                "roles": self.access.roles_state(), "tool_name_clashes": self.clashes}

    def step_list(self, role: str) -> dict:
        return {"tools": [{"name": t["name"], "description": t.get("description") or "",
                           "parameters": t.get("inputSchema") or {"type": "object", "properties": {}}}
                          for t in self.list_tools(role)]}

    async def step(self, body: Any, role: str) -> dict:
        self.ensure_ready()
        if not isinstance(body, dict):
            raise GatewayError(400, "Invalid JSON body")
        action = body.get("action")
        if action == "list_tools":
            return self.step_list(role)
        if action != "call_tool":
            raise GatewayError(400, f"Unknown action: {action}. Expected 'list_tools' or 'call_tool'.")
        tool = body.get("tool_name")
        if not tool or not isinstance(tool, str):
            raise GatewayError(400, "Missing or invalid 'tool_name' field")
        arguments = body.get("arguments", {})
        if not isinstance(arguments, dict):
            raise GatewayError(400, "'arguments' must be a JSON object")
        result = await self.call(tool, arguments, role=role, source="step_api", raise_failures=True)
        return {**result, "changelog_id": self.changes.head_or_none()}

    def arm_clock(self, body: Any) -> dict:
        if GET_TIME_TOOL_NAME in self._routes:
            raise GatewayError(409, f"'{GET_TIME_TOOL_NAME}' is already registered by a backing server", ok=False)
        answer = self.clock.arm_from_body(body)
        self._state_changed("clock")
        return answer

    def clear_clock(self) -> dict:
        answer = self.clock.clear()
        self._state_changed("clock")
        return answer

    async def advance_clock(self, seconds: float | str) -> dict:
        """Move a frozen or stepped clock forward by ``seconds`` (or an ISO-8601 duration like ``"PT5M"``), then
        let the time triggers that came due fire. Raises ClockError (an unarmed or wall clock, a bad amount).
        Answers the clock's state."""
        self.clock.advance(seconds)
        self._state_changed("clock")
        await self.engine.tick()
        # the fires that came due finish before it answers (an in-hub env's sync tools run on a thread of their
        # own: a fire's tool call takes more than the loop's turn); one that outlasts the bound keeps running
        with contextlib.suppress(TimeoutError):
            await self.engine.drain(ADVANCE_SETTLE_S)
        return self.clock.state()

    async def child_card(self, child: Child) -> dict | None:
        from .card import rewrite_child_card

        try:
            if child.env is not None:
                card = child.env.card().to_wire()
            else:
                import httpx2

                async with httpx2.AsyncClient(timeout=5.0) as http:
                    r = await http.get(f"{child.base}/.well-known/agent-env.json")
                if r.status_code != 200:
                    return None
                card = r.json()
                if not isinstance(card, dict):
                    return None
        except Exception as e:  # omitted, as the reference does
            logger.warning("env card: child %s: %r; omitting", child.name, e)
            return None
        return rewrite_child_card(f"mcp-{child.name}", card)

    async def card(self) -> dict:
        from agentenv_local.env.card import PROTOCOL_VERSION, RPC_PATH

        from .card import gateway_extensions

        children = await asyncio.gather(*(self.child_card(c) for c in self.children))
        for child, child_card in zip(self.children, children, strict=True):
            self.changes.note_card(child.name, child_card)
        return {"name": self.name, "protocolVersion": PROTOCOL_VERSION, "url": RPC_PATH,
                "preferredTransport": "JSONRPC", "additionalInterfaces": [{"url": "/mcp", "transport": "mcp"}],
                "capabilities": {"extensions": gateway_extensions(changes=self.changes.keeps)},
                "children_environments": [c for c in children if c is not None]}

    # --- MCP -----------------------------------------------------------------------------------------------

    def session_key(self, ctx: Any, headers: Any) -> str:
        """The key that tells one MCP session's calls apart in the trajectory (its Mcp-Session-Id, else the
        stack's session object, else a fresh one per request)."""
        sid = headers.get("mcp-session-id") if headers is not None else None
        if sid:
            key = self._session_ids.get(sid)
            if key is None:
                if len(self._session_ids) >= 10_000:  # forget the oldest sessions' keys
                    for old in list(self._session_ids)[:1000]:
                        del self._session_ids[old]
                key = self._session_ids[sid] = secrets.token_hex(8)
            return key
        session = getattr(ctx, "session", None)
        if session is not None:
            try:
                key = self._sessions.get(session)
                if key is None:
                    key = self._sessions[session] = secrets.token_hex(8)
                return key
            except TypeError:
                pass
        return secrets.token_hex(8)

    async def mcp_call_result(self, headers: Any, meta: Any, session: str | None, name: str,
                              arguments: Any) -> dict:
        """An MCP tools/call's result: refusals (RBAC, unknown tool, not ready) are isError results."""
        return await self.mcp_results.call_result(headers, meta, session, name, arguments)

    def mcp_list_result(self, headers: Any, meta: Any) -> dict:
        """An MCP tools/list's result for the caller ``headers``/``meta`` name."""
        return self.mcp_results.list_result(headers, meta)

    async def mcp_fast(self, message: dict, headers: Any, version: str | None,
                       session: HandshakeSession | None = None) -> tuple[int, dict]:
        """Answer a 2026-revision ``tools/call`` or ``tools/list`` that fastpath.py has checked the way the mcp
        server stack checks it, with the (HTTP status, JSON-RPC reply) the stack would send, without its
        per-request machinery; or, with ``session``, one of a handshake-era session's (see sessions.py).
        ``headers``: the request's, as far as who is calling goes."""
        if session is not None:
            return await self._mcp_session_fast(message, headers, session)
        assert version is not None  # a modern request always names its version
        method = message["method"]
        params = message["params"]
        try:
            if method == "tools/call":
                # the stateless revision has no session: one random key per request (as _session_key answers it;
                # it only tells calls apart, so a fast non-cryptographic source does)
                result = await self.mcp_results.call_result(headers, params.get("_meta"), f"{getrandbits(64):016x}",
                                                     params["name"], params.get("arguments"))
            else:
                result = self.mcp_results.list_result(headers, params.get("_meta"))
        except Exception as e:  # mapped to the wire exactly as the stack maps it
            return self.mcp_results.error(message, e)
        return self.mcp_results.reply(message, version, result)

    async def _mcp_session_fast(self, message: dict, headers: Any, session: HandshakeSession) -> tuple[int, dict]:
        """:meth:`mcp_fast` for a handshake-era session: what the stack's session transport and handler do."""
        params = message["params"]
        session.begin()
        try:
            if message["method"] == "tools/call":
                result = await self.mcp_results.call_result(headers, params["_meta"], self._session_key_of(session),
                                                            params["name"], params["arguments"])
            else:
                result = self.mcp_results.list_result(headers, params["_meta"])
        except Exception as e:  # mapped to the wire as the stack's dispatcher maps it
            return legacy_error(message, e)
        finally:
            session.end()
        return legacy_reply(self, message, session.version, result)

    def _session_key_of(self, session: HandshakeSession) -> str:
        """The trajectory's key of a handshake-era session: the one the stack's path gives it (session_key)."""
        return self.session_key(None, {"mcp-session-id": session.session_id})

    def mcp_call_direct(self, message: dict, headers: Any, version: str | None,
                        respond: Callable[[int, dict], Any], session: HandshakeSession | None = None) -> bool:
        """:meth:`mcp_fast` for a tools/call that :meth:`call_direct` can take: ``respond(status, reply)`` is
        called once the child answered. False, having done nothing, when it can't (then mcp_fast answers)."""
        params = message["params"]
        try:
            role = self.access.resolve(headers, params.get("_meta") or {})
        except RbacError:
            return False
        if session is None:
            assert version is not None  # a modern request always names its version

            def answer(result: dict) -> None:
                respond(*self.mcp_results.reply(message, version, {**result, "resultType": "complete"}))

            return self.call_direct(params["name"], params.get("arguments") or {}, role,
                                    f"{getrandbits(64):016x}", answer)

        def session_answer(result: dict) -> None:
            session.end()
            respond(*legacy_reply(self, message, session.version, {**result, "resultType": "complete"}))

        session.begin()
        taken = self.call_direct(params["name"], params.get("arguments") or {}, role, self._session_key_of(session),
                                 session_answer)
        if not taken:
            session.end()
        return taken

    def mcp_server(self) -> Any:
        if self._mcp_server is not None:
            return self._mcp_server
        from agentenv_local import __version__
        from agentenv_local.env._notify import ToolsChangedNotifier

        gateway = self
        notifier = self._notifier = ToolsChangedNotifier()

        def _headers(ctx: Any) -> Any:
            request = getattr(ctx, "request", None)
            return getattr(request, "headers", None) if request is not None else None

        async def on_list_tools(ctx: Any, params: Any) -> dict:
            notifier.remember(ctx)
            gateway.handshake_sessions.remember(ctx)
            meta = getattr(params, "meta", None) if params is not None else None
            return gateway.mcp_list_result(_headers(ctx), meta)

        async def on_call_tool(ctx: Any, params: Any) -> dict:
            notifier.remember(ctx)
            gateway.handshake_sessions.remember(ctx)
            headers = _headers(ctx)
            return await gateway.mcp_call_result(headers, params.meta, gateway.session_key(ctx, headers),
                                                 params.name, params.arguments)

        @contextlib.asynccontextmanager
        async def lifespan(_server: Any):
            await gateway.start()
            yield {}

        server_class = notifier.server_class()
        self._mcp_server = server_class(self.name, version=__version__, lifespan=lifespan,
                                        on_list_tools=on_list_tools, on_call_tool=on_call_tool,
                                        on_subscriptions_listen=notifier.listen_handler())
        notifier.install(self._mcp_server)

        async def remember_sessions(ctx: Any, call_next: Any) -> Any:
            result = await call_next(ctx)
            if ctx.method == "initialize":  # once it has answered, the fast path may answer the session
                gateway.handshake_sessions.remember(ctx)
            return result

        self._mcp_server.middleware.append(remember_sessions)  # mcp's way to observe initialize
        return self._mcp_server

    # --- HTTP ----------------------------------------------------------------------------------------------

    def svc_app(self, child: Child) -> Any:
        """The ASGI app of an in-process child's env (built once), for the /svc routes."""
        app = self._svc_apps.get(child.name)
        if app is None:
            assert child.env is not None  # an in-process child
            app = self._svc_apps[child.name] = child.env.app()
        return app

    def app(self) -> Any:
        from .routes import build_app

        return build_app(self)

    def serve(self, host: str = "127.0.0.1", port: int = 18765, *, log_level: str = "warning") -> None:
        import uvicorn

        from agentenv_local.env.serve import bind_socket

        from .fastpath import protocol_class

        sock = bind_socket(host, port)  # TCP_NODELAY on accepted connections (see bind_socket)
        # the fast path's protocol: 2026-revision tools/call and tools/list skip h11 and the ASGI cycle too
        config = uvicorn.Config(self.app(), log_level=log_level, lifespan="on", access_log=False,
                                timeout_graceful_shutdown=3, http=protocol_class(self))
        uvicorn.Server(config).run(sockets=[sock])
