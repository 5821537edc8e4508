"""Who is calling a tool, and when (in the env's virtual time): the `ToolContext` handed to a tool.

The caller's role and session reach an env as MCP request `_meta` entries when a gateway proxies the call
(`agentenv.io/role`, `agentenv.io/session`), or as the `AgentEnv-Role` / `mcp-session-id` headers when
the caller reaches the env directly. A `_meta` role entry, whatever its value, marks a proxied call: the
headers then describe the gateway's connection, not the caller, and are not consulted. The role
`"default"` (a gateway's unforwarded role) and a blank role both mean "no role" (`None`).

While the gateway's virtual clock is armed it stamps `agentenv.io/virtual_time` (RFC3339) on each proxied
call; `ctx.virtual_time` is that instant (an aware datetime) or None, and `ctx.now()` falls back to the
wall clock. A REST call (extensions) may carry the same instant in the `AgentEnv-Virtual-Time` header.

The SDK binds one context per call before the tool (and `on_tool_call`) runs; code deeper down reads it
with `ToolContext.current()` (a contextvar: tasks and `asyncio.to_thread` inherit it, raw threads do not).
Outside a call `current()` returns `EMPTY`. Tests bind a caller with
`with bound(ToolContext.as_caller("alice")): ...`.

Changes: a tool (or code it calls) reports the rows it wrote with `ctx.record_change(table, op, key, before=,
after=)` (or the module-level `record_change(...)`, which records on the current call). The SDK returns the
call's rows in the result's `_meta["agentenv.io/changes"]` as `[{table, op, key, before, after}]` (at most
`MAX_CHANGES_PER_CALL`; past that `_meta["agentenv.io/changes_truncated"]` counts the rows left out), and a
gateway in front of the env takes them out, numbers them and serves them at `GET /changes`. A call that records
nothing gets no meta key. Only tool calls report changes: outside one (the data plane, extensions, no call
bound) a recorded row is validated and dropped.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import datetime as _dt
import logging
import types
import uuid
from collections.abc import Iterator, Mapping
from typing import Any, Literal

logger = logging.getLogger(__name__)

ROLE_HEADER = "AgentEnv-Role"
VIRTUAL_TIME_HEADER = "AgentEnv-Virtual-Time"
SESSION_HEADER = "mcp-session-id"
ROLE_META_KEY = "agentenv.io/role"
SESSION_META_KEY = "agentenv.io/session"
VIRTUAL_TIME_META_KEY = "agentenv.io/virtual_time"
HIDDEN_BY_DEFAULT_META_KEY = "agentenv.io/hiddenByDefault"
CHANGES_META_KEY = "agentenv.io/changes"
CHANGES_TRUNCATED_META_KEY = "agentenv.io/changes_truncated"
CHANGES_EXTENSION_URI = "urn:agentenv:changes/v1"
MAX_CHANGES_PER_CALL = 1000
CHANGE_OPS = ("insert", "update", "delete")
DEFAULT_ROLE = "default"

Transport = Literal["mcp", "rest", "inproc", "none"]


def normalize_role(value: Any) -> str | None:
    """None for absent, blank and the gateway's unforwarded role `"default"`; else the stripped role."""
    if not isinstance(value, str):
        return None
    value = value.strip()
    return None if value in ("", DEFAULT_ROLE) else value


def parse_virtual_time(value: Any) -> _dt.datetime | None:
    """An RFC3339 timestamp as an aware datetime (naive ones are taken as UTC); None when absent or unreadable."""
    if isinstance(value, _dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=_dt.UTC)
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    if text[-1:] in ("z", "Z"):
        text = text[:-1] + "+00:00"
    try:
        parsed = _dt.datetime.fromisoformat(text)
    except ValueError:
        logger.warning("ignoring unreadable virtual time %r (expected RFC3339)", value)
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=_dt.UTC)


@dataclasses.dataclass(frozen=True)
class Caller:
    """The identity a call arrived with. `role` is normalised (None = none forwarded); `raw_role` is as received."""

    role: str | None = None
    session: str | None = None
    raw_role: str | None = None

    @property
    def is_forwarded(self) -> bool:
        return self.role is not None


def _frozen(arguments: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return types.MappingProxyType(dict(arguments or {}))


def _header(headers: Any, name: str) -> str | None:
    if headers is None:
        return None
    try:
        value = headers.get(name)
        if value is None and isinstance(headers, Mapping):
            lowered = name.lower()
            value = next((v for k, v in headers.items() if isinstance(k, str) and k.lower() == lowered), None)
    except Exception:
        return None
    return value if isinstance(value, str) else None


def caller_from_request(meta: Mapping[str, Any] | None, headers: Any) -> Caller:
    """The caller of one request, from its MCP `_meta` entries and HTTP headers (see the module doc)."""
    meta = meta or {}
    forwarded = ROLE_META_KEY in meta
    raw_role = meta.get(ROLE_META_KEY) if forwarded else _header(headers, ROLE_HEADER)
    session = meta.get(SESSION_META_KEY)
    if not isinstance(session, str) or not session:
        session = None if forwarded else _header(headers, SESSION_HEADER)
    raw_role = raw_role if isinstance(raw_role, str) else None
    return Caller(role=normalize_role(raw_role), session=session or None, raw_role=raw_role)


def _json_row(value: Any, what: str) -> Any:
    from pydantic_core import PydanticSerializationError, to_jsonable_python

    try:
        return to_jsonable_python(value)
    except PydanticSerializationError as e:
        raise TypeError(f"record_change: {what} must be JSON-able, got {type(value).__name__} ({e})") from None


def change_row(table: Any, op: Any, key: Any, before: Any = None, after: Any = None) -> dict:
    """One validated change row `{table, op, key, before, after}` in JSON form (a copy: later edits of the
    dicts passed in do not change it)."""
    if not isinstance(table, str) or not table.strip():
        raise ValueError(f"record_change: table must be a non-empty string, got {table!r}")
    if op not in CHANGE_OPS:
        raise ValueError(f"record_change: op must be 'insert', 'update' or 'delete', got {op!r}")
    if key is None:
        raise ValueError("record_change: key must identify the row (its id, or a dict of its key columns), "
                         "got None")
    for name, value in (("before", before), ("after", after)):
        if value is not None and not isinstance(value, Mapping):
            raise TypeError(f"record_change: {name} must be a dict of the row's columns or None, "
                            f"got {type(value).__name__}")
    return {"table": table, "op": op, "key": _json_row(key, "key"),
            "before": None if before is None else _json_row(dict(before), "before"),
            "after": None if after is None else _json_row(dict(after), "after")}


class ChangeSet:
    """The rows one call recorded (the first `MAX_CHANGES_PER_CALL`) and how many more it left out."""

    __slots__ = ("dropped", "rows")

    def __init__(self) -> None:
        self.rows: list[dict] = []
        self.dropped = 0

    def __bool__(self) -> bool:
        return bool(self.rows or self.dropped)

    def add(self, row: dict) -> None:
        if len(self.rows) < MAX_CHANGES_PER_CALL:
            self.rows.append(row)
        else:
            self.dropped += 1

    def meta(self) -> dict:
        """The result `_meta` entries that carry these rows."""
        out: dict[str, Any] = {CHANGES_META_KEY: list(self.rows)}
        if self.dropped:
            out[CHANGES_TRUNCATED_META_KEY] = self.dropped
        return out


@dataclasses.dataclass(frozen=True)
class ToolContext:
    """What the SDK knows about one call. Hashable (keyed on `call_id` and the caller), so per-call state
    can be keyed on it; `arguments`, `meta` and `headers` stay out of the hash."""

    caller: Caller = Caller()
    tool: str = ""
    arguments: Mapping[str, Any] = dataclasses.field(default_factory=lambda: _frozen(None), hash=False,
                                                     compare=False)
    call_id: str = ""
    transport: Transport = "none"
    virtual_time: _dt.datetime | None = None
    meta: Mapping[str, Any] = dataclasses.field(default_factory=lambda: _frozen(None), hash=False, compare=False)
    headers: Any = dataclasses.field(default=None, hash=False, compare=False, repr=False)
    #: The rows this call records (None: a context that reports none, e.g. `EMPTY` or an extension call).
    changes: ChangeSet | None = dataclasses.field(default=None, hash=False, compare=False, repr=False)

    def record_change(self, table: str, op: str, key: Any, before: Mapping[str, Any] | None = None,
                      after: Mapping[str, Any] | None = None) -> None:
        """Report a row this call wrote: `op` is `insert` (give `after`), `update` (`before` and `after`) or
        `delete` (`before`); `key` identifies the row (its id, or a dict of its key columns); `before`/`after`
        are the row's JSON-able columns. Raises ValueError/TypeError on a bad row, wherever it is called; outside
        a tool call the row is dropped."""
        row = change_row(table, op, key, before, after)
        if self.changes is not None:
            self.changes.add(row)
        else:
            logger.debug("record_change outside a tool call (%s %s %r): dropped", op, table, key)

    @property
    def recorded_changes(self) -> list[dict]:
        """The rows recorded so far on this call (the first `MAX_CHANGES_PER_CALL`)."""
        return list(self.changes.rows) if self.changes is not None else []

    @property
    def role(self) -> str | None:
        return self.caller.role

    @property
    def session(self) -> str | None:
        return self.caller.session

    def now(self) -> _dt.datetime:
        """The env's notion of now: the gateway's virtual time when its clock is armed, else the wall clock (UTC)."""
        return self.virtual_time if self.virtual_time is not None else _dt.datetime.now(_dt.UTC)

    @staticmethod
    def current() -> ToolContext:
        """The context of the call this code runs on behalf of; `EMPTY` outside any call."""
        return _current.get()

    @classmethod
    def as_caller(cls, role: str | None = None, session: str | None = None, *, tool: str = "",
                  arguments: Mapping[str, Any] | None = None, virtual_time: Any = None,
                  transport: Transport = "inproc") -> ToolContext:
        """A context for tests (bind it with `bound(...)`, or pass it to a handler directly)."""
        return cls(caller=Caller(role=normalize_role(role), session=session, raw_role=role), tool=tool,
                   arguments=_frozen(arguments), call_id=uuid.uuid4().hex, transport=transport,
                   virtual_time=parse_virtual_time(virtual_time), changes=ChangeSet())

    for_test = as_caller

    @classmethod
    def from_request(cls, tool: str, arguments: Mapping[str, Any] | None, *, meta: Mapping[str, Any] | None,
                     headers: Any, transport: Transport) -> ToolContext:
        """The context of one incoming call (MCP `_meta` + HTTP headers)."""
        meta = meta or {}
        raw_time = meta.get(VIRTUAL_TIME_META_KEY)
        if raw_time is None and ROLE_META_KEY not in meta:
            raw_time = _header(headers, VIRTUAL_TIME_HEADER)
        return cls(caller=caller_from_request(meta, headers), tool=tool, arguments=_frozen(arguments),
                   call_id=uuid.uuid4().hex, transport=transport, virtual_time=parse_virtual_time(raw_time),
                   meta=_frozen(meta), headers=headers, changes=None if transport == "rest" else ChangeSet())

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.is_instance_schema(cls)


EMPTY = ToolContext()

_current: contextvars.ContextVar[ToolContext] = contextvars.ContextVar("agentenv_local.env.tool_context",
                                                                      default=EMPTY)


def record_change(table: str, op: str, key: Any, before: Mapping[str, Any] | None = None,
                  after: Mapping[str, Any] | None = None) -> None:
    """`ToolContext.current().record_change(...)`: report a row the current tool call wrote."""
    _current.get().record_change(table, op, key, before, after)


@contextlib.contextmanager
def bound(context: ToolContext) -> Iterator[ToolContext]:
    """Bind `context` as the current one for the block, restoring the previous binding after."""
    token = _current.set(context)
    try:
        yield context
    finally:
        _current.reset(token)
