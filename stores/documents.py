"""Versioned documents `(collection, id, version)` with JSON bodies, and mutable records.

`put` always makes the next version; naming a version that is not exactly the next one is a
conflict. Records (`records` table) are the mutable kind: instances whose status changes.
"""

from __future__ import annotations

import threading
import time

from agentenv_local.errors import ConflictError, NotFoundError
from agentenv_local.query import Query

from ._json import dumps, loads
from .duckdb_engine import duckdb
from .query import compile_filters, compile_order

COLLECTIONS = (
    "envs", "env_instances", "artifacts", "agents", "agent_instances", "tasks", "task_steps",
    "evals", "bundle_ledger", "sandboxes", "reviews",
)
# The command that lists a collection, for "not found" hints.
LIST_COMMANDS = {"tasks": "agentenv task list", "artifacts": "agentenv artifact list", "evals": "agentenv eval list",
                 "envs": "agentenv env list"}
DOC_COLUMNS = frozenset({"id", "version", "created_at", "digest"})
RECORD_COLUMNS = frozenset({"id", "rev", "created_at", "updated_at"})


def _check_collection(collection: str) -> None:
    if not collection or not collection.replace("_", "").isalnum():
        raise ValueError(f"bad collection name {collection!r}")


def _doc_row(row) -> dict:
    collection, id_, version, created_at, digest, body = row
    return {"collection": collection, "id": id_, "version": version, "created_at": created_at,
            "digest": digest, "body": loads(body)}


class DocumentStore:
    def __init__(self, con: duckdb.DuckDBPyConnection, lock: threading.RLock):
        self._con = con
        self._lock = lock

    def latest_version(self, collection: str, id: str) -> int:
        with self._lock:
            row = self._con.execute(
                "SELECT max(version) FROM documents WHERE collection = ? AND id = ?", [collection, id]
            ).fetchone()
        assert row is not None  # an aggregate answers one row
        return row[0] or 0

    def put(self, collection: str, id: str, body: dict, version: int | None = None,
            digest: str | None = None, if_changed: bool = False) -> dict:
        """Store `body` as the next version of `id`. `version`, if given, must be that next one.

        `if_changed=True` with a `digest`: when the latest version has that same digest, write
        nothing and return it with `"unchanged": True` (checked under the write lock, so two
        writers of identical content make one version, not two).
        """
        _check_collection(collection)
        if not id:
            raise ValueError("a document needs a non-empty id")
        with self._lock:
            if if_changed and digest is not None:
                latest = self.find(collection, id)
                if latest is not None and latest["digest"] == digest:
                    return {**latest, "unchanged": True}
            current = self.latest_version(collection, id)
            if version is not None and version != current + 1:
                raise ConflictError(
                    f"{collection}/{id}: you asked to write version {version}, but the latest is v{current}",
                    hint=f"re-read {id} and write version {current + 1}, or leave the version out to take the next one",
                )
            now = time.time()
            new_version = current + 1
            try:
                self._con.execute(
                    "INSERT INTO documents VALUES (?, ?, ?, ?, ?, ?)",
                    [collection, id, new_version, now, digest, dumps(body)],
                )
            except duckdb.ConstraintException as exc:  # another writer took the version
                raise ConflictError(f"{collection}/{id} v{new_version} was written concurrently") from exc
        return {"collection": collection, "id": id, "version": new_version, "created_at": now,
                "digest": digest, "body": body}

    def find(self, collection: str, id: str, version: int | None = None) -> dict | None:
        with self._lock:
            if version is None:
                row = self._con.execute(
                    "SELECT * FROM documents WHERE collection = ? AND id = ? ORDER BY version DESC LIMIT 1",
                    [collection, id],
                ).fetchone()
            else:
                row = self._con.execute(
                    "SELECT * FROM documents WHERE collection = ? AND id = ? AND version = ?",
                    [collection, id, version],
                ).fetchone()
        return _doc_row(row) if row else None

    def get(self, collection: str, id: str, version: int | None = None) -> dict:
        doc = self.find(collection, id, version)
        if doc is None:
            what = f"{collection}/{id}" + (f" v{version}" if version is not None else "")
            listing = LIST_COMMANDS.get(collection)
            raise NotFoundError(f"{what} not found", hint=f"see what exists with `{listing}`" if listing else None)
        return doc

    def versions(self, collection: str, id: str) -> list[int]:
        with self._lock:
            rows = self._con.execute(
                "SELECT version FROM documents WHERE collection = ? AND id = ? ORDER BY version", [collection, id]
            ).fetchall()
        return [r[0] for r in rows]

    def query(self, query: Query | dict) -> list[dict]:
        if isinstance(query, dict):
            query = Query.from_wire(query)
        _check_collection(query.collection)
        where, params = compile_filters(query, DOC_COLUMNS)
        order, order_params = compile_order(query, DOC_COLUMNS)
        source = "SELECT * FROM documents WHERE collection = ?"
        if query.latest:
            source += " QUALIFY row_number() OVER (PARTITION BY id ORDER BY version DESC) = 1"
        sql = f"SELECT * FROM ({source}) WHERE {where} {order or 'ORDER BY id, version'}"
        if query.max_rows is not None:
            sql += f" LIMIT {int(query.max_rows)}"
        with self._lock:
            rows = self._con.execute(sql, [query.collection, *params, *order_params]).fetchall()
        return [_doc_row(r) for r in rows]


class RecordStore:
    """Mutable records: `save` creates or replaces under an optional `rev` precondition."""

    def __init__(self, con: duckdb.DuckDBPyConnection, lock: threading.RLock):
        self._con = con
        self._lock = lock

    def save(self, collection: str, id: str, body: dict, rev: int | None = None) -> dict:
        _check_collection(collection)
        now = time.time()
        with self._lock:
            row = self._con.execute(
                "SELECT rev, created_at FROM records WHERE collection = ? AND id = ?", [collection, id]
            ).fetchone()
            if rev is not None and (row[0] if row else 0) != rev:
                raise ConflictError(
                    f"{collection}/{id} changed since you read it (rev {row[0] if row else 0}, not {rev})")
            if row is None:
                self._con.execute("INSERT INTO records VALUES (?, ?, 1, ?, ?, ?)",
                                  [collection, id, now, now, dumps(body)])
                return {"collection": collection, "id": id, "rev": 1, "created_at": now, "updated_at": now,
                        "body": body}
            self._con.execute(
                "UPDATE records SET rev = rev + 1, updated_at = ?, body = ? WHERE collection = ? AND id = ?",
                [now, dumps(body), collection, id],
            )
        return {"collection": collection, "id": id, "rev": row[0] + 1, "created_at": row[1], "updated_at": now,
                "body": body}

    def find(self, collection: str, id: str) -> dict | None:
        with self._lock:
            row = self._con.execute("SELECT * FROM records WHERE collection = ? AND id = ?",
                                    [collection, id]).fetchone()
        if not row:
            return None
        return {"collection": row[0], "id": row[1], "rev": row[2], "created_at": row[3], "updated_at": row[4],
                "body": loads(row[5])}

    def get(self, collection: str, id: str) -> dict:
        rec = self.find(collection, id)
        if rec is None:
            raise NotFoundError(f"{collection}/{id} not found")
        return rec

    def delete(self, collection: str, id: str) -> bool:
        with self._lock:
            n = self._con.execute("DELETE FROM records WHERE collection = ? AND id = ? RETURNING id",
                                  [collection, id]).fetchall()
        return bool(n)

    def query(self, query: Query | dict) -> list[dict]:
        if isinstance(query, dict):
            query = Query.from_wire(query)
        where, params = compile_filters(query, RECORD_COLUMNS)
        order, order_params = compile_order(query, RECORD_COLUMNS)
        sql = f"SELECT * FROM records WHERE collection = ? AND {where} {order or 'ORDER BY created_at'}"
        if query.max_rows is not None:
            sql += f" LIMIT {int(query.max_rows)}"
        with self._lock:
            rows = self._con.execute(sql, [query.collection, *params, *order_params]).fetchall()
        return [{"collection": r[0], "id": r[1], "rev": r[2], "created_at": r[3], "updated_at": r[4],
                 "body": loads(r[5])} for r in rows]


