"""Open the project's DuckDB file and compose the stores over it.

One DuckDBStore per hub. All stores share one connection guarded by one re-entrant lock:
DuckDB calls here take well under a millisecond, so a lock is simpler than a pool. Every call
on it goes through a `faults.Guard`, so a full disk or a damaged file is one clear error.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from agentenv_local.errors import HubError, StoreError, printable

from . import faults
from .documents import DocumentStore, RecordStore
from .duckdb_engine import duckdb
from .events import EventLog
from .migrations import TABLES, apply_migrations
from .object_api import ObjectStoreBase
from .objects import ObjectStore
from .runs import RunStore
from .writer import StoreWriter

# Builds an object store over the project's connection, lock and objects folder (`ObjectStoreBase.open` with
# its settings bound): what the hub passes for `[store] objects`.
ObjectStoreFactory = Callable[[duckdb.DuckDBPyConnection, threading.RLock, Path], Any]


class DuckDBStore:
    """The registry's storage: documents, records, runs + journal, events, objects; `writer` runs
    writes on a thread of their own (stores/writer.py). `objects` builds the object store (default: the
    built-in `ObjectStore`)."""

    def __init__(self, db_path: Path, objects_root: Path, flush_interval: float = 0.2,
                 objects: ObjectStoreFactory | None = None):
        self.db_path = Path(db_path)
        if printable(str(self.db_path)) != str(self.db_path):  # DuckDB cannot open such a path at all
            raise StoreError(f"the store's path {printable(str(self.db_path))} is not valid UTF-8",
                             hint="use a project folder (or AGENTENV_HOME) whose path is valid UTF-8")
        self._guard = faults.Guard(self.db_path)
        try:
            self._raw = duckdb.connect(str(self.db_path))
        except duckdb.Error as exc:
            translated = faults.translate(exc, self.db_path)
            if isinstance(translated, StoreError):
                raise translated from exc
            raise HubError(f"cannot open {self.db_path}: {exc}", hint=_open_hint(str(exc), self.db_path)) from exc
        self._con = cast(duckdb.DuckDBPyConnection, faults.Guarded(self._raw, self._guard))
        self._lock = threading.RLock()
        try:
            with self._lock:
                apply_migrations(self._con)
                self._check_tables()
            self.documents = DocumentStore(self._con, self._lock)
            self.records = RecordStore(self._con, self._lock)
            self.runs = RunStore(self._con, self._lock)
            self.events = EventLog(self._con, self._lock, flush_interval=flush_interval)
            self.objects_root = Path(objects_root)
            self.objects: ObjectStoreBase = self.open_objects(objects) if objects else ObjectStore(
                self._con, self._lock, self.objects_root)
        except BaseException:
            self._raw.close()
            raise
        # The runner's run updates and journal appends, off the hub's event loop and batched.
        self.writer = StoreWriter(self._con, self._lock, keeper=self.runs)
        self._closed = False

    def open_objects(self, factory: ObjectStoreFactory) -> ObjectStoreBase:
        """Another object store over this project's key maps (`agentenv store migrate-objects` copies into it)."""
        return cast(ObjectStoreBase, factory(self._con, self._lock, self.objects_root))

    @property
    def failure(self) -> StoreError | None:
        """The disk-full or damage error that stopped this store, if one did."""
        return self._guard.failure

    def _check_tables(self) -> None:
        # Migrations are recorded as applied, so a table dropped since is damage, not a new store.
        present = {row[0] for row in self._con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        missing = sorted(TABLES - present)
        if missing:
            raise faults.damaged(self.db_path, f"table(s) {', '.join(missing)} missing")

    def close(self) -> None:
        """Close the file, saving it (CHECKPOINT); raises the store's failure, if it had one, last."""
        if self._closed:
            return
        self._closed = True
        failure = None
        self.writer.close()  # what is queued is written first
        try:
            self.runs.flush()  # and the runs in flight's records written behind
        except StoreError as exc:
            failure = exc
        try:
            self.events.close()
        except StoreError as exc:
            failure = exc
        with self._lock:
            try:
                if self._guard.failure is None:
                    self._con.execute("CHECKPOINT")
            except StoreError as exc:
                failure = exc
            finally:
                self._raw.close()
        failure = failure or self._guard.failure
        if failure is not None:
            raise StoreError(failure.message, hint=failure.hint)


def _open_hint(message: str, db_path: Path) -> str:
    if "Could not set lock" in message or "Conflicting lock" in message:
        return ("another process holds the store; commands reach it through the hub by themselves, so this one "
                "is not an agentenv hub of this project: stop it and run the command again")
    if "not a valid DuckDB" in message or "version" in message.lower():
        return (f"the store file is damaged or from another DuckDB version: move it aside "
                f"(mv {db_path} {db_path}.bad) and run again to start an empty store")
    return "check the file's permissions and the free disk space"
