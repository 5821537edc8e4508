"""Runs (task instances) with typed columns, and the per-run step journal.

A run's `rev` increments on every update so concurrent writers detect each other. The journal
is append-only: one row per step outcome, enough to resume a run after a crash.
"""

from __future__ import annotations

import builtins
import threading
import time
from typing import Any, Callable

from agentenv_local.errors import ConflictError, NotFoundError
from agentenv_local.query import Query

from ._json import dumps, loads
from .duckdb_engine import duckdb
from .query import compile_filters, compile_order

RUN_COLUMNS = ("run_id", "task_id", "task_version", "group_id", "status", "created_at", "started_at",
               "finished_at", "score", "owner", "rev")
_COLUMN_SET = frozenset(RUN_COLUMNS)
ACTIVE_STATUSES = ("queued", "running")


def _row(row) -> dict:
    run = dict(zip(RUN_COLUMNS, row[:-1]))
    run.update(loads(row[-1]) or {})
    return run


FLUSH_AFTER_S = 0.2  # how long a run in flight's changes may wait to be written with the others'


class RunStore:
    """The hub is the store's only writer, so what it wrote last of a run in flight is what the file will hold:
    each queued or running run's record is kept here, and its changes are written behind, every run changed
    in the last FLUSH_AFTER_S in one statement, instead of one statement per change (a `support` episode
    changes its record about twenty times). Readers see them at once: `get` answers from here, `list` writes
    what waits first. A run's end (any other status) is written at once, as is its creation. Each run's last
    journal seq is kept too, so an append does not look for the largest. Killed before a write-behind, a hub
    loses at most the last FLUSH_AFTER_S of its runs' progress in their records; their journals, which resume
    reads, are written at once.

    A writer batch that rolls back restores what was kept before it (`begin_batch`/`rollback_batch`, which
    the store's writer calls)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, lock: threading.RLock):
        self._con = con
        self._lock = lock
        self._live: dict[str, str] = {}  # run id -> its record as JSON (a copy per read: callers change theirs)
        self._dirty: set[str] = set()  # live runs whose record in the file is behind
        self._last_seq: dict[str, int] = {}
        self._flush_timer: threading.Timer | None = None
        self._before_batch: tuple[dict, set, dict] | None = None

    # -- what is kept of runs in flight ----------------------------------------------------------------
    def begin_batch(self) -> None:
        with self._lock:
            self._before_batch = (dict(self._live), set(self._dirty), dict(self._last_seq))

    def end_batch(self) -> None:
        self._before_batch = None

    def rollback_batch(self) -> None:
        with self._lock:
            if self._before_batch is not None:
                live, dirty, last_seq = self._before_batch
                self._live, self._dirty, self._last_seq = dict(live), set(dirty), dict(last_seq)
            self._before_batch = None

    def _keep(self, run: dict, written: bool) -> None:
        run_id = run["run_id"]
        if run.get("status") in ACTIVE_STATUSES:
            self._live[run_id] = dumps(run)
            if written:
                self._dirty.discard(run_id)
            else:
                self._dirty.add(run_id)
                self._flush_soon()
        else:  # an ended run is read from the file again (and a resume looks its last seq up once)
            self._live.pop(run_id, None)
            self._dirty.discard(run_id)
            self._last_seq.pop(run_id, None)

    def _flush_soon(self) -> None:
        if self._flush_timer is None:
            self._flush_timer = threading.Timer(FLUSH_AFTER_S, self._flush_in_background)
            self._flush_timer.daemon = True
            self._flush_timer.start()

    def _flush_in_background(self) -> None:
        try:
            self.flush()
        except Exception:  # the store's failure is sticky: the next call made by someone reports it
            pass

    def flush(self) -> None:
        """Write the runs in flight whose records are behind, in one statement per 200 runs."""
        with self._lock:
            if self._flush_timer is not None:
                self._flush_timer.cancel()
                self._flush_timer = None
            dirty = sorted(self._dirty)
            for start in range(0, len(dirty), 200):
                rows = []
                for run_id in dirty[start:start + 200]:
                    run = loads(self._live[run_id])
                    body = {k: v for k, v in run.items() if k not in _COLUMN_SET}
                    rows.append([*(run.get(c) for c in RUN_COLUMNS), dumps(body)])
                values = ", ".join("(" + ", ".join("?" * (len(RUN_COLUMNS) + 1)) + ")" for _ in rows)
                sets = ", ".join(f"{c} = v.{c}" for c in RUN_COLUMNS if c != "run_id")
                self._con.execute(
                    f"UPDATE runs SET {sets}, body = v.body FROM (VALUES {values}) AS v({', '.join(RUN_COLUMNS)}, "
                    "body) WHERE runs.run_id = v.run_id", [value for row in rows for value in row])
                self._dirty.difference_update(dirty[start:start + 200])

    # -- runs ----------------------------------------------------------------------------------------
    def create(self, run: dict) -> dict:
        cols = {k: run.get(k) for k in RUN_COLUMNS}
        cols["rev"] = 1
        cols["created_at"] = cols["created_at"] or time.time()
        body = {k: v for k, v in run.items() if k not in _COLUMN_SET}
        with self._lock:
            try:
                self._con.execute(
                    f"INSERT INTO runs VALUES ({', '.join('?' * (len(RUN_COLUMNS) + 1))})",
                    [*cols.values(), dumps(body)],
                )
            except duckdb.ConstraintException as exc:
                raise ConflictError(f"run {run['run_id']} already exists") from exc
            created = {**cols, **body}
            self._keep(created, written=True)
        return created

    def update(self, run_id: str, changes: dict, rev: int | None = None) -> dict:
        """Merge `changes` into the run; `rev`, if given, must match the stored one."""
        return self.update_with(run_id, lambda _current: changes, rev)

    def update_with(self, run_id: str, change: Callable[[dict], dict], rev: int | None = None) -> dict:
        """Merge `change(run)` into the run, read once under the lock: a read-modify-write (a step's
        status in `steps`, say) in one read instead of a `get` and the `update`'s own. A run still in flight is
        written behind (the class's docstring); one that ends, at once."""
        with self._lock:
            current = self.get(run_id)
            if rev is not None and current["rev"] != rev:
                raise ConflictError(f"run {run_id} changed since you read it (rev {current['rev']}, not {rev})")
            merged = {**current, **change(current), "rev": current["rev"] + 1}
            if merged.get("status") in ACTIVE_STATUSES:
                self._keep(merged, written=False)
                return merged
            body = {k: v for k, v in merged.items() if k not in _COLUMN_SET}
            sets = ", ".join(f"{c} = ?" for c in RUN_COLUMNS if c != "run_id")
            self._con.execute(
                f"UPDATE runs SET {sets}, body = ? WHERE run_id = ?",
                [*(merged[c] for c in RUN_COLUMNS if c != "run_id"), dumps(body), run_id],
            )
            self._keep(merged, written=True)
        return merged

    def find(self, run_id: str) -> dict | None:
        with self._lock:
            kept = self._live.get(run_id)
            if kept is not None:
                return loads(kept)
            row = self._con.execute("SELECT * FROM runs WHERE run_id = ?", [run_id]).fetchone()
        return _row(row) if row else None

    def get(self, run_id: str) -> dict:
        run = self.find(run_id)
        if run is None:
            raise NotFoundError(f"run {run_id!r} not found", hint="see the runs there are with `agentenv runs list`")
        return run

    def resolve(self, prefix: str) -> str:
        """Accept a unique prefix of a run id, like git does for commits."""
        with self._lock:
            if self._con.execute("SELECT 1 FROM runs WHERE run_id = ?", [prefix]).fetchall():
                return prefix  # an exact id wins even when it prefixes a longer one
            rows = self._con.execute(
                "SELECT run_id FROM runs WHERE starts_with(run_id, ?) LIMIT 2", [prefix]
            ).fetchall()
        if not rows:
            raise NotFoundError(f"run {prefix!r} not found", hint="see the runs there are with `agentenv runs list`")
        if len(rows) > 1:
            raise NotFoundError(f"run prefix {prefix!r} is ambiguous", hint="give more characters of the run id")
        return rows[0][0]

    def list(self, query: Query | dict | None = None, summary: bool = True) -> list[dict]:
        """Runs matching `query` (collection name ignored), newest first unless sorted otherwise.

        `summary=True` leaves the bulky context out of each row.
        """
        if query is None:
            query = Query("runs")
        elif isinstance(query, dict):
            query = Query.from_wire(query)
        where, params = compile_filters(query, _COLUMN_SET)
        order, order_params = compile_order(query, _COLUMN_SET)
        body = "json_object('task_name', body->>'task_name', 'error', body->>'error')" if summary else "body"
        sql = (f"SELECT {', '.join(RUN_COLUMNS)}, {body} FROM runs WHERE {where} "
               f"{order or 'ORDER BY created_at DESC'}")
        if query.max_rows is not None:
            sql += f" LIMIT {int(query.max_rows)}"
        with self._lock:
            self.flush()
            rows = self._con.execute(sql, [*params, *order_params]).fetchall()
        return [_row(r) for r in rows]

    def mark_interrupted(self, owner_is_alive) -> builtins.list[str]:
        """Runs left queued/running by an owner that is gone become `interrupted`."""
        with self._lock:
            self.flush()
            rows = self._con.execute(
                "SELECT run_id, owner FROM runs WHERE status IN ('queued', 'running')"
            ).fetchall()
            gone = [run_id for run_id, owner in rows if not owner_is_alive(owner)]
            for run_id in gone:
                self.update(run_id, {"status": "interrupted", "finished_at": time.time(),
                                     "error": "the process running it stopped before it finished"})
        return gone

    # -- the step journal ---------------------------------------------------------------
    def journal_append(self, run_id: str, step_id: str, status: str, body: dict, generation: int = 0) -> int:
        with self._lock:
            last = self._last_seq.get(run_id)
            if last is None:
                row = self._con.execute(
                    "SELECT coalesce(max(seq), 0) FROM step_journal WHERE run_id = ?", [run_id]
                ).fetchone()
                assert row is not None  # an aggregate answers one row
                last = row[0]
            seq = last + 1
            self._con.execute(
                "INSERT INTO step_journal VALUES (?, ?, ?, ?, ?, ?, ?)",
                [run_id, seq, step_id, generation, status, time.time(), dumps(body)],
            )
            self._last_seq[run_id] = seq
        return seq

    def journal(self, run_id: str) -> builtins.list[dict[str, Any]]:
        with self._lock:
            rows = self._con.execute(
                "SELECT seq, step_id, generation, status, recorded_at, body FROM step_journal"
                " WHERE run_id = ? ORDER BY seq",
                [run_id],
            ).fetchall()
        return [{"seq": s, "step_id": st, "generation": g, "status": status, "recorded_at": at, "body": loads(b)}
                for s, st, g, status, at, b in rows]
