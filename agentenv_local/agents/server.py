"""The A2A server for an ``Agent``: JSON-RPC (0.3 and 1.0 method names), the card, and the AgentEnv extensions.

Routes:
    GET  /.well-known/agent-card.json, /.well-known/agent.json   the agent card: the 1.0 card when the request
                                                                  says ``A2A-Version: 1.x``, else the 0.3 card
    GET  /health                                                  {"status": "ok"}
    POST /a2a (and /)                                             JSON-RPC: message/send, tasks/get, tasks/cancel,
                                                                  tasks/list, message/stream, tasks/resubscribe
                                                                  (0.3) and SendMessage, GetTask, CancelTask,
                                                                  ListTasks (task_list.py), SendStreamingMessage,
                                                                  SubscribeToTask (1.0); the streaming ones answer
                                                                  SSE (streaming.py); the push-notification config
                                                                  methods answer -32003 (not supported) and the
                                                                  extended card ones -32007 (not configured)
    POST|GET /ext/agent-config                                    agent-config/v1 set / get
    POST|GET /ext/mcp-config                                      mcp-config/v1 add / list
    POST|GET /ext/skill-config                                    skill-config/v1 add / list
    POST     /ext/trajectory                                      trajectory/v1 get
    POST /ext/triggers, POST /ext/triggers/decide, GET /ext/triggers   triggers/v1 register / decide / state
    POST|GET /ext/peer-agents                                     peer-agents/v1 set / list
    GET|POST|DELETE /ext/peer-agents/mcp                          the peer tools (MCP server ``peer_agents``)
    ...and whatever the agent's ``extra_routes()`` adds (its ``card_extensions()`` join the card's extensions)

The JSON-RPC layer is implemented here (no a2a-sdk): the dialect follows the method name. Extension errors are
HTTP 400/404/409 with ``{"detail": "..."}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import re
import sys
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from agentenv_local import jsonrpc
from agentenv_local.untrusted import UntrustedInputError, parse_json

from . import streaming, task_list, wire
from .base import Agent
from .peers import (
    PEER_TOOL_NAMES,
    PEER_TOOLS_PATH,
    PEER_TOOLS_SERVER,
    PeerToolsEndpoint,
)
from .streaming import EventStream  # the name: the class has a `streaming` property
from .triggers import TriggerEngine, TriggerError
from .types import (
    DataPart,
    TaskProgress,
    TaskRequest,
    TaskResult,
    TrajectoryLog,
    TrajectoryState,
)

logger = logging.getLogger("agentenv_local.agents")

A2A_PROTOCOL_VERSION = "0.3.0"
RPC_PATH = "/a2a"
CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
MAX_TASKS = 1000
MAX_TRAJECTORY_READ = 1000

EXT = "urn:agentenv:{}/v1"
AGENT_CONFIG_V1 = EXT.format("agent-config")
MCP_CONFIG_V1 = EXT.format("mcp-config")
SKILL_CONFIG_V1 = EXT.format("skill-config")
TRAJECTORY_V1 = EXT.format("trajectory")
TRIGGERS_V1 = EXT.format("triggers")
PEER_AGENTS_V1 = EXT.format("peer-agents")
EXTENSION_URIS = (AGENT_CONFIG_V1, MCP_CONFIG_V1, SKILL_CONFIG_V1, TRAJECTORY_V1, TRIGGERS_V1, PEER_AGENTS_V1)

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


NONBLOCKING_GRACE_S = 0.05  # see _send: quick tasks answer in the send reply


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


class ExtensionError(Exception):
    def __init__(self, status: int, detail: str):
        super().__init__(detail)
        self.status = status
        self.detail = detail


def _pydantic_detail(exc: ValidationError) -> str:
    problems = []
    for err in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(x) for x in err["loc"]) or "body"
        problems.append(f"{where}: {err['msg']}")
    return "; ".join(problems)


# --- tasks ------------------------------------------------------------------------------------------------

class TaskRecord:
    def __init__(self, task_id: str, context_id: str, user: wire.WireMessage):
        self.id = task_id
        self.context_id = context_id
        self.state = "submitted"
        self.timestamp = _now()
        self.status_message: wire.WireMessage | None = None
        self.history: list[wire.WireMessage] = [user]
        self.artifacts: list[tuple[str, list]] = []
        self.metadata: dict[str, Any] = {}
        self.log = TrajectoryLog(task_id, context_id)
        self.runner: asyncio.Task | None = None
        self.done = asyncio.Event()
        self.updates = streaming.UpdateFanout()   # open streams (message/stream, tasks/resubscribe)

    @property
    def terminal(self) -> bool:
        return self.state in wire.TERMINAL_STATES

    def set_state(self, state: str, message: wire.WireMessage | None = None) -> None:
        self.state = state
        self.status_message = message
        self.timestamp = _now()
        self.updates.publish(streaming.StatusUpdate(state, message, self.timestamp))

    def add_artifact(self, artifact_id: str, parts: list) -> None:
        self.artifacts.append((artifact_id, parts))
        self.updates.publish(streaming.ArtifactUpdate(artifact_id, parts))

    def to_wire(self, dialect: wire.Dialect, history_length: int | None = None) -> dict[str, Any]:
        status = streaming.status_to_wire(self.state, self.status_message, self.timestamp, dialect)
        history = self.history if history_length is None else self.history[len(self.history) - history_length:] \
            if history_length else []
        out: dict[str, Any] = {"id": self.id, "contextId": self.context_id, "status": status,
                               "history": [m.to_wire(dialect) for m in history]}
        if self.artifacts:
            out["artifacts"] = [streaming.artifact_to_wire(aid, parts, dialect) for aid, parts in self.artifacts]
        if self.metadata:
            out["metadata"] = self.metadata
        if dialect == "0.3":
            out["kind"] = "task"
        return out


class _ContextLocks:
    """One lock per context (turns of a context run serially), dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, context_id: str):
        lock, users = self._locks.get(context_id, (None, 0))
        if lock is None:
            lock = asyncio.Lock()
        self._locks[context_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[context_id]
            if users <= 1:
                del self._locks[context_id]
            else:
                self._locks[context_id] = (lock, users - 1)


# --- the runtime ------------------------------------------------------------------------------------------

class AgentRuntime:
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
        self._locks = _ContextLocks()
        self._runners: set[asyncio.Task] = set()

    @property
    def streaming(self) -> bool:
        return inspect.isasyncgenfunction(type(self.agent).run)

    def task_config(self) -> Any:
        return self.agent.config_model.model_validate(self.config)

    # --- card -------------------------------------------------------------------------------------------

    def card(self, base_url: str, dialect: wire.Dialect = "0.3") -> dict[str, Any]:
        """The card a client of ``dialect`` reads: the 0.3 card (also read by 1.0 clients that accept 0.3 fields)
        adds ``url``, ``protocolVersion``, ``preferredTransport``, ``additionalInterfaces`` and
        ``capabilities.stateTransitionHistory``, which a strict 1.0 parse (a2a-sdk 1.x's AgentCard) refuses."""
        base = self.public_url or base_url.rstrip("/")
        url = base + RPC_PATH
        cfg = self.task_config()
        agent = self.agent
        skills = [dict(s) for s in agent.skills] + [
            {"id": f"skill-{s['name']}", "name": s["name"], "description": s["description"], "tags": ["skill"]}
            for s in self.skills]
        config_fields = sorted(agent.config_model.model_fields)
        extensions = [
            {"uri": AGENT_CONFIG_V1, "description": "Set or read agent configuration.",
             "params": {"endpoint": "/ext/agent-config",
                        "methods": {"set": {"method": "POST", "request": {"supported": config_fields}},
                                    "get": {"method": "GET", "response": {"required": ["config"]}}}}},
            {"uri": MCP_CONFIG_V1, "description": "Register MCP servers the agent should use.",
             "params": {"endpoint": "/ext/mcp-config",
                        "methods": {"add": {"method": "POST", "request": {"required": ["url"],
                                                                          "optional": ["headers", "name"]}},
                                    "list": {"method": "GET", "response": {"required": ["mcp_servers"]}}}}},
            {"uri": SKILL_CONFIG_V1, "description": "Register skills made available to the agent.",
             "params": {"endpoint": "/ext/skill-config",
                        "methods": {"add": {"method": "POST", "request": {"variants": ["inline"]}},
                                    "list": {"method": "GET", "response": {"required": ["skills"]}}}}},
            {"uri": TRAJECTORY_V1, "description": "Retrieve an agent trajectory.",
             "params": {"endpoint": "/ext/trajectory",
                        "methods": {"get": {"method": "POST", "request": {
                            "variants": ["task", "context", "task_events", "context_events"]}}}}},
            {"uri": TRIGGERS_V1, "description": "Register triggers and decide deterministic responses.",
             "params": {"endpoint": "/ext/triggers",
                        "methods": {"register": {"method": "POST"},
                                    "decide": {"method": "POST", "endpoint": "/ext/triggers/decide",
                                               "response": {"required": ["parts", "done", "fired"]}},
                                    "state": {"method": "GET", "response": {"required": ["firing_log"]}}}}},
            {"uri": PEER_AGENTS_V1, "description": "Configure peer A2A agents available for delegation.",
             "params": {"endpoint": "/ext/peer-agents",
                        "methods": {"set": {"method": "POST"}, "list": {"method": "GET"}},
                        "mcp": {"endpoint": PEER_TOOLS_PATH, "server_name": PEER_TOOLS_SERVER,
                                "tools": list(PEER_TOOL_NAMES)}}},
        ] + [dict(e) for e in agent.card_extensions()]
        interfaces = [{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                      {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}]
        if dialect == "1.0":
            return {"name": cfg.name or agent.name, "description": cfg.description or agent.description,
                    "version": agent.version, "supportedInterfaces": interfaces,
                    "defaultInputModes": list(agent.input_modes), "defaultOutputModes": list(agent.output_modes),
                    "skills": skills,
                    "capabilities": {"streaming": True, "pushNotifications": False, "extendedAgentCard": False,
                                     "extensions": extensions}}
        return {
            "name": cfg.name or agent.name,
            "description": cfg.description or agent.description,
            "version": agent.version,
            "url": url,
            "protocolVersion": A2A_PROTOCOL_VERSION,
            "preferredTransport": "JSONRPC",
            "additionalInterfaces": [{"url": url, "transport": "JSONRPC"}],
            "supportedInterfaces": interfaces[::-1],
            "defaultInputModes": list(agent.input_modes),
            "defaultOutputModes": list(agent.output_modes),
            "skills": skills,
            "capabilities": {"streaming": True, "pushNotifications": False, "stateTransitionHistory": False,
                             "extensions": extensions},
        }

    # --- JSON-RPC ---------------------------------------------------------------------------------------

    async def rpc(self, body: Any) -> dict[str, Any] | EventStream:
        """A JSON-RPC response, or for a streaming method that started, the ``EventStream`` to serve as SSE."""
        if isinstance(body, list):
            return _rpc_error(None, wire.INVALID_REQUEST, "Invalid Request: batch requests are not supported")
        if not isinstance(body, dict):
            return _rpc_error(None, wire.INVALID_REQUEST, "Invalid Request: the body must be a JSON object")
        req_id = body.get("id")
        if req_id is not None and (isinstance(req_id, bool) or not isinstance(req_id, (str, int))):
            return _rpc_error(None, wire.INVALID_REQUEST, "Invalid Request: id must be a string, a number or null",
                              field="id")
        if body.get("jsonrpc") != "2.0":
            return _rpc_error(req_id, wire.INVALID_REQUEST, "Invalid Request: jsonrpc must be \"2.0\"",
                              field="jsonrpc")
        method = body.get("method")
        if not isinstance(method, str) or not method:
            return _rpc_error(req_id, wire.INVALID_REQUEST, "Invalid Request: method must be a non-empty string",
                              field="method")
        dialect: wire.Dialect
        if method in wire.METHODS_03:
            dialect, op = "0.3", wire.METHODS_03[method]
        elif method in wire.METHODS_10:
            dialect, op = "1.0", wire.METHODS_10[method]
        elif method in streaming.METHODS:
            dialect, op = streaming.METHODS[method]
        else:
            return _rpc_error(req_id, wire.METHOD_NOT_FOUND, f"Method not found: {method!r}", field="method")
        try:
            if op == "push_config":
                return _rpc_error(req_id, wire.PUSH_NOTIFICATION_NOT_SUPPORTED,
                                  "Push Notification is not supported: this agent's card says "
                                  "capabilities.pushNotifications is false; follow a task with "
                                  "SendStreamingMessage/SubscribeToTask (message/stream, tasks/resubscribe) or "
                                  "poll it with GetTask (tasks/get)")
            if op == "extended_card":
                return _rpc_error(req_id, wire.EXTENDED_CARD_NOT_CONFIGURED,
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
                    return _rpc_error(req_id, wire.TASK_NOT_FOUND, f"Task not found: {task_id!r}")
                if op == "cancel":
                    if record.terminal:
                        return _rpc_error(req_id, wire.TASK_NOT_CANCELABLE,
                                          f"Task cannot be canceled: it is already {record.state}")
                    self._cancel(record)
                elif op == "subscribe":
                    if record.terminal:
                        return _rpc_error(req_id, wire.UNSUPPORTED_OPERATION,
                                          f"Task {task_id!r} is already {record.state}: there are no updates to "
                                          "subscribe to; read it with tasks/get (or GetTask)")
                    return streaming.EventStream(req_id, record, dialect, history_length)
                result = record.to_wire(dialect, history_length)
        except wire.WireError as e:
            return _rpc_error(req_id, wire.INVALID_PARAMS, f"Invalid params: {e}", field=e.path)
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

    # --- extensions -------------------------------------------------------------------------------------

    def agent_config_set(self, body: dict) -> dict:
        model = self.agent.config_model
        try:
            validated = model.model_validate({**self.config, **body})
        except ValidationError as e:
            raise ExtensionError(400, _pydantic_detail(e)) from None
        for field in ("name", "description"):
            if field in body and (not isinstance(getattr(validated, field), str)
                                  or not getattr(validated, field).strip()):
                raise ExtensionError(400, f"{field}: must be a non-empty string")
        dumped = validated.model_dump(mode="json")
        self.config.update({k: dumped[k] for k in body})
        return {"status": "updated"}

    def agent_config_get(self) -> dict:
        return {"config": self.task_config().model_dump(mode="json")}

    def mcp_add(self, body: dict) -> dict:
        _only(body, {"url", "headers", "name"})
        url = body.get("url")
        if not isinstance(url, str) or not url.strip():
            raise ExtensionError(400, "url: must be a non-empty string")
        url = url.strip()
        headers = body.get("headers")
        if headers is not None and (not isinstance(headers, dict)
                                    or not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items())):
            raise ExtensionError(400, "headers: must be an object of string values")
        name = body.get("name")
        if name is not None and (not isinstance(name, str) or not _NAME.match(name)):
            raise ExtensionError(400, f"name: must match {_NAME.pattern}")
        if name == PEER_TOOLS_SERVER:
            raise ExtensionError(400, f"name: {PEER_TOOLS_SERVER!r} is reserved for the peer-agents/v1 tools "
                                      f"this agent serves at {PEER_TOOLS_PATH}")
        for existing, reg in self.mcp_servers.items():
            if reg["url"] == url:
                raise ExtensionError(409, f"MCP URL {url!r} is already registered as {existing!r}")
        name = name or f"mcp_{uuid.uuid4().hex[:8]}"
        if name in self.mcp_servers:
            raise ExtensionError(409, f"MCP name {name!r} is already registered")
        self.mcp_servers[name] = {"url": url, "headers": dict(headers) if headers else None}
        return {"status": "added", "name": name, "url": url}

    def mcp_list(self) -> dict:
        return {"mcp_servers": {n: {"url": r["url"], "has_headers": bool(r.get("headers"))}
                                for n, r in self.mcp_servers.items()}}

    def skill_add(self, body: dict) -> dict:
        if "skill_bundle" in body:
            raise ExtensionError(400, "skill_bundle: bundle skills (object grants) are not supported by this agent; "
                                      "send an inline skill {name, description, skill_md}")
        _only(body, {"name", "description", "skill_md"})
        name = body.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise ExtensionError(400, f"name: must match {_NAME.pattern}")
        for field in ("description", "skill_md"):
            if not isinstance(body.get(field), str):
                raise ExtensionError(400, f"{field}: must be a string")
        taken = {s.get("name") for s in self.agent.skills} | {s["name"] for s in self.skills}
        if name in taken:
            raise ExtensionError(409, f"skill {name!r} is already registered")
        self.skills.append({"name": name, "description": body["description"], "skill_md": body["skill_md"]})
        return {"name": name}

    def skill_list(self) -> dict:
        skills = {str(s.get("name")): {"description": str(s.get("description", ""))} for s in self.agent.skills}
        skills.update({s["name"]: {"description": s["description"]} for s in self.skills})
        return {"skills": skills}

    def peers_set(self, body: dict) -> dict:
        _only(body, {"peers"})
        peers = body.get("peers")
        if not isinstance(peers, list):
            raise ExtensionError(400, "peers: must be a list")
        clean = []
        for i, peer in enumerate(peers):
            if not isinstance(peer, dict):
                raise ExtensionError(400, f"peers[{i}]: must be an object")
            unknown = set(peer) - {"name", "url", "card", "description"}
            if unknown:
                raise ExtensionError(400, f"peers[{i}]: unknown field(s) {', '.join(sorted(unknown))}")
            for field in ("name", "url"):
                if not isinstance(peer.get(field), str) or not peer[field]:
                    raise ExtensionError(400, f"peers[{i}].{field}: must be a non-empty string")
            clean.append({"name": peer["name"], "url": peer["url"], "card": peer.get("card") or {},
                          "description": peer.get("description")})
        names = [p["name"] for p in clean]
        if len(set(names)) != len(names):
            raise ExtensionError(400, "peers: names must be unique")
        self.peers = clean
        return {"status": "updated", "peers": len(clean)}

    def peers_list(self) -> dict:
        return {"peers": [{"name": p["name"], "url": p["url"], "description": p["description"]} for p in self.peers]}

    def trajectory_get(self, body: dict) -> dict:
        if "objects" in body:
            raise ExtensionError(400, "objects: trajectory uploads through object grants are not supported by this "
                                      "agent; read the events inline")
        _only(body, {"task_id", "context_id", "after", "limit"})
        task_id, context_id = body.get("task_id"), body.get("context_id")
        if (task_id is None) == (context_id is None):
            raise ExtensionError(400, "give exactly one of task_id or context_id")
        for field, value in (("task_id", task_id), ("context_id", context_id)):
            if value is not None and (not isinstance(value, str) or not value):
                raise ExtensionError(400, f"{field}: must be a non-empty string")
        after, limit = body.get("after"), body.get("limit")
        cursor = "after" in body
        if cursor and (isinstance(after, bool) or not isinstance(after, int) or after < 0):
            raise ExtensionError(400, "after: must be a non-negative integer")
        if limit is not None:
            if not cursor:
                raise ExtensionError(400, "limit: only with after (a cursor read)")
            if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_TRAJECTORY_READ:
                raise ExtensionError(400, f"limit: must be an integer from 1 to {MAX_TRAJECTORY_READ}")
        if task_id is not None:
            record = self.tasks.get(task_id)
            if record is None:
                raise ExtensionError(404, f"unknown task {task_id!r}")
            logs = [record.log]
        else:
            assert context_id is not None  # exactly one of them, checked above
            ids = self.contexts.get(context_id)
            if not ids:
                raise ExtensionError(404, f"unknown context {context_id!r}")
            logs = [self.tasks[t].log for t in ids]
        if not cursor:
            if task_id is not None and not logs[0].sealed:
                raise ExtensionError(404, f"no completed trajectory for task {task_id!r} yet (it is "
                                          f"{logs[0].state.value}); read events with a cursor: "
                                          '{"task_id", "after": 0}')
            return {"trajectory": [e for log in logs for e in log.events()]}
        assert isinstance(after, int)  # a cursor read: checked above
        total = sum(len(log) for log in logs)
        if after > total:
            raise ExtensionError(400, f"after={after} is past the trajectory's {total} events")
        want = limit or MAX_TRAJECTORY_READ
        events: list[dict] = []
        skip = after
        for log in logs:
            n = len(log)
            if skip >= n:
                skip -= n
                continue
            events.extend(log.events(skip, want - len(events)))
            skip = 0
            if len(events) >= want:
                break
        last = logs[-1]
        nxt = after + len(events)
        fmt = next((log.format for log in logs if log.format), None)
        return {"context_id": last.context_id, "task_id": last.task_id, "state": last.state.value, "format": fmt,
                "events": events, "next": nxt, "has_more": nxt < total}


def _only(body: dict, allowed: set[str]) -> None:
    unknown = set(body) - allowed
    if unknown:
        raise ExtensionError(400, f"unknown field(s): {', '.join(sorted(unknown))} (accepted: "
                                  f"{', '.join(sorted(allowed))})")


def _rpc_error(req_id: Any, code: int, message: str, *, field: str | None = None) -> dict[str, Any]:
    return jsonrpc.error(req_id, code, message, None if field is None else {"field": field})


# --- the ASGI app -----------------------------------------------------------------------------------------

def create_app(agent: Agent, *, public_url: str | None = None, own_hosts: Any = ()) -> Any:
    """A Starlette app serving ``agent``, behind the HTTP guard (agentenv_local/http_guard.py: Host, Origin, body
    size; its own hosts are ``own_hosts`` and ``public_url``'s); ``app.state.runtime`` is its ``AgentRuntime``."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    runtime = AgentRuntime(agent, public_url=public_url)
    peer_tools = PeerToolsEndpoint(lambda: runtime.peers)

    def base_of(request: Request) -> str:
        return f"{request.url.scheme}://{request.url.netloc}"

    async def card(request: Request) -> JSONResponse:
        # A2A 1.0 clients send A2A-Version (the spec: without it, assume 0.3); each gets the card it parses
        dialect: wire.Dialect = "1.0" if request.headers.get("a2a-version", "").startswith("1.") else "0.3"
        return JSONResponse(runtime.card(base_of(request), dialect), headers={"Vary": "A2A-Version"})

    async def health(_request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def rpc(request: Request) -> Any:
        runtime.learn_own_base_url(request.scope)  # before any task is built: tasks get the peer tools' URL
        raw = await request.body()
        try:  # bounded: a deeply nested body is a parse error, not a RecursionError
            body = parse_json(raw, what="the body")
        except UntrustedInputError as e:
            why = "the body is not valid JSON" if "not valid JSON" in str(e) else str(e)
            return JSONResponse(_rpc_error(None, wire.PARSE_ERROR, f"Parse error: {why}"))
        answer = await runtime.rpc(body)
        if isinstance(answer, streaming.EventStream):
            return streaming.sse_response(answer)
        return JSONResponse(answer)

    async def json_body(request: Request) -> dict:
        raw = await request.body()
        if not raw:
            return {}
        try:
            body = parse_json(raw, what="the body")
        except UntrustedInputError as e:
            raise ExtensionError(400, "the body is not valid JSON" if "not valid JSON" in str(e) else str(e)) \
                from None
        if not isinstance(body, dict):
            raise ExtensionError(400, "the body must be a JSON object")
        return body

    def ext(post: Any = None, get: Any = None) -> Any:
        async def endpoint(request: Request) -> JSONResponse:
            try:
                if request.method == "GET":
                    return JSONResponse(get())
                return JSONResponse(post(await json_body(request)))
            except ExtensionError as e:
                return JSONResponse({"detail": e.detail}, status_code=e.status)
            except TriggerError as e:
                return JSONResponse({"detail": str(e)}, status_code=400)
        return endpoint

    def methods(post: Any, get: Any) -> list[str]:
        return [m for m, f in (("POST", post), ("GET", get)) if f is not None]

    extensions = [
        ("/ext/agent-config", runtime.agent_config_set, runtime.agent_config_get),
        ("/ext/mcp-config", runtime.mcp_add, runtime.mcp_list),
        ("/ext/skill-config", runtime.skill_add, runtime.skill_list),
        ("/ext/trajectory", runtime.trajectory_get, None),
        ("/ext/triggers", runtime.triggers.register, runtime.triggers.state),
        ("/ext/triggers/decide", runtime.triggers.decide, None),
        ("/ext/peer-agents", runtime.peers_set, runtime.peers_list),
    ]
    routes = [Route(p, card, methods=["GET"]) for p in CARD_PATHS]
    routes += [Route("/health", health, methods=["GET"]),
               Route(RPC_PATH, rpc, methods=["POST"]),
               Route("/", rpc, methods=["POST"])]
    routes += [Route(path, ext(post, get), methods=methods(post, get)) for path, post, get in extensions]
    routes.append(Route(PEER_TOOLS_PATH, peer_tools))  # an ASGI app (built on first use)
    routes += list(agent.extra_routes())

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any):
        async with peer_tools.running():  # the tasks end first: they may be calling the peer tools
            try:
                yield
            finally:
                await runtime.shutdown()

    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.runtime = runtime
    from urllib.parse import urlsplit

    from agentenv_local.env.app import guarded

    return guarded(app, [*own_hosts, *([urlsplit(public_url).hostname or ""] if public_url else [])])


def resolve_bind(host: str | None, port: int | str | None) -> tuple[str, int]:
    from agentenv_local.env.serve import resolve_bind as env_resolve

    host = host or os.environ.get("A2A_HOST") or DEFAULT_HOST
    if port is None:
        port = os.environ.get("A2A_PORT") or DEFAULT_PORT
    return env_resolve(host, port)


def serve(agent: Agent, host: str | None = None, port: int | None = None, *, log_level: str = "warning",
          announce: bool = True, public_url: str | None = None) -> None:
    """Serve ``agent`` over HTTP until interrupted (host/port default to $A2A_HOST/$A2A_PORT, then
    127.0.0.1:8000; port 0 = any free port). Prints the "serving on" line to stderr once listening."""
    import uvicorn

    from agentenv_local.env.serve import KEEP_ALIVE_S, bind_socket

    host, port = resolve_bind(host, port)
    sock = bind_socket(host, port)
    port = sock.getsockname()[1]
    app = create_app(agent, public_url=public_url, own_hosts=[host])
    server = uvicorn.Server(uvicorn.Config(app, log_level=log_level, lifespan="on", timeout_graceful_shutdown=3,
                                           access_log=False, timeout_keep_alive=KEEP_ALIVE_S))
    if announce:
        shown = f"[{host}]" if ":" in host else host
        print(f"agentenv agent {agent.name!r} serving on http://{shown}:{port} (card {CARD_PATHS[0]}, "
              f"a2a {RPC_PATH})", file=sys.stderr, flush=True)
    server.run(sockets=[sock])
