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

from .run_worker import RemoteStore


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


class MailboxStore(RemoteStore):
    """The hub's store as a worker sees it: every call goes through the mailbox and waits for its answer."""

    def __init__(self, mailbox: Any, run_id: str, timeout_s: float = 120.0):
        super().__init__(self._through_mailbox)  # which keeps the write-once objects this worker has read
        self._mailbox, self._run_id, self._timeout_s = mailbox, run_id, timeout_s

    def _through_mailbox(self, method: str, args: list, kwargs: dict) -> Any:
        import ray

        ok, value = ray.get(self._mailbox.call.remote(self._run_id, method, args, kwargs), timeout=self._timeout_s)
        if not ok:
            raise from_wire(value)
        if method == "objects.get" and isinstance(value, ray.ObjectRef):
            return ray.get(value, timeout=self._timeout_s)
        return value

    def cancelled(self) -> bool:
        """Whether the hub asked to cancel this worker's run."""
        import ray

        return bool(ray.get(self._mailbox.is_cancelled.remote(self._run_id), timeout=self._timeout_s))
