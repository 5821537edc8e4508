"""One writer thread for the store's run writes, so the hub's event loop never waits on DuckDB.

The runner hands it the run updates and journal appends of every step (`submit` returns a
`concurrent.futures.Future`). Writes run one after another in the order they were submitted; the ones
queued while a batch was written go together into the next one, inside one transaction under the
store's lock: one commit (one WAL sync) for many rows instead of one each. A write's future is done
only once its batch has committed, so a caller that awaits it knows the row is on disk; readers on
other threads take the same lock, so they see a batch whole or not at all.

When one write of a batch fails, the batch is rolled back and its writes are run again one at a
time, so only the failing one reports the error (the others are not lost).
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from typing import Any, Callable

from agentenv_local.errors import StoreError

from .duckdb_engine import duckdb

MAX_BATCH = 64  # writes per transaction: enough to amortise the commit, few enough that the lock is held briefly

_Item = tuple[Callable[[], Any], Future]


class StoreWriter:
    def __init__(self, con: duckdb.DuckDBPyConnection, lock: threading.RLock, name: str = "store-writer",
                 keeper: Any = None):
        self._con = con
        self._lock = lock
        # What a store keeps in memory of its writes (RunStore): saved as a batch begins, put back if it rolls back.
        self._keeper = keeper
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._closed = False
        self._submit_lock = threading.Lock()
        self.batches = 0  # how many transactions were committed (the tests count them)
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future:
        """Queue `fn(*args, **kwargs)` (store calls that write); its future holds the result once committed."""
        future: Future = Future()
        with self._submit_lock:
            if self._closed:
                raise StoreError("the store is closed; the write was not made",
                                 hint="the hub is stopping: run the command again once it has")
            self._queue.put((lambda: fn(*args, **kwargs), future))
        return future

    def close(self, timeout: float = 30) -> None:
        """Write what is queued, then stop the thread."""
        with self._submit_lock:
            if self._closed:
                return
            self._closed = True
            self._queue.put(None)
        self._thread.join(timeout=timeout)

    def _loop(self) -> None:
        stopping = False
        while not stopping:
            first = self._queue.get()
            batch: list[_Item] = []
            if first is None:
                stopping = True
            else:
                batch.append(first)
            while len(batch) < MAX_BATCH:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stopping = True
                    break
                batch.append(item)
            live = [(fn, fut) for fn, fut in batch if fut.set_running_or_notify_cancel()]
            if live:
                self._write(live)

    def _write(self, batch: list[_Item]) -> None:
        if len(batch) == 1:
            self._one(*batch[0])
            return
        results: list[Any] = []
        with self._lock:
            if self._keeper is not None:
                self._keeper.begin_batch()
            try:
                self._con.execute("BEGIN TRANSACTION")
                for fn, _ in batch:
                    results.append(fn())
                self._con.execute("COMMIT")
            except BaseException:
                try:
                    self._con.execute("ROLLBACK")
                except Exception:  # the transaction may already be gone (a failed commit aborts it)
                    pass
                if self._keeper is not None:
                    self._keeper.rollback_batch()
                results = []
            finally:
                if self._keeper is not None:
                    self._keeper.end_batch()
        if len(results) == len(batch):
            self.batches += 1
            for (_, future), result in zip(batch, results):
                future.set_result(result)
            return
        for fn, future in batch:  # one failed: each on its own, so only that one reports it
            self._one(fn, future)

    def _one(self, fn: Callable[[], Any], future: Future) -> None:
        try:
            with self._lock:
                result = fn()
        except BaseException as exc:
            future.set_exception(exc)
        else:
            self.batches += 1
            future.set_result(result)
