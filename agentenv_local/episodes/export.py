"""`agentenv export runs`: pick finished runs and write one episode per row, as JSONL or as Parquet.

Parquet is written by DuckDB itself (an in-memory connection reading the JSONL we wrote): scalar fields as
typed columns, the nested ones (seed, criteria, messages, trajectory, ...) as DuckDB's JSON type. Both files
are written next to the target and renamed into place, so a failed export never leaves half a file.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from agentenv_local.errors import ValidationError

from .record import EPISODE_FIELDS, episode_record

FORMATS = ("jsonl", "parquet")
FINISHED = ("passed", "failed", "error", "cancelled", "interrupted")

# Parquet column types; every other field is nested and stored as JSON.
SCALAR_TYPES = {"run_id": "VARCHAR", "task_id": "VARCHAR", "task_version": "INTEGER", "task_name": "VARCHAR",
                "group_id": "VARCHAR", "eval_id": "VARCHAR", "eval_version": "INTEGER", "status": "VARCHAR",
                "score": "DOUBLE", "error": "VARCHAR", "agent": "VARCHAR", "model": "VARCHAR"}


def parse_since(text: str) -> float:
    """`--since`: an ISO date or date-time (UTC unless it names a zone) as a Unix time."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValidationError(f"--since {text!r} is not a date",
                              hint="give an ISO date or date-time, e.g. 2026-12-01 or 2026-12-01T09:30") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


def select_run_ids(store: Any, *, task: str | None = None, eval_id: str | None = None, since: float | None = None,
                   status: str | None = None) -> list[str]:
    """The ids of the finished runs that match, oldest first (a task id, or a task's name without '/')."""
    from agentenv_local.query import Query

    query = Query("runs").sort("created_at")
    if status:
        query.where("status", "eq", status)
    if task:
        query.where("task_id" if "/" in task else "task_name", "eq", task)
    if eval_id:
        query.where("labels.eval_id", "eq", eval_id)
    if since is not None:
        query.where("created_at", "gte", since)
    return [row["run_id"] for row in store.runs.list(query) if row["status"] in FINISHED]


def episodes(store: Any, run_ids: Iterable[str]) -> Iterator[dict[str, Any]]:
    """Each run's episode record, its trajectories read whole from the object store."""
    def load(key: str) -> bytes | None:
        return store.objects.get(key) if store.objects.exists(key) else None

    for run_id in run_ids:
        yield episode_record(store.runs.get(run_id), load)


def write_episodes(rows: Iterable[dict[str, Any]], path: Path, fmt: str) -> int:
    """Write the episodes to `path` in `fmt`; the number written."""
    if fmt not in FORMATS:
        raise ValidationError(f"unknown export format {fmt!r}", hint=f"use one of: {', '.join(FORMATS)}")
    path = path.expanduser()
    if path.is_dir():
        raise ValidationError(f"{path} is a folder", hint="give -o a file name, e.g. episodes.jsonl")
    if not path.parent.is_dir():
        raise ValidationError(f"{path.parent} does not exist", hint="create the folder first, or write elsewhere")
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".jsonl", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        count = 0
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps({k: row.get(k) for k in EPISODE_FIELDS}, default=str) + "\n")
                count += 1
        if fmt == "jsonl":
            os.replace(tmp, path)
            return count
        parquet = tmp.with_suffix(".parquet")
        try:
            _jsonl_to_parquet(tmp, parquet)
            os.replace(parquet, path)
        finally:
            parquet.unlink(missing_ok=True)
        return count
    finally:
        tmp.unlink(missing_ok=True)


def _jsonl_to_parquet(source: Path, target: Path) -> None:
    import duckdb

    columns = {name: SCALAR_TYPES.get(name, "JSON") for name in EPISODE_FIELDS}
    spec = "{" + ", ".join(f"'{name}': '{kind}'" for name, kind in columns.items()) + "}"
    con = duckdb.connect()  # in memory: the store is never opened here
    try:
        select = ", ".join(columns)  # keeps EPISODE_FIELDS' order
        con.execute(f"COPY (SELECT {select} FROM read_json(?, format = 'newline_delimited', columns = {spec})) "
                    f"TO '{_sql_text(target)}' (FORMAT parquet)", [str(source)])
    finally:
        con.close()


def _sql_text(path: Path) -> str:
    return str(path).replace("'", "''")
