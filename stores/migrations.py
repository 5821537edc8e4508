"""Schema migrations: a numbered list of small functions, each recorded in the DB once applied.

Append new migrations at the end; never edit or reorder one that has shipped.
"""

from __future__ import annotations

import time
from typing import Callable

from .duckdb_engine import duckdb


def _001_documents(con: duckdb.DuckDBPyConnection) -> None:
    # Versioned entities (envs, artifacts, tasks, ...): put always makes the next version.
    con.execute(
        """
        CREATE TABLE documents (
            collection VARCHAR NOT NULL,
            id VARCHAR NOT NULL,
            version INTEGER NOT NULL,
            created_at DOUBLE NOT NULL,
            digest VARCHAR,
            body JSON NOT NULL,
            PRIMARY KEY (collection, id, version)
        )
        """
    )


def _002_records(con: duckdb.DuckDBPyConnection) -> None:
    # Mutable records (instances, sandboxes): updated in place under a `rev` compare-and-swap.
    con.execute(
        """
        CREATE TABLE records (
            collection VARCHAR NOT NULL,
            id VARCHAR NOT NULL,
            rev INTEGER NOT NULL,
            created_at DOUBLE NOT NULL,
            updated_at DOUBLE NOT NULL,
            body JSON NOT NULL,
            PRIMARY KEY (collection, id)
        )
        """
    )


def _003_runs(con: duckdb.DuckDBPyConnection) -> None:
    # Task instances get typed columns: run history is the hottest query.
    con.execute(
        """
        CREATE TABLE runs (
            run_id VARCHAR PRIMARY KEY,
            task_id VARCHAR NOT NULL,
            task_version INTEGER NOT NULL,
            group_id VARCHAR,
            status VARCHAR NOT NULL,
            created_at DOUBLE NOT NULL,
            started_at DOUBLE,
            finished_at DOUBLE,
            score DOUBLE,
            owner VARCHAR,
            rev INTEGER NOT NULL,
            body JSON NOT NULL
        )
        """
    )
    con.execute(
        """
        CREATE TABLE step_journal (
            run_id VARCHAR NOT NULL,
            seq INTEGER NOT NULL,
            step_id VARCHAR NOT NULL,
            generation INTEGER NOT NULL,
            status VARCHAR NOT NULL,
            recorded_at DOUBLE NOT NULL,
            body JSON NOT NULL,
            PRIMARY KEY (run_id, seq)
        )
        """
    )


def _004_events(con: duckdb.DuckDBPyConnection) -> None:
    # Written only through the appender, in batches; no primary key so appends stay cheap.
    con.execute(
        """
        CREATE TABLE events (
            event_id BIGINT NOT NULL,
            run_id VARCHAR,
            kind VARCHAR NOT NULL,
            step_id VARCHAR,
            ts DOUBLE NOT NULL,
            virtual_ts DOUBLE,
            body JSON NOT NULL
        )
        """
    )


def _005_objects(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        """
        CREATE TABLE objects (
            key VARCHAR PRIMARY KEY,
            sha256 VARCHAR NOT NULL,
            size BIGINT NOT NULL,
            content_type VARCHAR NOT NULL,
            created_at DOUBLE NOT NULL
        )
        """
    )


MIGRATIONS: list[tuple[int, str, Callable[[duckdb.DuckDBPyConnection], None]]] = [
    (1, "documents", _001_documents),
    (2, "records", _002_records),
    (3, "runs and step journal", _003_runs),
    (4, "events", _004_events),
    (5, "objects", _005_objects),
]

# Every table the migrations above create (the store refuses to open when one is missing).
TABLES = frozenset({"schema_migrations", "documents", "records", "runs", "step_journal", "events", "objects"})


def apply_migrations(con: duckdb.DuckDBPyConnection) -> list[int]:
    """Apply every migration not yet recorded; returns the numbers applied now."""
    con.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (number INTEGER PRIMARY KEY, name VARCHAR, applied_at DOUBLE)"
    )
    done = {row[0] for row in con.execute("SELECT number FROM schema_migrations").fetchall()}
    applied = []
    for number, name, migrate in MIGRATIONS:
        if number in done:
            continue
        con.execute("BEGIN TRANSACTION")
        try:
            migrate(con)
            con.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)", [number, name, time.time()])
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise
        applied.append(number)
    return applied
