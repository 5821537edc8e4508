"""Open the project's DuckDB file and compose the stores over it.

One DuckDBStore per hub. All stores share one connection guarded by one re-entrant lock:
DuckDB calls here take well under a millisecond, so a lock is simpler than a pool.
"""

from __future__ import annotations

import threading
from pathlib import Path

import duckdb

from agentenv_local.errors import HubError

from .documents import DocumentStore, RecordStore
from .events import EventLog
from .migrations import apply_migrations
from .objects import ObjectStore
from .runs import RunStore


class DuckDBStore:
    """The registry's storage: documents, records, runs + journal, events, objects."""

    def __init__(self, db_path: Path, objects_root: Path, flush_interval: float = 0.2):
        self.db_path = Path(db_path)
        try:
            self._con = duckdb.connect(str(self.db_path))
        except duckdb.Error as exc:
            raise HubError(f"cannot open {self.db_path}: {exc}", hint=_open_hint(str(exc), self.db_path)) from exc
        self._lock = threading.RLock()
        with self._lock:
            apply_migrations(self._con)
        self.documents = DocumentStore(self._con, self._lock)
        self.records = RecordStore(self._con, self._lock)
        self.runs = RunStore(self._con, self._lock)
        self.events = EventLog(self._con, self._lock, flush_interval=flush_interval)
        self.objects = ObjectStore(self._con, self._lock, objects_root)
        self._closed = False

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.events.close()
        with self._lock:
            self._con.execute("CHECKPOINT")
            self._con.close()


def _open_hint(message: str, db_path: Path) -> str:
    if "lock" in message.lower():
        return ("another process holds the store; commands reach it through the hub by themselves, so this one "
                "is not an agentenv hub of this project: stop it and run the command again")
    if "not a valid DuckDB" in message or "version" in message.lower():
        return (f"the store file is damaged or from another DuckDB version: move it aside "
                f"(mv {db_path} {db_path}.bad) and run again to start an empty store")
    return "check the file's permissions and the free disk space"
