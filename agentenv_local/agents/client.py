"""An async A2A client (httpx2): the card, send + poll, cancel, and the AgentEnv extension calls.

    async with A2AClient("http://127.0.0.1:8000") as agent:
        card = await agent.card()
        task = await agent.prompt("what is 6*7?", context_id="c1", timeout=60)
        print(task.state, task.text, task.structured_output)

It speaks A2A 0.3 (``message/send``, ``tasks/get``, ``tasks/cancel``: what the reference's agents speak) unless
the card offers only 1.0 (``supportedInterfaces`` with protocolVersion 1.x and no 0.x ``protocolVersion``), or
``protocol="1.0"`` is passed. An answer that breaks the protocol raises ``A2AProtocolError`` naming the field;
a JSON-RPC error answer raises ``A2ARpcError``; an extension's HTTP error raises ``A2AExtensionError``.

``stream()`` uses ``message/stream`` (``SendStreamingMessage``) and yields each SSE event's ``result``:

    async with contextlib.aclosing(agent.stream("hi")) as events:   # aclosing: stop early cleanly
        async for result in events:
            print(result)   # the Task, then status/artifact updates; the last is the final status update
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from agentenv_local import jsonrpc
from agentenv_local.errors import AgentenvError, describe

from . import wire
from .types import STRUCTURED_OUTPUT_KEY, DataPart, TextPart, data_of, text_of


class A2AError(AgentenvError):
    """Talking to an A2A agent failed."""


class A2AProtocolError(A2AError):
    """The agent answered something the protocol does not allow; ``field`` names what was wrong."""

    def __init__(self, field: str, message: str, *, url: str = ""):
        super().__init__(f"the agent at {url or '?'} broke the A2A protocol: {field}: {message}",
                         hint="check that the URL points at an A2A agent and which protocol version it speaks")
        self.field = field


class A2ARpcError(A2AError):
    """The agent answered a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None):
        super().__init__(f"the agent refused the request ({code}): {message}")
        self.code = code
        self.rpc_message = message
        self.data = data


class A2AExtensionError(A2AError):
    """An extension endpoint answered an HTTP error; ``status`` and ``detail`` are what it said."""

    def __init__(self, status: int, detail: str, path: str):
        super().__init__(f"{path} answered {status}: {detail}")
        self.status = status
        self.detail = detail


class A2ATask:
    """A task as the agent last described it (dialect-neutral; states use the 0.3 names)."""

    def __init__(self, raw: dict[str, Any], *, url: str = "", timed_out: bool = False):
        self.raw = raw
        self.timed_out = timed_out
        where = "result"
        if not isinstance(raw, dict):
            raise A2AProtocolError(where, "a task must be an object", url=url)
        try:
            if not isinstance(raw.get("id"), str) or not raw["id"]:
                raise wire.WireError(f"{where}.id", "is missing" if raw.get("id") is None else "must be a string")
            self.id: str = raw["id"]
            context = raw.get("contextId")
            if context is not None and not isinstance(context, str):
                raise wire.WireError(f"{where}.contextId", "must be a string")
            self.context_id: str | None = context
            status = raw.get("status")
            if not isinstance(status, dict):
                raise wire.WireError(f"{where}.status", "is missing" if status is None else "must be an object")
            self.state: str = wire.state_from_wire(status.get("state"), f"{where}.status.state")
            message = status.get("message")
            self.message = (wire.message_from_wire(message, f"{where}.status.message", None)
                            if message is not None else None)
            artifacts = raw.get("artifacts") or []
            if not isinstance(artifacts, list):
                raise wire.WireError(f"{where}.artifacts", "must be a list")
            self.artifacts: list[list] = []
            for i, artifact in enumerate(artifacts):
                if not isinstance(artifact, dict):
                    raise wire.WireError(f"{where}.artifacts[{i}]", "must be an object")
                self.artifacts.append(wire.parts_from_wire(artifact.get("parts"), f"{where}.artifacts[{i}].parts"))
            history = raw.get("history") or []
            if not isinstance(history, list):
                raise wire.WireError(f"{where}.history", "must be a list")
            self.history = [wire.message_from_wire(m, f"{where}.history[{i}]", None) for i, m in enumerate(history)]
        except wire.WireError as e:
            raise A2AProtocolError(e.path, e.reason, url=url) from None

    @property
    def terminal(self) -> bool:
        return self.state in wire.TERMINAL_STATES

    @property
    def parts(self) -> list:
        """The answer's parts: the final status message's, else the artifacts'."""
        if self.message is not None:
            return list(self.message.parts)
        return [p for parts in self.artifacts for p in parts]

    @property
    def text(self) -> str:
        return text_of(self.parts)

    @property
    def data(self) -> dict[str, Any]:
        return data_of(self.parts)

    @property
    def structured_output(self) -> Any:
        for p in self.parts:
            if isinstance(p, DataPart) and STRUCTURED_OUTPUT_KEY in p.data:
                return p.data[STRUCTURED_OUTPUT_KEY]
        return None

    @property
    def error(self) -> dict[str, Any] | None:
        """``{"error_type", "error_code", "error_message"}`` of a failed task, when the agent said."""
        data = self.data
        if "error_type" in data or "error_code" in data:
            return {k: data.get(k) for k in ("error_type", "error_code", "error_message")}
        return None

    def __repr__(self) -> str:
        return f"A2ATask(id={self.id!r}, state={self.state!r}, text={self.text[:60]!r})"


def _to_parts(content: Any) -> list:
    if isinstance(content, str):
        return [TextPart(text=content)]
    if isinstance(content, dict):
        return [DataPart(data=content)]
    parts: list[Any] = []
    for item in content:
        if isinstance(item, str):
            parts.append(TextPart(text=item))
        elif isinstance(item, dict) and "kind" not in item:
            parts.append(DataPart(data=item))
        elif isinstance(item, dict):
            parts.append(wire.part_from_wire(item, "parts", "0.3"))
        else:
            parts.append(item)
    return parts


MAX_EVENT_CHARS = 16 * 1024 * 1024
# An idle kept-alive connection is dropped by our side well before the server's keep-alive timeout
# (uvicorn's default, which our agents and the reference's use, is 5 s, as was httpx's own expiry). With the
# two equal, a request sent on a connection idle that long could meet the server closing it: the request
# is lost with a connection reset (a ReadError), which under load failed prompts between conversation turns.
KEEPALIVE_EXPIRY_S = 1.0


async def _sse_data(answer: Any, url: str) -> AsyncGenerator[str, None]:
    """The ``data`` of each server-sent event (multi-line data joined by newlines); comments, ``event:``, ``id:``
    and ``retry:`` fields are skipped."""
    data: list[str] = []
    size = 0
    async for line in answer.aiter_lines():
        line = line.rstrip("\r")
        if not line:
            if data:
                yield "\n".join(data)
            data, size = [], 0
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if field == "data":
            value = value.removeprefix(" ")
            size += len(value)
            if size > MAX_EVENT_CHARS:
                raise A2AProtocolError("event", f"is larger than {MAX_EVENT_CHARS} characters", url=url)
            data.append(value)
    if data:
        yield "\n".join(data)


def _terminal(status: Any) -> bool:
    state = status.get("state") if isinstance(status, dict) else None
    try:
        return wire.state_from_wire(state, "status.state") in wire.TERMINAL_STATES
    except wire.WireError:
        return False


def _is_final(result: dict[str, Any]) -> bool:
    """Whether a streaming result ends the stream: a final status update (0.3 ``final``, 1.0 a terminal state), a
    terminal Task, or a message."""
    kind = result.get("kind")
    if kind == "status-update":
        return result.get("final") is True
    if kind == "task":
        return _terminal(result.get("status"))
    if kind == "message" or (kind is None and isinstance(result.get("message"), dict)):
        return True
    for key in ("statusUpdate", "task"):
        if kind is None and isinstance(result.get(key), dict):
            return result[key].get("final") is True or _terminal(result[key].get("status"))
    return False


class A2AClient:
    def __init__(self, base_url: str, *, protocol: str | None = None, timeout: float = 30.0,
                 headers: dict[str, str] | None = None, http: Any = None):
        """``base_url``: the agent's base URL (its card is at ``/.well-known/agent-card.json``); ``protocol``:
        "0.3" or "1.0" to skip asking the card."""
        if protocol not in (None, "0.3", "1.0"):
            raise ValueError("protocol must be '0.3' or '1.0'")
        self.base_url = base_url.rstrip("/")
        self.protocol: str | None = protocol
        self.rpc_url: str | None = None
        self._card: dict[str, Any] | None = None
        self._timeout = timeout
        self._headers = dict(headers or {})
        self._http = http
        self._own_http = http is None

    async def __aenter__(self) -> A2AClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._own_http and self._http is not None:
            await self._http.aclose()
            self._http = None

    def _client(self) -> Any:
        if self._http is None:
            import httpx2

            from agentenv_local.http_clients import async_client

            limits = httpx2.Limits(max_connections=100, max_keepalive_connections=20,
                                   keepalive_expiry=KEEPALIVE_EXPIRY_S)
            # an agent this hub serves is called in-process (inproc.py), any other over the network
            self._http = async_client(timeout=self._timeout, headers=self._headers, limits=limits)
        return self._http

    @staticmethod
    async def _send_http(request: Any, url: str) -> Any:
        """Await an HTTP request; a transport failure becomes an A2AError a person can act on."""
        import httpx2

        try:
            return await request
        except httpx2.TimeoutException as exc:
            raise A2AError(f"{url} did not answer in time ({type(exc).__name__})",
                           hint="is the agent overloaded or stuck? raise the timeout") from None
        except httpx2.TransportError as exc:
            raise A2AError(f"cannot reach {url}: {describe(exc)}",
                           hint="is the agent running at that address?") from None

    # --- card -------------------------------------------------------------------------------------------

    async def card(self, *, refresh: bool = False) -> dict[str, Any]:
        if self._card is not None and not refresh:
            return self._card
        http = self._client()
        answer = None
        for path in ("/.well-known/agent-card.json", "/.well-known/agent.json"):
            answer = await self._send_http(http.get(self.base_url + path), self.base_url + path)
            if answer.status_code != 404:
                break
        if answer is None or answer.status_code >= 400:
            raise A2AError(f"{self.base_url} has no agent card (HTTP {answer.status_code if answer else '?'})",
                           hint="is the URL the agent's base URL, and is it an A2A agent?")
        try:
            card = answer.json()
        except ValueError:
            raise A2AProtocolError("card", "is not JSON", url=self.base_url) from None
        if not isinstance(card, dict):
            raise A2AProtocolError("card", "must be an object", url=self.base_url)
        if not isinstance(card.get("name"), str):
            raise A2AProtocolError("card.name", "is missing", url=self.base_url)
        self._card = card
        self._pick_protocol(card)
        return card

    def _pick_protocol(self, card: dict[str, Any]) -> None:
        interfaces = [i for i in card.get("supportedInterfaces") or [] if isinstance(i, dict)]
        version = str(card.get("protocolVersion") or "")
        if self.protocol is None:
            offers_10 = any(str(i.get("protocolVersion", "")).startswith("1.") for i in interfaces)
            self.protocol = "1.0" if offers_10 and not version.startswith("0.") else "0.3"
        url = None
        if self.protocol == "1.0":
            url = next((i.get("url") for i in interfaces if str(i.get("protocolVersion", "")).startswith("1.")
                        and i.get("protocolBinding", "JSONRPC").upper() == "JSONRPC"), None)
        url = url or card.get("url")
        if isinstance(url, str) and url.startswith("/"):
            url = self.base_url + url
        self.rpc_url = url if isinstance(url, str) and url.startswith("http") else self.base_url + "/a2a"

    async def _ready(self) -> None:
        if self.rpc_url is None:
            if self.protocol is not None:   # told the protocol: the card is still read for the RPC URL
                try:
                    await self.card()
                    return
                except A2AError:
                    self.rpc_url = self.base_url + "/a2a"
                    return
            await self.card()

    # --- JSON-RPC ---------------------------------------------------------------------------------------

    async def _call(self, method_03: str, method_10: str, params: dict[str, Any]) -> Any:
        await self._ready()
        method = method_03 if self.protocol == "0.3" else method_10
        body = jsonrpc.request(method, params, uuid.uuid4().hex)
        headers = {"A2A-Version": "1.0"} if self.protocol == "1.0" else {}
        url = self.rpc_url or ""  # set by _ready()
        answer = await self._send_http(self._client().post(url, json=body, headers=headers), url)
        if answer.status_code >= 400 and "json" not in answer.headers.get("content-type", ""):
            raise A2AError(f"{self.rpc_url} answered HTTP {answer.status_code} to {method}")
        return self._rpc_reply(answer, method, None, nested_under="")

    def _task(self, result: Any, *, unwrap: bool = False, timed_out: bool = False) -> A2ATask:
        if unwrap and self.protocol == "1.0" and isinstance(result, dict) and "task" in result:
            result = result["task"]
        if unwrap and isinstance(result, dict) and ("message" in result and "id" not in result
                                                    or result.get("kind") == "message"):
            raise A2AProtocolError("result", "the agent answered a message, not a task; this client needs tasks",
                                   url=self.rpc_url or "")
        return A2ATask(result, url=self.rpc_url or "", timed_out=timed_out)

    async def send(self, content: Any, *, context_id: str | None = None, blocking: bool = False,
                   metadata: dict[str, Any] | None = None) -> A2ATask:
        """Send one user message (a string, a dict = data part, or a list of strings/dicts/parts); returns the task
        as the agent reports it (at once unless ``blocking``)."""
        await self._ready()
        dialect: wire.Dialect = "1.0" if self.protocol == "1.0" else "0.3"
        message = wire.WireMessage(uuid.uuid4().hex, "user", _to_parts(content), context_id=context_id,
                                   metadata=metadata)
        config = {"blocking": blocking} if dialect == "0.3" else {"returnImmediately": not blocking}
        result = await self._call("message/send", "SendMessage",
                                  {"message": message.to_wire(dialect), "configuration": config})
        return self._task(result, unwrap=True)

    async def stream(self, content: Any, *, context_id: str | None = None) -> AsyncIterator[dict[str, Any]]:
        """Send one user message with ``message/stream`` (1.0: ``SendStreamingMessage``) and yield each event's
        ``result`` as the agent sends it, in the agent's dialect: the Task first, then status updates (0.3
        ``{"kind": "status-update", ..., "final"}``, 1.0 ``{"statusUpdate": {...}}``) and artifact updates; it ends
        after the final update (a terminal state). A JSON-RPC error (as a JSON answer or an event) raises
        ``A2ARpcError``; an answer that is not an event stream, an event that is not a JSON-RPC response for this
        request, or a stream that stops before its final update raises ``A2AProtocolError``. Wrap it in
        ``contextlib.aclosing`` to stop early: leaving the stream does not cancel the task."""
        await self._ready()
        dialect: wire.Dialect = "1.0" if self.protocol == "1.0" else "0.3"
        message = wire.WireMessage(uuid.uuid4().hex, "user", _to_parts(content), context_id=context_id)
        async for result in self._stream_call("message/stream", "SendStreamingMessage",
                                              {"message": message.to_wire(dialect)}):
            yield result

    async def resubscribe(self, task_id: str) -> AsyncIterator[dict[str, Any]]:
        """Follow a running task with ``tasks/resubscribe`` (1.0: ``SubscribeToTask``): its Task as it stands,
        then the updates :meth:`stream` would yield, to the final one. An unknown or ended task raises
        ``A2ARpcError`` (-32001, -32004)."""
        async for result in self._stream_call("tasks/resubscribe", "SubscribeToTask", {"id": task_id}):
            yield result

    async def _stream_call(self, method_03: str, method_10: str,
                           params: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        import httpx2

        await self._ready()
        method = method_03 if self.protocol == "0.3" else method_10
        req_id = uuid.uuid4().hex
        body = jsonrpc.request(method, params, req_id)
        headers = {"Accept": "text/event-stream"}
        if self.protocol == "1.0":
            headers["A2A-Version"] = "1.0"
        url = self.rpc_url or ""  # set by _ready()
        # the agent sends a keepalive comment every 15 s, so a longer read timeout only waits out a dead agent
        timeout = httpx2.Timeout(self._timeout, read=max(self._timeout, 60.0))
        connected = False
        try:
            async with self._client().stream("POST", url, json=body, headers=headers, timeout=timeout) as answer:
                connected = True
                content_type = answer.headers.get("content-type", "")
                if "json" in content_type:   # an error found before the stream started
                    await answer.aread()
                    result = self._rpc_reply(answer, method, req_id)
                    raise A2AProtocolError("response", f"{method} must answer an event stream (text/event-stream),"
                                                       f" got one JSON result: {str(result)[:200]}", url=url)
                if answer.status_code >= 400:
                    raise A2AError(f"{url} answered HTTP {answer.status_code} to {method}")
                if not content_type.startswith("text/event-stream"):
                    raise A2AProtocolError("response", f"{method} must answer an event stream (text/event-stream),"
                                                       f" got Content-Type {content_type or 'none'!r}", url=url)
                async with contextlib.aclosing(_sse_data(answer, url)) as events:
                    async for data in events:
                        try:
                            reply = json.loads(data)
                        except ValueError:
                            raise A2AProtocolError("event.data", "is not JSON", url=url) from None
                        result = self._check_reply(reply, method, req_id, where="event")
                        if not isinstance(result, dict):
                            raise A2AProtocolError("event.result", "must be an object", url=url)
                        yield result
                        if _is_final(result):
                            return
                raise A2AProtocolError("stream", "ended before the final update (a terminal state)", url=url)
        except httpx2.TimeoutException as exc:
            raise A2AError(f"{url} {'stopped sending events' if connected else 'did not answer in time'} "
                           f"({type(exc).__name__})", hint="is the agent overloaded or stuck?") from None
        except httpx2.TransportError as exc:
            if connected:
                raise A2AError(f"the event stream from {url} broke: {describe(exc)}",
                               hint="is the agent still running?") from None
            raise A2AError(f"cannot reach {url}: {describe(exc)}",
                           hint="is the agent running at that address?") from None

    def _rpc_reply(self, answer: Any, method: str, req_id: str | None, *, nested_under: str | None = None) -> Any:
        """The result of the JSON-RPC answer in ``answer`` (an HTTP response); see :meth:`_check_reply`."""
        try:
            reply = answer.json()
        except ValueError:
            raise A2AProtocolError("response", "is not JSON", url=self.rpc_url or "") from None
        return self._check_reply(reply, method, req_id, where="response", nested_under=nested_under)

    def _check_reply(self, reply: Any, method: str, req_id: str | None, *, where: str,
                     nested_under: str | None = None) -> Any:
        """The ``result`` of one JSON-RPC reply (``where``: "response", or "event" in a stream); an error reply
        raises A2ARpcError, a malformed one A2AProtocolError naming the field (under ``nested_under``, default
        ``where``; "" for plain calls, as they have always named them). ``req_id`` None: the id is not checked."""
        url = self.rpc_url or ""
        under = where if nested_under is None else nested_under
        prefix = f"{under}." if under else ""
        if not isinstance(reply, dict):
            raise A2AProtocolError(where, "must be a JSON-RPC object", url=url)
        if reply.get("error") is not None:
            err = reply["error"]
            if not isinstance(err, dict) or not isinstance(err.get("code"), int):
                raise A2AProtocolError(f"{prefix}error.code", "is missing", url=url)
            raise A2ARpcError(err["code"], str(err.get("message", "")), err.get("data"))
        if req_id is not None and reply.get("id") != req_id:
            raise A2AProtocolError(f"{prefix}id", f"is {reply.get('id')!r}, not the {method} request's id",
                                   url=url)
        if "result" not in reply:
            raise A2AProtocolError(f"{prefix}result", "is missing (and there is no error)", url=url)
        return reply["result"]

    async def get_task(self, task_id: str, *, history_length: int | None = None) -> A2ATask:
        params: dict[str, Any] = {"id": task_id}
        if history_length is not None:
            params["historyLength"] = history_length
        return self._task(await self._call("tasks/get", "GetTask", params))

    async def cancel(self, task_id: str) -> A2ATask:
        return self._task(await self._call("tasks/cancel", "CancelTask", {"id": task_id}))

    async def wait(self, task: A2ATask | str, *, timeout: float = 600.0, poll_interval: float = 0.1) -> A2ATask:
        """Poll ``tasks/get`` until the task ends; on timeout, the last state seen with ``timed_out=True``."""
        last = task if isinstance(task, A2ATask) else await self.get_task(task)
        deadline = time.monotonic() + timeout
        interval = min(poll_interval, 0.02)
        while not last.terminal:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                last.timed_out = True
                return last
            await asyncio.sleep(min(interval, remaining))
            interval = min(interval * 2, poll_interval)
            last = await self.get_task(last.id)
        return last

    async def prompt(self, content: Any, *, context_id: str | None = None, timeout: float = 600.0,
                     poll_interval: float = 0.1, metadata: dict[str, Any] | None = None) -> A2ATask:
        """Send without blocking, then poll until the task ends or ``timeout`` passes (then the last state seen,
        ``timed_out=True``)."""
        task = await self.send(content, context_id=context_id, blocking=False, metadata=metadata)
        return await self.wait(task, timeout=timeout, poll_interval=poll_interval)

    # --- extensions -------------------------------------------------------------------------------------

    async def _ext(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        http = self._client()
        url = self.base_url + path
        answer = await self._send_http(http.get(url) if method == "GET" else http.post(url, json=body or {}), url)
        try:
            payload = answer.json()
        except ValueError:
            payload = None
        if answer.status_code >= 400:
            detail = payload.get("detail") if isinstance(payload, dict) else answer.text[:500]
            raise A2AExtensionError(answer.status_code, str(detail), path)
        if not isinstance(payload, dict):
            raise A2AProtocolError(path, "the answer must be a JSON object", url=self.base_url)
        return payload

    async def agent_config_set(self, **fields: Any) -> dict[str, Any]:
        return await self._ext("POST", "/ext/agent-config", fields)

    async def agent_config_get(self) -> dict[str, Any]:
        return (await self._ext("GET", "/ext/agent-config"))["config"]

    async def mcp_config_add(self, url: str, *, headers: dict[str, str] | None = None,
                             name: str | None = None) -> str:
        body: dict[str, Any] = {"url": url}
        if headers:
            body["headers"] = headers
        if name:
            body["name"] = name
        answer = await self._ext("POST", "/ext/mcp-config", body)
        if not isinstance(answer.get("name"), str):
            raise A2AProtocolError("name", "is missing from the mcp-config add answer", url=self.base_url)
        return answer["name"]

    async def mcp_config_list(self) -> dict[str, Any]:
        return (await self._ext("GET", "/ext/mcp-config"))["mcp_servers"]

    async def skill_add(self, name: str, description: str, skill_md: str) -> dict[str, Any]:
        return await self._ext("POST", "/ext/skill-config",
                               {"name": name, "description": description, "skill_md": skill_md})

    async def skill_list(self) -> dict[str, Any]:
        return (await self._ext("GET", "/ext/skill-config"))["skills"]

    async def trajectory_get(self, *, task_id: str | None = None, context_id: str | None = None,
                             after: int | None = None, limit: int | None = None) -> dict[str, Any]:
        """Without ``after``: ``{"trajectory": [events]}`` (a task's once it ended, or a context's); with it, a cursor
        page ``{"events", "next", "has_more", "state", "format", ...}``."""
        body: dict[str, Any] = {"task_id": task_id} if task_id is not None else {"context_id": context_id}
        if after is not None:
            body["after"] = after
        if limit is not None:
            body["limit"] = limit
        return await self._ext("POST", "/ext/trajectory", body)

    async def triggers_register(self, triggers: list[dict[str, Any]]) -> dict[str, Any]:
        return await self._ext("POST", "/ext/triggers", {"triggers": triggers})

    async def triggers_decide(self, turn: int, solver_message: str = "", *, context_id: str = "default",
                              env_triggers: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"turn": turn, "solver_message": solver_message, "context_id": context_id}
        if env_triggers is not None:
            body["env_triggers"] = env_triggers
        return await self._ext("POST", "/ext/triggers/decide", body)

    async def triggers_state(self) -> dict[str, Any]:
        return await self._ext("GET", "/ext/triggers")

    async def peer_agents_set(self, peers: list[dict[str, Any]]) -> dict[str, Any]:
        return await self._ext("POST", "/ext/peer-agents", {"peers": peers})

    async def peer_agents_list(self) -> list[dict[str, Any]]:
        return (await self._ext("GET", "/ext/peer-agents"))["peers"]
