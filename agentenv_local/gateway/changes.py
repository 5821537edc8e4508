"""The gateway's changelog (`urn:agentenv:changes/v1`, `GET /changes`): the rows its children's tool calls
changed, numbered gateway-wide and each attributed to the one call that made it.

The reference fills a Postgres `_changelog` table by DB triggers and joins its rows to per-call id windows
(exact only in `consistent` mode). Here the env itself reports the rows a call changed, in that call's result
`_meta["agentenv.io/changes"]` (`[{table, op, key, before, after}]`, see agentenv_local/env/context.py), so the
gateway attributes every row to exactly the call whose result carried it, in either mode.

`ChangeLog.absorb(server, result, actor)` takes the rows out of the result (the agent never sees them), gives
each the next id (from 1), and stamps it::

    {"id": 7, "server": "crm", "table": "deals", "op": "update", "key": "deal-2",
     "before": {...}, "after": {...}, "timestamp_utc": "...", "virtual_time": "..." (clock armed),
     "actors": [{"event_type": "tool_call", "role": "alice", "tool": "update_deal_stage",
                 "tool_call_event_id": "event_3", "source": "step_api"?, "caused_by": [...]?}],
     "truncated": 12 (on the last row of a call whose env left rows out)}

It answers `(changelog_id_before, changelog_id)`: the head before and after (both None while the gateway keeps
no changelog). The gateway keeps one once a child declares it (its card advertises `urn:agentenv:changes/v1`;
an in-process `Env` with `keeps_changelog = True`) or once any row has been absorbed. Memory is bounded: the
newest `CHANGES_MAX_ROWS` rows are kept; ids keep counting.
"""

from __future__ import annotations

import itertools
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from .clock import wall_timestamp

logger = logging.getLogger(__name__)

# The keys and ops an env's SDK writes (agentenv_local/env/context.py); stated again rather than imported so
# the gateway stays off the env package's import cost. The tests drive SDK envs through the gateway.
CHANGES_URI = "urn:agentenv:changes/v1"
CHANGES_META_PREFIX = "agentenv.io/changes"
CHANGES_META_KEY = "agentenv.io/changes"
CHANGES_TRUNCATED_META_KEY = "agentenv.io/changes_truncated"
CHANGES_MAX_ROWS = 100_000  # kept in memory, like the trajectory's TRAJECTORY_MAX_EVENTS
PAGE_DEFAULT_LIMIT = 1000
PAGE_MAX_LIMIT = 10_000
NO_CHANGELOG = "this env keeps no changelog"
_OPS = frozenset({"insert", "update", "delete"})


class ChangesError(ValueError):
    """A bad `/changes` query: answer ``status`` with ``{"ok": false, "error": message}``."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message

    def to_wire(self) -> dict:
        return {"ok": False, "error": self.message}


def _int_param(name: str, raw: str | None, default: int, low: int, high: int | None) -> int:
    if raw is None:
        return default
    text = raw.strip()
    try:
        value = int(text, 10)
    except ValueError:
        value = None
    span = f"between {low} and {high}" if high is not None else f"{low} or more"
    if value is None:
        raise ChangesError(400, f"{name} must be an integer {span}, got {raw!r}")
    if value < low or (high is not None and value > high):
        raise ChangesError(400, f"{name} must be {span}, got {value}")
    return value


def page_params(after_id: str | None, limit: str | None) -> tuple[int, int]:
    """`GET /changes` query values -> (after_id, limit); ChangesError 400 on a bad one."""
    return (_int_param("after_id", after_id, 0, 0, None),
            _int_param("limit", limit, PAGE_DEFAULT_LIMIT, 1, PAGE_MAX_LIMIT))


def card_keeps_changelog(card: Any) -> bool:
    """Whether an env card (wire dict) advertises `urn:agentenv:changes/v1`."""
    if not isinstance(card, dict):
        return False
    extensions = (card.get("capabilities") or {}).get("extensions") or []
    return any(isinstance(e, dict) and e.get("uri") == CHANGES_URI for e in extensions)


class ChangeLog:
    def __init__(self, children: Iterable[Any] = (), *, max_rows: int = CHANGES_MAX_ROWS,
                 clock: Any = None):
        """``children``: the gateway's children (an in-process env child declares with its class's
        ``keeps_changelog``; the others are learnt from their cards, see :meth:`learn`); ``clock``: the gateway's
        VirtualClock (rows get its ``virtual_time`` while it is armed; read only when rows arrive)."""
        self.keepers: set[str] = {c.name for c in children
                                  if getattr(getattr(c, "env", None), "keeps_changelog", False) is True}
        self._rows: deque[dict] = deque(maxlen=max_rows)
        self._head = 0
        self._clock = clock

    # --- whether the gateway keeps one -------------------------------------------------------------------------

    @property
    def keeps(self) -> bool:
        return bool(self.keepers) or self._head > 0

    def note_card(self, server: str, card: Any) -> None:
        """Learn from a child's card whether it keeps a changelog."""
        if card_keeps_changelog(card):
            self.keepers.add(server)

    async def learn(self, children: Iterable[Any], fetch_card: Callable[[Any], Awaitable[dict | None]]) -> None:
        """Read each child's card (``fetch_card(child)``, e.g. ``Gateway.child_card``) to learn which keep a
        changelog; a card that cannot be read teaches nothing."""
        import asyncio

        children = [c for c in children if c.name not in self.keepers]
        cards = await asyncio.gather(*(fetch_card(c) for c in children), return_exceptions=True)
        for child, card in zip(children, cards, strict=True):
            if isinstance(card, dict):
                self.note_card(child.name, card)

    # --- rows ----------------------------------------------------------------------------------------------------

    def head(self) -> int:
        """The id of the newest row (0 before the first)."""
        return self._head

    def head_or_none(self) -> int | None:
        """`changelog_id` as /state and /step answer it: the head, or None while no changelog is kept."""
        return self._head if self.keeps else None

    def absorb(self, server: str, result: Any, actor: dict) -> tuple[int | None, int | None]:
        """Take the change rows out of a child's tool-call ``result`` (its ``_meta`` loses the
        ``agentenv.io/changes*`` entries, and ``_meta`` itself when nothing else is left), number and stamp them,
        attribute them to ``actor``. Answers ``(changelog_id_before, changelog_id)``."""
        meta = result.get("_meta") if type(result) is dict else None
        if not meta or type(meta) is not dict or not any(k.startswith(CHANGES_META_PREFIX) for k in meta):
            head = self.head_or_none()
            return head, head
        rows = meta.get(CHANGES_META_KEY)
        truncated = meta.get(CHANGES_TRUNCATED_META_KEY)
        rest = {k: v for k, v in meta.items() if not k.startswith(CHANGES_META_PREFIX)}
        if rest:
            result["_meta"] = rest
        else:
            del result["_meta"]
        self.keepers.add(server)
        before = self._head
        if not isinstance(rows, list):
            if rows is not None:
                logger.warning("changelog: server %s sent %s as %s, not a list; ignored", server, CHANGES_META_KEY,
                               type(rows).__name__)
            rows = []
        stamp = wall_timestamp()
        clock = self._clock
        virtual = clock.virtual_timestamp() if rows and clock is not None and clock.armed else None
        last: dict | None = None
        for raw in rows:
            row = self._row(server, raw)
            if row is None:
                continue
            self._head += 1
            row = {"id": self._head, "server": server, **row, "timestamp_utc": stamp}
            if virtual is not None:
                row["virtual_time"] = virtual
            row["actors"] = [actor]
            self._rows.append(row)
            last = row
        if isinstance(truncated, int) and not isinstance(truncated, bool) and truncated > 0:
            logger.warning("changelog: server %s left %d changed row(s) of %s out (over its per-call cap)", server,
                           truncated, actor.get("tool"))
            if last is not None:
                last["truncated"] = truncated
        return before, self._head

    @staticmethod
    def _row(server: str, raw: Any) -> dict | None:
        if not isinstance(raw, dict) or not isinstance(raw.get("table"), str) or raw.get("op") not in _OPS:
            logger.warning("changelog: server %s sent a malformed change row (needs table and op "
                           "insert|update|delete); ignored: %.300r", server, raw)
            return None
        return {"table": raw["table"], "op": raw["op"], "key": raw.get("key"), "before": raw.get("before"),
                "after": raw.get("after")}

    def page(self, after_id: int = 0, limit: int = PAGE_DEFAULT_LIMIT) -> dict:
        """The rows with ids above ``after_id``, oldest first, at most ``limit``: ``{"changes": [...],
        "changelog_id": head, "next_after_id": the last id given (else after_id), "has_more": bool,
        "oldest_id": the oldest row still kept (None: none)}``."""
        oldest = self._rows[0]["id"] if self._rows else None
        start = 0 if oldest is None else max(0, after_id - oldest + 1)
        rows = list(itertools.islice(self._rows, start, start + limit))
        last = rows[-1]["id"] if rows else max(after_id, 0)
        return {"changes": rows, "changelog_id": self._head, "next_after_id": last,
                "has_more": bool(rows) and last < self._head, "oldest_id": oldest}
