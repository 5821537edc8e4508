"""``ListTasks`` (A2A 1.0; also answered as ``tasks/list`` in the 0.3 dialect, which has no list method of its own).

Params (all optional): ``contextId``, ``status`` (either dialect's state name; ``TASK_STATE_UNSPECIFIED`` = any),
``pageSize`` (1..100, default 50), ``pageToken`` (from a previous page's ``nextPageToken``), ``historyLength``,
``statusTimestampAfter`` (RFC 3339: tasks whose status changed at or after it), ``includeArtifacts`` (default
false: the artifacts are left out, as the spec says).

The result is ``{"tasks", "nextPageToken", "pageSize", "totalSize"}``, newest status first (ties by task id).
``nextPageToken`` is empty on the last page. The token names the last task returned (its status time and id), not
an offset, so it stays valid when tasks are added or forgotten between pages.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Protocol

from . import wire

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 100


class ListedTask(Protocol):
    id: str
    context_id: str
    state: str
    timestamp: str

    def to_wire(self, dialect: wire.Dialect, history_length: int | None = None) -> dict[str, Any]: ...


class ListParams:
    __slots__ = ("after", "context_id", "history_length", "include_artifacts", "page_size", "page_token", "state")

    def __init__(self, *, context_id: str | None, state: str | None, page_size: int,
                 page_token: tuple[str, str] | None, history_length: int | None, after: datetime | None,
                 include_artifacts: bool):
        self.context_id = context_id
        self.state = state
        self.page_size = page_size
        self.page_token = page_token
        self.history_length = history_length
        self.after = after
        self.include_artifacts = include_artifacts


def encode_token(timestamp: str, task_id: str) -> str:
    return base64.urlsafe_b64encode(json.dumps([timestamp, task_id]).encode()).decode().rstrip("=")


def _decode_token(token: str) -> tuple[str, str]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        value = json.loads(raw)
    except (binascii.Error, ValueError):
        value = None
    if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value)):
        raise wire.WireError("params.pageToken", "is not a token this agent gave: pass a previous page's "
                                                 "nextPageToken, or leave it out for the first page")
    return value[0], value[1]


def _timestamp(value: str, path: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise wire.WireError(path, f"must be an RFC 3339 timestamp such as 2026-01-31T12:00:00Z, got {value!r}") \
            from None
    if parsed.tzinfo is None:
        raise wire.WireError(path, f"needs a time zone (e.g. a trailing Z), got {value!r}")
    return parsed


def params_from_wire(params: Any) -> ListParams:
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise wire.WireError("params", "must be an object")
    context_id = params.get("contextId")
    if context_id is not None and not isinstance(context_id, str):
        raise wire.WireError("params.contextId", "must be a string")
    state = params.get("status")
    if state is not None:
        state = wire.state_from_wire(state, "params.status")
        state = None if state == "unknown" else state   # TASK_STATE_UNSPECIFIED: no filter
    page_size = params.get("pageSize")
    if page_size is None:
        page_size = DEFAULT_PAGE_SIZE
    elif isinstance(page_size, bool) or not isinstance(page_size, int) or not 1 <= page_size <= MAX_PAGE_SIZE:
        raise wire.WireError("params.pageSize", f"must be an integer from 1 to {MAX_PAGE_SIZE}")
    token = params.get("pageToken")
    if token is not None and not isinstance(token, str):
        raise wire.WireError("params.pageToken", "must be a string")
    history_length = params.get("historyLength")
    if history_length is not None and (isinstance(history_length, bool) or not isinstance(history_length, int)
                                       or history_length < 0):
        raise wire.WireError("params.historyLength", "must be a non-negative integer")
    after = params.get("statusTimestampAfter")
    if after is not None and not isinstance(after, str):
        raise wire.WireError("params.statusTimestampAfter", "must be an RFC 3339 timestamp string")
    include = params.get("includeArtifacts", False)
    if not isinstance(include, bool):
        raise wire.WireError("params.includeArtifacts", "must be a boolean")
    return ListParams(context_id=context_id or None, state=state, page_size=page_size,
                      page_token=_decode_token(token) if token else None, history_length=history_length,
                      after=_timestamp(after, "params.statusTimestampAfter") if after else None,
                      include_artifacts=include)


def _sort_key(task: ListedTask) -> tuple[datetime, str]:
    # parsed, not compared as text: isoformat() leaves out a zero microsecond part
    return _timestamp(task.timestamp, "timestamp"), task.id


def list_tasks(tasks: Iterable[ListedTask], params: ListParams, dialect: wire.Dialect) -> dict[str, Any]:
    """One page of ``tasks`` matching ``params``, in ``dialect``'s shapes."""
    chosen = [t for t in tasks
              if (params.context_id is None or t.context_id == params.context_id)
              and (params.state is None or t.state == params.state)
              and (params.after is None or _timestamp(t.timestamp, "timestamp") >= params.after)]
    chosen.sort(key=_sort_key, reverse=True)
    total = len(chosen)
    if params.page_token is not None:
        stamp, task_id = params.page_token
        cursor = (_timestamp(stamp, "params.pageToken"), task_id)
        chosen = [t for t in chosen if _sort_key(t) < cursor]
    page, rest = chosen[:params.page_size], chosen[params.page_size:]
    out = []
    for task in page:
        shown = task.to_wire(dialect, params.history_length)
        if not params.include_artifacts:
            shown.pop("artifacts", None)
        out.append(shown)
    next_token = encode_token(page[-1].timestamp, page[-1].id) if rest else ""
    return {"tasks": out, "nextPageToken": next_token, "pageSize": params.page_size, "totalSize": total}
