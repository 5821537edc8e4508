"""peer-agents/v1's MCP tools: the ``peer_agents`` MCP server an agent serves at ``/ext/peer-agents/mcp``.

Once peers are set (``POST /ext/peer-agents``), the agent's model (or plan) reaches them through six tools:

    peer_list()                                         {"peers": [{"name", "description", "url"}]}
    peer_get_card(name)                                 the peer's agent card (given, else fetched)
    peer_send_message(name, message, timeout_seconds=50, context_id?)
                                                        {"task_id", "context_id", "state", "text", "timed_out"}
    peer_start_task(name, message, context_id?)         {"task_id", "context_id", "state"}
    peer_get_task(name, task_id)                        {"task_id", "context_id", "state", "text"}
    peer_cancel_task(name, task_id)                     {"task_id", "state"}

The tools read the peer table when called, so a later ``set`` takes effect at once. A problem (an unknown peer, a
peer that does not answer or answers nonsense) is a tool error (``isError``) that says what went wrong; every
call is bounded in time. Served over streamable HTTP (mcp 2.x low-level ``Server``, stateless, JSON responses).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from .client import A2AClient, A2AError, A2ATask

PEER_TOOLS_PATH = "/ext/peer-agents/mcp"
PEER_TOOLS_SERVER = "peer_agents"
MAX_SEND_WAIT_S = 50.0
PEER_HTTP_TIMEOUT_S = 10.0  # one HTTP request to a peer
# A backstop over a whole tool call: the longest wait plus a few peer requests; nothing may hang the caller.
CALL_LIMIT_S = MAX_SEND_WAIT_S + 3 * PEER_HTTP_TIMEOUT_S
POLL_INTERVAL_S = 0.25

PeerTable = Callable[[], list[dict[str, Any]]]


class PeerToolError(Exception):
    """A tool call that cannot succeed; the message is what the caller (often a model) reads."""


# --- tool definitions -------------------------------------------------------------------------------------

_NAME_ARG = {"type": "string", "description": "The peer's name, as peer_list shows it."}
_MESSAGE_ARG = {"type": "string", "description": "The text to send to the peer, as a user message."}
_CONTEXT_ARG = {"type": "string", "description": "Optional: the context_id of an earlier exchange with this "
                                                 "peer, to continue that conversation."}
_TASK_ARG = {"type": "string", "description": "The task_id a previous peer tool call answered."}


def _tool(name: str, description: str, properties: dict[str, Any], required: list[str], *,
          read_only: bool) -> dict[str, Any]:
    return {"name": name, "description": description,
            "inputSchema": {"type": "object", "properties": properties, "required": required,
                            "additionalProperties": False},
            "annotations": {"readOnlyHint": read_only}}


TOOLS = [
    _tool("peer_list", "List the peer agents you can delegate to: each peer's name, description and URL.",
          {}, [], read_only=True),
    _tool("peer_get_card", "Get a peer agent's A2A agent card (its skills, input and output modes).",
          {"name": _NAME_ARG}, ["name"], read_only=True),
    _tool("peer_send_message",
          "Send a message to a peer agent and wait for its reply (at most timeout_seconds, capped at 50). "
          "Answers the task's task_id, context_id, state and the reply text. If the peer is still working when "
          "the time is up, timed_out is true: check later with peer_get_task.",
          {"name": _NAME_ARG, "message": _MESSAGE_ARG,
           "timeout_seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_SEND_WAIT_S,
                               "default": MAX_SEND_WAIT_S,
                               "description": "How long to wait for the reply, in seconds (at most 50)."},
           "context_id": _CONTEXT_ARG},
          ["name", "message"], read_only=False),
    _tool("peer_start_task",
          "Send a message to a peer agent without waiting for its reply; answers the task_id to follow with "
          "peer_get_task (or stop with peer_cancel_task), its context_id and its state.",
          {"name": _NAME_ARG, "message": _MESSAGE_ARG, "context_id": _CONTEXT_ARG}, ["name", "message"],
          read_only=False),
    _tool("peer_get_task", "Get the current state of a task on a peer agent and its reply text so far.",
          {"name": _NAME_ARG, "task_id": _TASK_ARG}, ["name", "task_id"], read_only=True),
    _tool("peer_cancel_task", "Cancel a task still running on a peer agent; answers its new state.",
          {"name": _NAME_ARG, "task_id": _TASK_ARG}, ["name", "task_id"], read_only=False),
]
_SCHEMAS = {t["name"]: t["inputSchema"] for t in TOOLS}
PEER_TOOL_NAMES = tuple(_SCHEMAS)


# --- arguments --------------------------------------------------------------------------------------------

def _check_args(tool: str, args: dict[str, Any]) -> None:
    schema = _SCHEMAS[tool]
    unknown = set(args) - set(schema["properties"])
    if unknown:
        raise PeerToolError(f"{tool}: unknown argument(s) {', '.join(sorted(unknown))} (accepted: "
                            f"{', '.join(schema['properties']) or 'none'})")
    for key in schema["required"]:
        if key not in args:
            raise PeerToolError(f"{tool}: the argument {key!r} is required")
    for key, value in args.items():
        if schema["properties"][key]["type"] == "string" and (not isinstance(value, str) or not value.strip()):
            raise PeerToolError(f"{tool}: {key} must be a non-empty string")


def _wait_seconds(args: dict[str, Any]) -> float:
    value = args.get("timeout_seconds", MAX_SEND_WAIT_S)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise PeerToolError("peer_send_message: timeout_seconds must be a positive number")
    return min(float(value), MAX_SEND_WAIT_S)


# --- talking to peers -------------------------------------------------------------------------------------

class PeerTools:
    """The six tools over the peer table ``peers()`` returns (read at each call)."""

    def __init__(self, peers: PeerTable):
        self._peers = peers

    def _peer(self, name: str) -> dict[str, Any]:
        table = self._peers()
        for peer in table:
            if peer["name"] == name:
                return peer
        if not table:
            raise PeerToolError(f"no peer named {name!r}: no peers are set")
        raise PeerToolError(f"no peer named {name!r}; known peers: {', '.join(p['name'] for p in table)}")

    @contextlib.asynccontextmanager
    async def _talking_to(self, peer: dict[str, Any]) -> AsyncIterator[A2AClient]:
        """An A2A client for ``peer``; any failure to talk to it becomes a tool error naming the peer."""
        try:
            async with A2AClient(peer["url"], timeout=PEER_HTTP_TIMEOUT_S) as client:
                yield client
        except PeerToolError:
            raise
        except A2AError as e:
            raise PeerToolError(f"talking to peer {peer['name']!r} at {peer['url']} failed: {e}") from None
        except Exception as e:  # e.g. a malformed peer URL: still the caller's answer, not a crash
            raise PeerToolError(f"peer {peer['name']!r} at {peer['url']} cannot be reached: "
                                f"{type(e).__name__}: {e}") from None

    async def call(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        """Run ``tool``; its structured result, or PeerToolError."""
        if tool not in _SCHEMAS:
            raise PeerToolError(f"unknown tool {tool!r} (tools: {', '.join(_SCHEMAS)})")
        _check_args(tool, args)
        if tool == "peer_list":
            return self.peer_list()
        peer = self._peer(args["name"])
        try:
            async with asyncio.timeout(CALL_LIMIT_S):
                return await getattr(self, tool)(peer, args)
        except TimeoutError:
            raise PeerToolError(f"peer {peer['name']!r} at {peer['url']} did not answer within "
                                f"{CALL_LIMIT_S:.0f} s") from None

    def peer_list(self) -> dict[str, Any]:
        return {"peers": [{"name": p["name"], "description": p.get("description") or "", "url": p["url"]}
                          for p in self._peers()]}

    async def peer_get_card(self, peer: dict[str, Any], _args: dict[str, Any]) -> dict[str, Any]:
        if peer.get("card"):
            return dict(peer["card"])
        async with self._talking_to(peer) as client:
            return await client.card()  # tries agent-card.json, then agent.json

    async def peer_send_message(self, peer: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        deadline = time.monotonic() + _wait_seconds(args)
        async with self._talking_to(peer) as client:
            task = await client.send(args["message"], context_id=args.get("context_id"), blocking=False)
            task = await client.wait(task, timeout=max(0.0, deadline - time.monotonic()),
                                     poll_interval=POLL_INTERVAL_S)
        answer = {**_task_summary(task), "timed_out": task.timed_out}
        if task.timed_out:
            answer["hint"] = (f"the peer is still working ({task.state}); call peer_get_task with task_id "
                              f"{task.id!r} later, or peer_cancel_task to stop it")
        return answer

    async def peer_start_task(self, peer: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        async with self._talking_to(peer) as client:
            task = await client.send(args["message"], context_id=args.get("context_id"), blocking=False)
        return {"task_id": task.id, "context_id": task.context_id, "state": task.state}

    async def peer_get_task(self, peer: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        async with self._talking_to(peer) as client:
            return _task_summary(await client.get_task(args["task_id"]))

    async def peer_cancel_task(self, peer: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        async with self._talking_to(peer) as client:
            task = await client.cancel(args["task_id"])
        return {"task_id": task.id, "state": task.state}


def _task_summary(task: A2ATask) -> dict[str, Any]:
    return {"task_id": task.id, "context_id": task.context_id, "state": task.state, "text": task.text}


# --- the MCP server and its HTTP endpoint ---------------------------------------------------------------

def _tool_result(structured: dict[str, Any]) -> dict[str, Any]:
    text = json.dumps(structured, ensure_ascii=False, default=str)
    return {"content": [{"type": "text", "text": text}], "structuredContent": structured, "isError": False,
            "resultType": "complete"}


def _tool_error(message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True, "resultType": "complete"}


def build_server(tools: PeerTools) -> Any:
    from mcp.server.lowlevel import Server

    from agentenv_local import __version__

    # resultType, ttlMs and cacheScope are what the 2026 revision requires; mcp drops them for older ones.
    async def on_list_tools(_ctx: Any, _params: Any) -> dict:
        return {"tools": [dict(t) for t in TOOLS], "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}

    async def on_call_tool(_ctx: Any, params: Any) -> dict:
        try:
            return _tool_result(await tools.call(params.name, dict(params.arguments or {})))
        except PeerToolError as e:
            return _tool_error(str(e))

    # mcp types these handlers' results as its models; its Server sends a plain dict as is, which keeps the
    # fields the models would drop (resultType, ttlMs, cacheScope)
    return Server(PEER_TOOLS_SERVER, version=__version__,
                  instructions="Delegate work to peer A2A agents: list them, message them, follow their tasks.",
                  get_tool_input_schema=_SCHEMAS.get,
                  on_list_tools=on_list_tools,  # type: ignore[arg-type]  # returns a plain dict (see above)
                  on_call_tool=on_call_tool)  # type: ignore[arg-type]  # returns a plain dict (see above)


class PeerToolsEndpoint:
    """The ``peer_agents`` MCP server over streamable HTTP, as an ASGI app to mount at PEER_TOOLS_PATH; run
    ``running()`` in the app's lifespan.

    The mcp server stack (about 0.3 s of imports) is built on the first request, not with the app: most agents
    never get peers, and an agent's start time counts."""

    def __init__(self, peers: PeerTable):
        self._peers = peers
        self._app: Any = None
        self._ready: asyncio.Future | None = None
        self._stop: asyncio.Event | None = None
        self._runner: asyncio.Task | None = None

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        app = self._app or await self._start()
        await app(scope, receive, send)

    async def _start(self) -> Any:
        if self._ready is None:  # the first request starts the session manager; later ones wait for it
            loop = asyncio.get_running_loop()
            self._ready, self._stop = loop.create_future(), asyncio.Event()
            self._runner = loop.create_task(self._serve(), name="peer-agents-mcp")
        return await asyncio.shield(self._ready)

    async def _serve(self) -> None:
        """Hold the session manager open (its task group must be entered and left in one task) until stopped."""
        assert self._ready is not None and self._stop is not None
        try:
            from mcp.server.streamable_http_manager import (
                StreamableHTTPASGIApp,
                StreamableHTTPSessionManager,
            )
            from mcp.server.transport_security import TransportSecuritySettings

            # Stateless: each tool call stands alone (the state lives on the peers); DNS-rebinding protection
            # off, as on the env servers, since the agent's tools reach it by whatever address it was given.
            manager = StreamableHTTPSessionManager(
                app=build_server(PeerTools(self._peers)), json_response=True, stateless=True,
                security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
                session_idle_timeout=None)
            async with manager.run():
                self._app = StreamableHTTPASGIApp(manager)
                self._ready.set_result(self._app)
                await self._stop.wait()
        except BaseException as e:
            if not self._ready.done():
                self._ready.set_exception(e if isinstance(e, Exception) else RuntimeError(repr(e)))
            if not isinstance(e, (Exception, asyncio.CancelledError)):
                raise

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if self._runner is not None and self._stop is not None:  # _start sets both at once
                self._stop.set()
                with contextlib.suppress(BaseException):
                    await self._runner
