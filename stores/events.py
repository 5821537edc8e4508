"""The event log: run events appended in batches through DuckDB's appender.

`append` only buffers (and tells live subscribers at once); a background thread flushes the
buffer at least every `flush_interval` seconds, or sooner when it fills. Readers flush first,
so a query always sees every event appended before it.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from ._json import dumps, loads
from .duckdb_engine import duckdb

Subscriber = Callable[[dict], None]


class EventLog:
    def __init__(self, con: duckdb.DuckDBPyConnection, lock: threading.RLock,
                 flush_interval: float = 0.2, max_buffer: int = 50_000):
        self._con = con
        self._lock = lock
        self._buffer: list[tuple] = []
        self._buffer_lock = threading.Lock()
        self._subscribers: list[Subscriber] = []
        self._flush_interval = flush_interval
        self._max_buffer = max_buffer
        with self._lock:
            self._next_id = (con.execute("SELECT coalesce(max(event_id), 0) FROM events").fetchall()[0][0]) + 1
            # The appender refuses a connection that has a partly fetched result (any fetchone()
            # elsewhere leaves one), so it gets a connection of its own on the same database.
            self._append_con = con.cursor()
        self._wake = threading.Event()
        self._stopped = False
        self._thread = threading.Thread(target=self._flush_loop, name="event-flush", daemon=True)
        self._thread.start()

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback) if callback in self._subscribers else None

    def append(self, kind: str, body: dict | None = None, run_id: str | None = None, step_id: str | None = None,
               at: float | None = None, virtual_at: float | None = None) -> dict:
        with self._buffer_lock:
            event_id = self._next_id
            self._next_id += 1
            event = {"event_id": event_id, "run_id": run_id, "kind": kind, "step_id": step_id,
                     "at": at if at is not None else time.time(), "virtual_at": virtual_at, "body": body or {}}
            self._buffer.append((event_id, run_id, kind, step_id, event["at"], virtual_at, dumps(event["body"])))
            full = len(self._buffer) >= self._max_buffer
        if full:
            self._wake.set()
        for callback in list(self._subscribers):
            try:
                callback(event)
            except Exception:  # a broken listener must never break the writer
                pass
        return event

    def append_many(self, events: list[dict]) -> int:
        for e in events:
            self.append(e["kind"], e.get("body"), e.get("run_id"), e.get("step_id"), e.get("at"), e.get("virtual_at"))
        return len(events)

    def flush(self) -> int:
        # Take the buffer and write it under the store lock, so a reader's flush waits for a
        # background flush in progress instead of finding an empty buffer and reading too early.
        with self._lock:
            with self._buffer_lock:
                rows, self._buffer = self._buffer, []
            if not rows:
                return 0
            try:
                appender = self._append_con.appender("events")
                appender.append_rows(rows)
                appender.flush()
            except BaseException:
                with self._buffer_lock:  # keep the events for the next attempt
                    self._buffer[:0] = rows
                raise
        return len(rows)

    def query(self, run_id: str | None = None, after_id: int = 0, kinds: list[str] | None = None,
              limit: int | None = None) -> list[dict[str, Any]]:
        self.flush()
        sql = "SELECT event_id, run_id, kind, step_id, ts, virtual_ts, body FROM events WHERE event_id > ?"
        params: list[Any] = [after_id]
        if run_id is not None:
            sql += " AND run_id = ?"
            params.append(run_id)
        if kinds:
            sql += f" AND kind IN ({', '.join('?' * len(kinds))})"
            params += kinds
        sql += " ORDER BY event_id"
        if limit:
            sql += f" LIMIT {int(limit)}"
        with self._lock:
            rows = self._con.execute(sql, params).fetchall()
        return [{"event_id": r[0], "run_id": r[1], "kind": r[2], "step_id": r[3], "at": r[4], "virtual_at": r[5],
                 "body": loads(r[6])} for r in rows]

    def close(self) -> None:
        self._stopped = True
        self._wake.set()
        self._thread.join(timeout=5)
        try:
            self.flush()
        finally:
            with self._lock:
                self._append_con.close()

    def _flush_loop(self) -> None:
        while not self._stopped:
            self._wake.wait(self._flush_interval)
            self._wake.clear()
            try:
                self.flush()
            except Exception:  # the DB may be closing; the final flush in close() reports for real
                if self._stopped:
                    return
