"""A2A on the wire, in both dialects: 0.3 (what the reference's agents speak) and 1.0.

0.3 JSON-RPC methods ``message/send``, ``tasks/get``, ``tasks/cancel`` (and ``tasks/list``, see METHODS_03); parts
carry ``kind`` (``{"kind": "text", "text"}``, ``{"kind": "data", "data"}``, ``{"kind": "file", "file":
{"bytes"|"uri", "name", "mimeType"}}``); states are lowercase (``completed``, ``input-required``); a task has
``"kind": "task"``; ``configuration.blocking`` (default true) says whether ``message/send`` waits.

1.0 methods ``SendMessage``, ``GetTask``, ``CancelTask``, ``ListTasks``; parts have no ``kind`` (``{"text"}``,
``{"data"}``, ``{"raw": base64 | "url", "filename", "mediaType"}``); states are ``TASK_STATE_COMPLETED`` etc.; roles
``ROLE_USER``/``ROLE_AGENT``; ``configuration.returnImmediately`` (default false) replaces ``blocking``; the
``SendMessage`` result wraps the task: ``{"task": {...}}``.

Parsing raises ``WireError(path, message)`` naming the offending field (``params.message.parts[0].kind``).
"""

from __future__ import annotations

from typing import Any, Literal

# JSON-RPC's standard codes, re-exported for the A2A server and client
from agentenv_local.jsonrpc import INTERNAL_ERROR as INTERNAL_ERROR
from agentenv_local.jsonrpc import INVALID_PARAMS as INVALID_PARAMS
from agentenv_local.jsonrpc import INVALID_REQUEST as INVALID_REQUEST
from agentenv_local.jsonrpc import METHOD_NOT_FOUND as METHOD_NOT_FOUND
from agentenv_local.jsonrpc import PARSE_ERROR as PARSE_ERROR

from .types import DataPart, FilePart, TextPart

Dialect = Literal["0.3", "1.0"]

STATES_03 = ("submitted", "working", "input-required", "completed", "canceled", "failed", "rejected",
             "auth-required", "unknown")
TERMINAL_STATES = frozenset({"completed", "canceled", "failed", "rejected"})
_STATE_10 = {s: "TASK_STATE_" + s.upper().replace("-", "_") for s in STATES_03}
_STATE_10["unknown"] = "TASK_STATE_UNSPECIFIED"
_STATE_FROM_10 = {v: k for k, v in _STATE_10.items()}
_ROLE_10 = {"user": "ROLE_USER", "agent": "ROLE_AGENT"}
_ROLE_FROM_10 = {v: k for k, v in _ROLE_10.items()}

# JSON-RPC method -> operation, per dialect (the streaming ones are in streaming.METHODS). 0.3 has no list method:
# ``tasks/list`` answers ListTasks in 0.3 shapes for clients that send it anyway.
METHODS_03 = {"message/send": "send", "tasks/get": "get", "tasks/cancel": "cancel", "tasks/list": "list",
              "tasks/pushNotificationConfig/set": "push_config", "tasks/pushNotificationConfig/get": "push_config",
              "tasks/pushNotificationConfig/list": "push_config",
              "tasks/pushNotificationConfig/delete": "push_config",
              "agent/getAuthenticatedExtendedCard": "extended_card"}
METHODS_10 = {"SendMessage": "send", "GetTask": "get", "CancelTask": "cancel", "ListTasks": "list",
              "CreateTaskPushNotificationConfig": "push_config", "GetTaskPushNotificationConfig": "push_config",
              "ListTaskPushNotificationConfigs": "push_config", "DeleteTaskPushNotificationConfig": "push_config",
              "GetExtendedAgentCard": "extended_card"}

# A2A's own error codes (the same in 0.3 and 1.0)
TASK_NOT_FOUND = -32001
TASK_NOT_CANCELABLE = -32002
PUSH_NOTIFICATION_NOT_SUPPORTED = -32003
UNSUPPORTED_OPERATION = -32004
EXTENDED_CARD_NOT_CONFIGURED = -32007


class WireError(ValueError):
    """A malformed A2A payload; ``path`` names the field (``params.message.role``)."""

    def __init__(self, path: str, message: str):
        super().__init__(f"{path}: {message}")
        self.path = path
        self.reason = message


def state_to_wire(state: str, dialect: Dialect) -> str:
    return state if dialect == "0.3" else _STATE_10[state]


def state_from_wire(value: Any, path: str) -> str:
    """Either dialect's state name -> the 0.3 name."""
    if not isinstance(value, str):
        raise WireError(path, "is missing" if value is None else f"must be a string, got {type(value).__name__}")
    if value in STATES_03:
        return value
    if value in _STATE_FROM_10:
        return _STATE_FROM_10[value]
    raise WireError(path, f"unknown task state {value!r}")


# --- parts -----------------------------------------------------------------------------------------------

def part_to_wire(part: Any, dialect: Dialect) -> dict[str, Any]:
    meta = {"metadata": dict(part.metadata)} if part.metadata else {}
    if dialect == "0.3":
        if isinstance(part, TextPart):
            return {"kind": "text", "text": part.text, **meta}
        if isinstance(part, DataPart):
            return {"kind": "data", "data": part.data, **meta}
        file: dict[str, Any] = {"bytes": part.bytes} if part.bytes is not None else {"uri": part.uri}
        if part.name is not None:
            file["name"] = part.name
        if part.mime_type is not None:
            file["mimeType"] = part.mime_type
        return {"kind": "file", "file": file, **meta}
    if isinstance(part, TextPart):
        return {"text": part.text, **meta}
    if isinstance(part, DataPart):
        return {"data": part.data, **meta}
    out: dict[str, Any] = {"raw": part.bytes} if part.bytes is not None else {"url": part.uri}
    if part.name is not None:
        out["filename"] = part.name
    if part.mime_type is not None:
        out["mediaType"] = part.mime_type
    return {**out, **meta}


def _opt_str(obj: dict, key: str, path: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise WireError(f"{path}.{key}", "must be a string")
    return value


def _metadata(obj: dict, path: str) -> dict[str, Any]:
    value = obj.get("metadata")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise WireError(f"{path}.metadata", "must be an object")
    return value


def part_from_wire(obj: Any, path: str, dialect: Dialect | None = None) -> Any:
    """A part in either dialect (``kind`` decides when present) -> TextPart / DataPart / FilePart."""
    if not isinstance(obj, dict):
        raise WireError(path, "must be an object")
    kind = obj.get("kind")
    meta = _metadata(obj, path)
    if kind is None and dialect == "0.3":
        raise WireError(f"{path}.kind", "is missing (expected 'text', 'data' or 'file')")
    if kind is not None:
        if kind == "text":
            if not isinstance(obj.get("text"), str):
                raise WireError(f"{path}.text", "must be a string")
            return TextPart(text=obj["text"], metadata=meta)
        if kind == "data":
            if not isinstance(obj.get("data"), dict):
                raise WireError(f"{path}.data", "must be an object")
            return DataPart(data=obj["data"], metadata=meta)
        if kind == "file":
            file = obj.get("file")
            if not isinstance(file, dict):
                raise WireError(f"{path}.file", "must be an object")
            raw, uri = _opt_str(file, "bytes", f"{path}.file"), _opt_str(file, "uri", f"{path}.file")
            if (raw is None) == (uri is None):
                raise WireError(f"{path}.file", "needs exactly one of 'bytes' or 'uri'")
            return FilePart(bytes=raw, uri=uri, name=_opt_str(file, "name", f"{path}.file"),
                            mime_type=_opt_str(file, "mimeType", f"{path}.file"), metadata=meta)
        raise WireError(f"{path}.kind", f"unknown part kind {kind!r} (expected 'text', 'data' or 'file')")
    # 1.0: the member present decides
    if "text" in obj:
        if not isinstance(obj["text"], str):
            raise WireError(f"{path}.text", "must be a string")
        return TextPart(text=obj["text"], metadata=meta)
    if "data" in obj:
        data = obj["data"]
        return DataPart(data=data if isinstance(data, dict) else {"value": data}, metadata=meta)
    if "raw" in obj or "url" in obj:
        raw, url = _opt_str(obj, "raw", path), _opt_str(obj, "url", path)
        if (raw is None) == (url is None):
            raise WireError(path, "needs exactly one of 'raw' or 'url'")
        return FilePart(bytes=raw, uri=url, name=_opt_str(obj, "filename", path),
                        mime_type=_opt_str(obj, "mediaType", path), metadata=meta)
    raise WireError(path, "has none of 'text', 'data', 'raw' or 'url'")


def parts_from_wire(value: Any, path: str, dialect: Dialect | None = None, *, required: bool = True) -> list:
    if value is None and not required:
        return []
    if not isinstance(value, list):
        raise WireError(path, "is missing" if value is None else "must be a list")
    return [part_from_wire(p, f"{path}[{i}]", dialect) for i, p in enumerate(value)]


# --- messages --------------------------------------------------------------------------------------------

class WireMessage:
    """A message (user or agent) in dialect-neutral form."""

    __slots__ = ("context_id", "message_id", "metadata", "parts", "role", "task_id")

    def __init__(self, message_id: str, role: str, parts: list, context_id: str | None = None,
                 task_id: str | None = None, metadata: dict | None = None):
        self.message_id = message_id
        self.role = role
        self.parts = parts
        self.context_id = context_id
        self.task_id = task_id
        self.metadata = metadata or {}

    def to_wire(self, dialect: Dialect) -> dict[str, Any]:
        out: dict[str, Any] = {"messageId": self.message_id,
                               "role": self.role if dialect == "0.3" else _ROLE_10[self.role],
                               "parts": [part_to_wire(p, dialect) for p in self.parts]}
        if self.context_id:
            out["contextId"] = self.context_id
        if self.task_id:
            out["taskId"] = self.task_id
        if self.metadata:
            out["metadata"] = self.metadata
        if dialect == "0.3":
            out["kind"] = "message"
        return out


def message_from_wire(obj: Any, path: str, dialect: Dialect | None) -> WireMessage:
    if not isinstance(obj, dict):
        raise WireError(path, "is missing" if obj is None else "must be an object")
    role = obj.get("role")
    if role in _ROLE_FROM_10:
        role = _ROLE_FROM_10[role]
    if role not in ("user", "agent"):
        expected = "'user' or 'agent'" if dialect != "1.0" else "'ROLE_USER' or 'ROLE_AGENT'"
        raise WireError(f"{path}.role", "is missing" if role is None else f"must be {expected}, got {role!r}")
    message_id = obj.get("messageId")
    if not isinstance(message_id, str) or not message_id:
        raise WireError(f"{path}.messageId", "is missing" if message_id is None else "must be a non-empty string")
    parts = parts_from_wire(obj.get("parts"), f"{path}.parts", dialect)
    return WireMessage(message_id, role, parts, context_id=_opt_str(obj, "contextId", path),
                       task_id=_opt_str(obj, "taskId", path), metadata=_metadata(obj, path))


# --- request params --------------------------------------------------------------------------------------

class SendParams:
    __slots__ = ("blocking", "history_length", "message", "metadata")

    def __init__(self, message: WireMessage, blocking: bool, history_length: int | None, metadata: dict):
        self.message = message
        self.blocking = blocking
        self.history_length = history_length
        self.metadata = metadata


def _params(params: Any) -> dict:
    if not isinstance(params, dict):
        raise WireError("params", "is missing" if params is None else "must be an object")
    return params


def _history_length(obj: dict, path: str) -> int | None:
    value = obj.get("historyLength")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise WireError(f"{path}.historyLength", "must be a non-negative integer")
    return value


def send_params_from_wire(params: Any, dialect: Dialect) -> SendParams:
    params = _params(params)
    message = message_from_wire(params.get("message"), "params.message", dialect)
    if message.role != "user":
        raise WireError("params.message.role", "must be the user's role")
    if not message.parts:
        raise WireError("params.message.parts", "must not be empty")
    config = params.get("configuration") or {}
    if not isinstance(config, dict):
        raise WireError("params.configuration", "must be an object")
    if dialect == "0.3":
        blocking = config.get("blocking")
        if blocking is not None and not isinstance(blocking, bool):
            raise WireError("params.configuration.blocking", "must be a boolean")
        blocking = blocking is not False
    else:
        immediate = config.get("returnImmediately")
        if immediate is not None and not isinstance(immediate, bool):
            raise WireError("params.configuration.returnImmediately", "must be a boolean")
        blocking = not immediate
    return SendParams(message, blocking, _history_length(config, "params.configuration"),
                      _metadata(params, "params"))


def task_id_from_wire(params: Any) -> tuple[str, int | None]:
    params = _params(params)
    task_id = params.get("id")
    if not isinstance(task_id, str) or not task_id:
        raise WireError("params.id", "is missing" if task_id is None else "must be a non-empty string")
    return task_id, _history_length(params, "params")
