"""The mailbox actor between the hub and its Ray workers, and the store a worker sees through it.

A worker's runner calls `store.runs.journal_append(...)` and the rest as it would in the hub; each call is
one `HubMailbox.call` that waits until the hub's bridge has taken it, run it against the real store and
answered. Calls of one worker are answered in the order they were made (a worker waits for each answer),
so a step's journal entry is in the hub's store before the worker goes on. Object bytes come back as an
`ObjectRef` that the hub put into Ray's object store once per key (objects are write-once), so each
artifact version travels to a node once.
"""

from __future__ import annotations

import asyncio
import itertools
from functools import lru_cache
from typing import Any

from agentenv_local.errors import from_wire

# The store methods a worker may call, by sub-store: what the runner and the steps use.
WORKER_STORE_METHODS: dict[str, frozenset[str]] = {
    "documents": frozenset({"find", "get", "latest_version", "put", "query", "versions"}),
    "records": frozenset({"delete", "find", "get", "query", "save"}),
    "runs": frozenset({"find", "get", "journal", "journal_append", "update"}),
    "events": frozenset({"append", "append_many", "flush", "query"}),
    "objects": frozenset({"exists", "get", "list", "metadata", "put"}),
}


class HubMailbox:
    """The actor's state (made a Ray actor by `mailbox_class`): calls waiting for the hub, answers waiting for
    workers, and the runs the hub asked to cancel. An async actor: every waiting call is a coroutine."""

    def __init__(self) -> None:
        self._calls: asyncio.Queue[tuple[int, str, str, list, dict]] = asyncio.Queue()
        self._waiting: dict[int, asyncio.Future] = {}
        self._ids = itertools.count(1)
        self._cancelled: set[str] = set()

    async def call(self, run_id: str, method: str, args: list, kwargs: dict) -> tuple[bool, Any]:
        """A worker's store call: (True, result) or (False, the error's wire form)."""
        call_id = next(self._ids)
        answer = asyncio.get_running_loop().create_future()
        self._waiting[call_id] = answer
        await self._calls.put((call_id, run_id, method, args, kwargs))
        return await answer

    async def take(self, timeout: float = 0.5, at_most: int = 256) -> list[tuple[int, str, str, list, dict]]:
        """The hub's long poll: the calls waiting, in the order they came (empty after `timeout`)."""
        try:
            first = await asyncio.wait_for(self._calls.get(), timeout)
        except TimeoutError:
            return []
        batch = [first]
        while len(batch) < at_most and not self._calls.empty():
            batch.append(self._calls.get_nowait())
        return batch

    async def answer(self, answers: list[tuple[int, bool, Any]]) -> None:
        for call_id, ok, value in answers:
            waiting = self._waiting.pop(call_id, None)
            if waiting is not None and not waiting.done():
                waiting.set_result((ok, value))

    async def cancel(self, run_id: str) -> None:
        self._cancelled.add(run_id)

    async def is_cancelled(self, run_id: str) -> bool:
        return run_id in self._cancelled


@lru_cache(maxsize=1)
def mailbox_class() -> Any:
    """`HubMailbox` as a Ray actor class (made on first use: importing this module never imports Ray). It
    takes no CPU: it only passes messages."""
    import ray

    return ray.remote(num_cpus=0)(HubMailbox)


class _SubStore:
    def __init__(self, store: "MailboxStore", namespace: str):
        self._store, self._namespace = store, namespace
        self._methods = WORKER_STORE_METHODS[namespace]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in self._methods:
            raise AttributeError(f"a Ray worker's {self._namespace} store has no method {name!r}: the hub does "
                                 "not take that call from workers")
        return lambda *args, **kwargs: self._store.call(f"{self._namespace}.{name}", list(args), kwargs)


class MailboxStore:
    """The hub's store as a worker sees it: every call goes through the mailbox and waits for its answer."""

    documents: Any
    records: Any
    runs: Any
    events: Any
    objects: Any

    def __init__(self, mailbox: Any, run_id: str, timeout_s: float = 120.0):
        self._mailbox, self._run_id, self._timeout_s = mailbox, run_id, timeout_s
        self._objects: dict[str, bytes] = {}  # write-once objects this worker has read
        for namespace in WORKER_STORE_METHODS:
            setattr(self, namespace, _SubStore(self, namespace))

    def call(self, method: str, args: list, kwargs: dict) -> Any:
        import ray

        if method == "objects.get" and args and args[0] in self._objects:
            return self._objects[args[0]]
        ok, value = ray.get(self._mailbox.call.remote(self._run_id, method, args, kwargs), timeout=self._timeout_s)
        if not ok:
            raise from_wire(value)
        if method == "objects.get" and isinstance(value, ray.ObjectRef):
            data = ray.get(value, timeout=self._timeout_s)
            self._objects[args[0]] = data
            return data
        return value

    def cancelled(self) -> bool:
        """Whether the hub asked to cancel this worker's run."""
        import ray

        return bool(ray.get(self._mailbox.is_cancelled.remote(self._run_id), timeout=self._timeout_s))
