"""A run's state in its step journal: whole in the seed entry, then only what each step changed.

A journal entry used to carry a copy of the whole state (about 20 KB for a `support` episode, ten times an
episode), written and stored once per step. Now an entry carries `state_changes` (each top-level key of the
state whose value changed since the entry before it, with its new value) and `state_removed` (the keys that
went); `journal_state` rebuilds the state at any point by applying them in order. An entry with a whole
`state` (the seed, `--start-step`'s skipped steps, and journals written before this) replaces it outright, so
old journals read as they did.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from typing import Any


def _encoded(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))


class StateTracker:
    """What the journal holds of one run's state so far, to write the next entry's changes against."""

    def __init__(self, state: dict):
        self._seen = {key: _encoded(value) for key, value in state.items()}

    def changes(self, state: dict) -> dict[str, Any]:
        """The journal entry's part for `state` as it is now (copies: the state goes on changing), and from now on
        what the journal holds."""
        encoded = {key: _encoded(value) for key, value in state.items()}
        changed = {key: copy.deepcopy(state[key]) for key, text in encoded.items() if self._seen.get(key) != text}
        removed = sorted(key for key in self._seen if key not in encoded)
        self._seen = encoded
        return {"state_changes": changed, **({"state_removed": removed} if removed else {})}


def apply_entry(state: dict, body: dict) -> dict:
    """`state` after a journal entry's `body` (a new dict when the entry carries a whole state)."""
    if isinstance(body.get("state"), dict):
        return dict(body["state"])
    changes = body.get("state_changes")
    if isinstance(changes, dict):
        state.update(changes)
        for key in body.get("state_removed") or ():
            state.pop(key, None)
    return state


def journal_state(entries: Iterable[dict], start: dict | None = None) -> dict:
    """The run's state as its journal (entries in order, as `runs.journal` returns them) last recorded it."""
    state: dict = start if start is not None else {}
    for entry in entries:
        state = apply_entry(state, entry.get("body") or {})
    return state
