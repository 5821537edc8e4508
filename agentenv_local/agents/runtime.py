"""One agent's A2A runtime: its state (config, MCP servers, skills, peers, triggers, tasks), the JSON-RPC
methods (0.3 and 1.0 names; the dialect follows the method name) and each task's run. The extension endpoints'
handlers are ``extensions.py``, the card ``card.py``, the HTTP app ``server.py``."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from agentenv_local import jsonrpc

from . import streaming, task_list, wire
from .base import Agent
from .card import CARD_PATHS, agent_card
from .extensions import ExtensionEndpoints
from .peers import PEER_TOOLS_PATH, PEER_TOOLS_SERVER
from .streaming import EventStream  # the name: the class has a `streaming` property
from .task_records import ContextLocks, TaskRecord
from .triggers import TriggerEngine
from .types import DataPart, TaskProgress, TaskRequest, TaskResult, TrajectoryState

logger = logging.getLogger("agentenv_local.agents")

MAX_TASKS = 1000
NONBLOCKING_GRACE_S = 0.05  # see _send: quick tasks answer in the send reply


class AgentRuntime(ExtensionEndpoints):
    """Everything the server keeps for one agent: config, MCP servers, skills, peers, triggers, tasks."""

    def __init__(self, agent: Agent, *, public_url: str | None = None):
        self.agent = agent
        self.public_url = public_url.rstrip("/") if public_url else None
        self.config: dict[str, Any] = dict(agent.initial_config)
        self.mcp_servers: dict[str, dict[str, Any]] = {}
        self.skills: list[dict[str, Any]] = []
        self.peers: list[dict[str, Any]] = []
        self.own_base_url: str | None = None  # where this agent's own tools reach it; see learn_own_base_url
        self.triggers = TriggerEngine()
        self.tasks: OrderedDict[str, TaskRecord] = OrderedDict()
        self.contexts: dict[str, list[str]] = {}
        self._locks = ContextLocks()
        self._runners: set[asyncio.Task] = set()

    @property
    def streaming(self) -> bool:
        return inspect.isasyncgenfunction(type(self.agent).run)

    def card(self, base_url: str, dialect: wire.Dialect = "0.3") -> dict[str, Any]:
        """The card a client of ``dialect`` reads (card.py)."""
        return agent_card(self.agent, self.task_config(), self.skills, public_url=self.public_url, base_url=base_url,
                          dialect=dialect)

    # --- JSON-RPC ---------------------------------------------------------------------------------------

    async def rpc(self, body: Any) -> dict[str, Any] | EventStream:
        """A JSON-RPC response, or for a streaming method that started, the ``EventStream`` to serve as SSE."""
        if isinstance(body, list):
            return rpc_error(None, wire.INVALID_REQUEST, "Invalid Request: batch requests are not supported")
        if not isinstance(body, dict):
            return rpc_error(None, wire.INVALID_REQUEST, "Invalid Request: the body must be a JSON object")
        req_id = body.get("id")
        if req_id is not None and (isinstance(req_id, bool) or not isinstance(req_id, (str, int))):
            return rpc_error(None, wire.INVALID_REQUEST, "Invalid Request: id must be a string, a number or null",
                              field="id")
        if body.get("jsonrpc") != "2.0":
            return rpc_error(req_id, wire.INVALID_REQUEST, "Invalid Request: jsonrpc must be \"2.0\"",
                              field="jsonrpc")
        method = body.get("method")
        if not isinstance(method, str) or not method:
            return rpc_error(req_id, wire.INVALID_REQUEST, "Invalid Request: method must be a non-empty string",
                              field="method")
        dialect: wire.Dialect
        if method in wire.METHODS_03:
            dialect, op = "0.3", wire.METHODS_03[method]
        elif method in wire.METHODS_10:
            dialect, op = "1.0", wire.METHODS_10[method]
        elif method in streaming.METHODS:
            dialect, op = streaming.METHODS[method]
        else:
            return rpc_error(req_id, wire.METHOD_NOT_FOUND, f"Method not found: {method!r}", field="method")
        try:
            if op == "push_config":
                return rpc_error(req_id, wire.PUSH_NOTIFICATION_NOT_SUPPORTED,
                                  "Push Notification is not supported: this agent's card says "
                                  "capabilities.pushNotifications is false; follow a task with "
                                  "SendStreamingMessage/SubscribeToTask (message/stream, tasks/resubscribe) or "
                                  "poll it with GetTask (tasks/get)")
            if op == "extended_card":
                return rpc_error(req_id, wire.EXTENDED_CARD_NOT_CONFIGURED,
                                  "Extended agent card is not configured: this agent has one card, the public one "
                                  f"at {CARD_PATHS[0]}")
            if op == "send":
                result = await self._send(wire.send_params_from_wire(body.get("params"), dialect), dialect)
            elif op == "list":
                result = task_list.list_tasks(self.tasks.values(), task_list.params_from_wire(body.get("params")),
                                              dialect)
            elif op == "stream":
                params = wire.send_params_from_wire(body.get("params"), dialect)
                return streaming.EventStream(req_id, self._start(params), dialect, params.history_length)
            else:
                task_id, history_length = wire.task_id_from_wire(body.get("params"))
                record = self.tasks.get(task_id)
                if record is None:
                    return rpc_error(req_id, wire.TASK_NOT_FOUND, f"Task not found: {task_id!r}")
                if op == "cancel":
                    if record.terminal:
                        return rpc_error(req_id, wire.TASK_NOT_CANCELABLE,
                                          f"Task cannot be canceled: it is already {record.state}")
                    self._cancel(record)
                elif op == "subscribe":
                    if record.terminal:
                        return rpc_error(req_id, wire.UNSUPPORTED_OPERATION,
                                          f"Task {task_id!r} is already {record.state}: there are no updates to "
                                          "subscribe to; read it with tasks/get (or GetTask)")
                    return streaming.EventStream(req_id, record, dialect, history_length)
                result = record.to_wire(dialect, history_length)
        except wire.WireError as e:
            return rpc_error(req_id, wire.INVALID_PARAMS, f"Invalid params: {e}", field=e.path)
        return jsonrpc.result(req_id, result)

    async def _send(self, params: wire.SendParams, dialect: wire.Dialect) -> dict[str, Any]:
        record = self._start(params)
        if params.blocking:
            await record.done.wait()
        else:
            # A quick task answers in the reply to message/send itself, sparing the client a poll; a slow one
            # is reported as it stands after this short grace, as non-blocking asks.
            for _ in range(8):  # an agent with no I/O to wait on is done within a few turns of the loop
                if record.done.is_set():
                    break
                await asyncio.sleep(0)
            if not record.done.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(record.done.wait()), NONBLOCKING_GRACE_S)
        task = record.to_wire(dialect, params.history_length)
        return task if dialect == "0.3" else {"task": task}

    def _start(self, params: wire.SendParams) -> TaskRecord:
        """Create the task for a user message and schedule its run (which starts at the next await)."""
        message = params.message
        if message.task_id is not None:
            existing = self.tasks.get(message.task_id)
            if existing is None:
                raise wire.WireError("params.message.taskId", f"no task {message.task_id!r} (leave it out to start "
                                                              "a new task)")
            if existing.terminal:
                raise wire.WireError("params.message.taskId", f"task {message.task_id!r} is already "
                                                              f"{existing.state}; send without taskId")
            raise wire.WireError("params.message.taskId", f"task {message.task_id!r} is still {existing.state}; "
                                                          "wait for it to end")
        context_id = message.context_id or uuid.uuid4().hex
        record = TaskRecord(uuid.uuid4().hex, context_id, message)
        message.context_id, message.task_id = context_id, record.id
        if params.metadata:
            record.metadata = dict(params.metadata)
        self._remember(record)
        runner = asyncio.get_running_loop().create_task(self._execute(record), name=f"a2a-task-{record.id}")
        record.runner = runner
        self._runners.add(runner)
        runner.add_done_callback(self._runners.discard)
        return record

    def _remember(self, record: TaskRecord) -> None:
        self.tasks[record.id] = record
        self.contexts.setdefault(record.context_id, []).append(record.id)
        if len(self.tasks) > MAX_TASKS:
            for task_id, old in list(self.tasks.items()):
                if len(self.tasks) <= MAX_TASKS:
                    break
                if old.terminal:
                    del self.tasks[task_id]
                    siblings = self.contexts.get(old.context_id, [])
                    if task_id in siblings:
                        siblings.remove(task_id)
                    if not siblings:
                        self.contexts.pop(old.context_id, None)

    def learn_own_base_url(self, scope: Mapping[str, Any]) -> None:
        """Remember, from the first A2A request served, a base URL at which this agent reaches itself (used when
        ``public_url`` is not set).

        It is the local address of the socket the request came in on (ASGI ``scope["server"]``), not the request's
        Host: behind a port mapping or a proxy the Host names an address only the outside can use, while the agent
        can always connect to its own listening socket.
        """
        if self.own_base_url is not None:
            return
        server = scope.get("server")
        if not server or server[1] is None:  # e.g. a unix socket: nothing to dial back
            return
        host, port = server
        host = f"[{host}]" if ":" in host else host
        self.own_base_url = f"{scope.get('scheme', 'http')}://{host}:{port}"

    def _task_mcp_servers(self) -> dict[str, dict[str, Any]]:
        """The registered MCP servers, plus this agent's own peer tools while peers are set."""
        servers = {k: dict(v) for k, v in self.mcp_servers.items()}
        base = self.public_url or self.own_base_url
        if self.peers and base:
            servers[PEER_TOOLS_SERVER] = {"url": base + PEER_TOOLS_PATH, "headers": None}
        return servers

    def _cancel(self, record: TaskRecord) -> None:
        record.set_state("canceled")
        record.log.seal(TrajectoryState.CANCELED)
        if record.runner is not None and not record.runner.done():
            record.runner.cancel()
        record.done.set()

    async def _execute(self, record: TaskRecord) -> None:
        try:
            async with self._locks.hold(record.context_id):
                if record.terminal:   # canceled while it waited for its turn
                    return
                record.set_state("working")
                config = self.task_config()
                metadata = {**record.history[0].metadata, **({"role": config.role} if config.role else {})}
                request = TaskRequest(task_id=record.id, context_id=record.context_id,
                                      parts=tuple(record.history[0].parts), config=config,
                                      mcp_servers=self._task_mcp_servers(),
                                      skills=tuple(dict(s) for s in self.skills), metadata=metadata,
                                      trajectory=record.log)
                timeout = asyncio.timeout(config.timeout_seconds)
                try:
                    async with timeout:
                        result = await self._run_agent(request, record)
                except TimeoutError:
                    if not timeout.expired():
                        raise
                    result = TaskResult.failure("framework.timeout",
                                                f"the agent did not finish within {config.timeout_seconds} s")
            self._finish(record, result)
        except asyncio.CancelledError:
            if not record.terminal:
                record.set_state("canceled")
            record.log.seal(TrajectoryState.CANCELED)
        except Exception:
            correlation = uuid.uuid4().hex
            logger.exception("agent %r: task %s failed with an unhandled exception (correlation id %s)",
                             self.agent.name, record.id, correlation)
            self._finish(record, TaskResult.failure(
                "framework.unhandled_exception",
                f"An unexpected error occurred in the agent. Correlation ID: {correlation}",
                error_type="infra_error"))
        finally:
            record.done.set()

    async def _run_agent(self, request: TaskRequest, record: TaskRecord) -> TaskResult:
        produced = self.agent.run(request)
        if inspect.isasyncgen(produced):
            try:
                async for item in produced:
                    if isinstance(item, TaskResult):
                        return item
                    if not isinstance(item, TaskProgress):
                        raise TypeError(f"a streaming run() must yield TaskProgress or TaskResult, not "
                                        f"{type(item).__name__}")
                    if not record.terminal:
                        record.set_state("working", self._agent_message(record, list(item.parts)))
            finally:
                await produced.aclose()
            raise TypeError("a streaming run() ended without yielding a TaskResult")
        if inspect.isawaitable(produced):
            produced = await produced
        if not isinstance(produced, TaskResult):
            raise TypeError(f"run() must return a TaskResult, not {type(produced).__name__}")
        return produced

    @staticmethod
    def _agent_message(record: TaskRecord, parts: list) -> wire.WireMessage:
        return wire.WireMessage(uuid.uuid4().hex, "agent", parts, context_id=record.context_id, task_id=record.id)

    def _finish(self, record: TaskRecord, result: TaskResult) -> None:
        if record.terminal:
            return
        parts = list(result.parts)
        extra: dict[str, Any] = {}
        if not result.usage.is_empty:
            extra["usage"] = result.usage.to_dict()
        if result.error is not None:
            extra.update(error_type=result.error.error_type, error_code=result.error.code,
                         error_message=result.error.message)
        if extra:
            parts.append(DataPart(data=extra))
        message = self._agent_message(record, parts)
        record.history.append(message)
        if result.succeeded:
            record.add_artifact(uuid.uuid4().hex, list(result.parts))
        record.log.seal(TrajectoryState.COMPLETED if result.succeeded else TrajectoryState.FAILED)
        record.set_state("completed" if result.succeeded else "failed", message)

    async def shutdown(self) -> None:
        for runner in list(self._runners):
            runner.cancel()
        if self._runners:
            await asyncio.gather(*self._runners, return_exceptions=True)
        try:
            await self.agent.shutdown()
        except Exception:  # a broken cleanup must not stop the server's own shutdown
            logger.exception("agent %r: shutdown failed", self.agent.name)


def rpc_error(req_id: Any, code: int, message: str, *, field: str | None = None) -> dict[str, Any]:
    return jsonrpc.error(req_id, code, message, None if field is None else {"field": field})
