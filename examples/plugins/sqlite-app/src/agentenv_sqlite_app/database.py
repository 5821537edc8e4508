"""The SQLite side of `sqlite_app`: a private working copy of a seed database, and the checked operations on it.

Nothing the caller sends is ever put into SQL text but a table or column name that is one of the database's own
(checked, then quoted); values are always bound parameters. A query runs on a read-only connection whose
authorizer allows reading the visible tables and nothing else (no writes, no ATTACH, no PRAGMA, no hidden table),
with caps on the rows returned, the size of any value and the work done.
"""

from __future__ import annotations

import base64
import os
import shutil
import sqlite3
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .config import Settings

SQLITE_MAGIC = b"SQLite format 3\x00"
MAX_VALUE_BYTES = 1 << 20  # a value (string, blob) larger than this is refused (SQLITE_LIMIT_LENGTH)
MAX_SQL_CHARS = 20_000
PROGRESS_EVERY = 1000  # SQLite VM instructions between two progress checks
MAX_PROGRESS_CALLS = 50_000  # so a query may run about 50 million instructions, then it is stopped
_READ_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}


class DatabaseError(Exception):
    """A refused or failed operation: `code` (for EnvError), a message and a hint."""

    def __init__(self, code: str, message: str, hint: str | None = None):
        super().__init__(message)
        self.code, self.message, self.hint = code, message, hint


def quote(name: str) -> str:
    """An identifier quoted for SQL text; only ever called on a name read from the database itself."""
    return '"' + name.replace('"', '""') + '"'


def jsonable(value: Any) -> Any:
    """A SQLite value as JSON: blobs as {"base64": ...}."""
    if isinstance(value, bytes):
        return {"base64": base64.b64encode(value).decode("ascii")}
    return value


def read_seed(folder: Path, settings: Settings) -> bytes:
    """The seed database's bytes: the `database` file of the env's folder (a regular file, no link, inside the
    folder), or a database built from its `schema_sql` script."""
    rel = settings.database or settings.schema_sql
    assert rel is not None  # the record requires one
    data = _read_inside(folder, rel, "database" if settings.database else "schema_sql")
    if settings.database:
        if not data.startswith(SQLITE_MAGIC):
            raise DatabaseError("bad_database", f"database: {rel} is not a SQLite database file",
                                hint="ship a file made by sqlite3, or use schema_sql = \"schema.sql\"")
        return data
    with tempfile.TemporaryDirectory(prefix="sqlite-app-schema-") as tmp:
        path = Path(tmp) / "seed.db"
        conn = sqlite3.connect(path)
        try:
            conn.executescript(data.decode("utf-8"))
            conn.commit()
        except (sqlite3.Error, UnicodeDecodeError) as exc:
            raise DatabaseError("bad_schema", f"schema_sql: {rel} failed: {exc}") from None
        finally:
            conn.close()
        return path.read_bytes()


def _read_inside(folder: Path, rel: str, key: str) -> bytes:
    root = os.path.realpath(folder)
    path = os.path.join(root, rel)
    real = os.path.realpath(path)
    if real != path or not real.startswith(root + os.sep):  # a link somewhere on the way, or outside
        raise DatabaseError("bad_path", f"{key}: {rel} is a link or leaves the env's folder; it is never read",
                            hint="put the file itself in the env's folder")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise DatabaseError("bad_path", f"{key}: {rel} is not in the env's folder",
                            hint=f"put {rel} next to env.toml") from None
    except OSError as exc:
        raise DatabaseError("bad_path", f"{key}: cannot read {rel}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise DatabaseError("bad_path", f"{key}: {rel} is not a regular file")
        return f.read()


class Database:
    """A private working copy of the seed, with the visible and writable tables the settings give."""

    def __init__(self, seed: bytes, settings: Settings):
        self.seed = seed
        self.settings = settings
        self._dir = tempfile.TemporaryDirectory(prefix="sqlite-app-")
        self.path = Path(self._dir.name) / "work.db"
        self.conn: sqlite3.Connection | None = None
        self.reader: sqlite3.Connection | None = None
        self.reset()
        self.all_tables = self._table_names()
        self.visible = self._pick("tables", settings.tables, self.all_tables)
        if settings.read_only:
            self.writable: list[str] = []
        else:
            self.writable = self._pick("write_tables", settings.write_tables, self.visible)
        self._reject_rowless(self.writable)

    # -- the file -------------------------------------------------------------------------------------------
    def reset(self) -> None:
        """Back to the seed: a fresh copy of its bytes, new connections."""
        self.close()
        self.path.write_bytes(self.seed)
        self.conn = sqlite3.connect(self.path, isolation_level=None)  # explicit BEGIN/COMMIT below
        self.conn.execute("PRAGMA trusted_schema = OFF")
        self.reader = sqlite3.connect(f"{self.path.as_uri()}?mode=ro", uri=True)
        self.reader.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        self.reader.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        self.reader.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, MAX_SQL_CHARS)

    def close(self) -> None:
        for conn in (self.conn, self.reader):
            if conn is not None:
                conn.close()
        self.conn = self.reader = None

    def remove(self) -> None:
        self.close()
        shutil.rmtree(self._dir.name, ignore_errors=True)

    def _writer(self) -> sqlite3.Connection:
        assert self.conn is not None
        return self.conn

    def _table_names(self) -> list[str]:
        rows = self._writer().execute(
            "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' "
            "ORDER BY name").fetchall()
        return [r[0] for r in rows]

    def _pick(self, key: str, wanted: list[str] | None, among: list[str]) -> list[str]:
        if wanted is None:
            return list(among)
        unknown = [t for t in wanted if t not in among]
        if unknown:
            raise DatabaseError("bad_settings", f"{key}: {', '.join(map(repr, unknown))} not among "
                                f"{', '.join(among) or '(no tables)'}", hint="fix the names in env.toml")
        return list(dict.fromkeys(wanted))

    def _reject_rowless(self, tables: Iterable[str]) -> None:
        for table in tables:
            try:
                self._writer().execute(f"SELECT rowid FROM {quote(table)} LIMIT 0")
            except sqlite3.Error:
                raise DatabaseError("bad_settings", f"write_tables: {table!r} is a WITHOUT ROWID table, which "
                                    "this env cannot write", hint="leave it out of write_tables") from None

    # -- names ----------------------------------------------------------------------------------------------
    def table(self, name: str, *, write: bool = False) -> str:
        """`name` if the agent may see (or, with `write`, write) it; else a DatabaseError."""
        if name not in self.visible:
            raise DatabaseError("unknown_table", f"no table {name!r}",
                                hint=f"the tables are {', '.join(self.visible) or '(none)'} (list_tables)")
        if write and name not in self.writable:
            raise DatabaseError("read_only_table", f"table {name!r} is read-only here",
                                hint=f"writable: {', '.join(self.writable) or '(none)'}")
        return name

    def columns(self, table: str) -> list[dict[str, Any]]:
        rows = self._writer().execute(f"PRAGMA table_info({quote(table)})").fetchall()
        return [{"name": r[1], "type": r[2], "not_null": bool(r[3]), "default": r[4], "primary_key": r[5]}
                for r in rows]

    def _checked_columns(self, table: str, names: Iterable[str], what: str) -> list[str]:
        known = [c["name"] for c in self.columns(table)]
        bad = [n for n in names if n not in known]
        if bad:
            raise DatabaseError("unknown_column", f"{what}: {table} has no column {', '.join(map(repr, bad))}",
                                hint=f"its columns are {', '.join(known)} (describe_table)")
        return list(names)

    def key_of(self, table: str, row: dict[str, Any], rowid: int) -> Any:
        """A row's key for the changelog: its primary key's value (a dict for a composite key), else its rowid."""
        pk = sorted((c for c in self.columns(table) if c["primary_key"]), key=lambda c: c["primary_key"])
        if len(pk) == 1:
            return row[pk[0]["name"]]
        if pk:
            return {c["name"]: row[c["name"]] for c in pk}
        return rowid

    # -- reads ----------------------------------------------------------------------------------------------
    def list_tables(self) -> list[dict[str, Any]]:
        conn = self._writer()
        return [{"name": t, "rows": conn.execute(f"SELECT count(*) FROM {quote(t)}").fetchone()[0],
                 "writable": t in self.writable} for t in self.visible]

    def query(self, sql: str, params: list[Any], limit: int | None) -> dict[str, Any]:
        """One SELECT (or WITH ... SELECT) on the visible tables, at most `limit` (<= max_rows) rows."""
        text = sql.strip().rstrip(";").strip()
        first = text.split(None, 1)[0].upper() if text else ""
        if first not in ("SELECT", "WITH", "VALUES"):
            raise DatabaseError("not_a_select", "query runs one SELECT statement only",
                                hint="use insert_row, update_rows or delete_rows to change data")
        if len(text) > MAX_SQL_CHARS:
            raise DatabaseError("query_too_long", f"the query is longer than {MAX_SQL_CHARS} characters")
        cap = min(limit or self.settings.max_rows, self.settings.max_rows)
        reader = self.reader
        assert reader is not None
        denied: list[str] = []
        calls = [0]

        def authorize(action: int, arg1: str | None, arg2: str | None, db: str | None, inner: str | None) -> int:
            # a hidden table or the schema is refused; other names (a WITH clause's) are no tables of the file
            hidden = arg1 is not None and (arg1 in self.all_tables or arg1.lower().startswith("sqlite_"))
            if action == sqlite3.SQLITE_READ and hidden and arg1 not in self.visible:
                denied.append(f"reading {arg1!r}")
                return sqlite3.SQLITE_DENY
            if action in _READ_ACTIONS:
                return sqlite3.SQLITE_OK
            denied.append(f"action {action}")
            return sqlite3.SQLITE_DENY

        def progress() -> int:
            calls[0] += 1
            return 1 if calls[0] > MAX_PROGRESS_CALLS else 0

        reader.set_authorizer(authorize)
        reader.set_progress_handler(progress, PROGRESS_EVERY)
        try:
            cursor = reader.execute(text, list(params))
            rows = cursor.fetchmany(cap + 1)
        except sqlite3.ProgrammingError as exc:
            raise DatabaseError("bad_query", f"{exc}", hint="send one SELECT; pass values as params (?)") from None
        except sqlite3.DatabaseError as exc:
            if denied:
                raise DatabaseError("not_allowed", f"the query is refused ({denied[0]}): it may only read the "
                                    f"tables {', '.join(self.visible)}") from None
            if calls[0] > MAX_PROGRESS_CALLS:
                raise DatabaseError("query_too_costly", "the query did too much work and was stopped",
                                    hint="narrow it down (WHERE, LIMIT)") from None
            raise DatabaseError("bad_query", str(exc)) from None
        finally:
            reader.set_authorizer(None)
            reader.set_progress_handler(None, 0)
        columns = [d[0] for d in cursor.description or []]
        cursor.close()
        truncated = len(rows) > cap
        rows = rows[:cap]
        return {"columns": columns, "rows": [dict(zip(columns, map(jsonable, r), strict=False)) for r in rows],
                "row_count": len(rows), "truncated": truncated}

    def rows(self, table: str, where: dict[str, Any] | None = None) -> list[tuple[int, dict[str, Any]]]:
        """(rowid, row) of the rows matching `where` (column = value each), in rowid order."""
        clause, values = self._where(table, where or {})
        cursor = self._writer().execute(f"SELECT rowid, * FROM {quote(table)}{clause} ORDER BY rowid", values)
        names = [d[0] for d in cursor.description][1:]
        return [(r[0], dict(zip(names, map(jsonable, r[1:]), strict=True))) for r in cursor.fetchall()]

    def _where(self, table: str, where: dict[str, Any]) -> tuple[str, list[Any]]:
        if not where:
            return "", []
        names = self._checked_columns(table, where, "where")
        clause = " AND ".join(f"{quote(n)} IS ?" for n in names)
        return f" WHERE {clause}", [where[n] for n in names]

    # -- writes (each in one transaction) -------------------------------------------------------------------
    def insert(self, table: str, values: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        names = self._checked_columns(table, values, "values")
        sql = (f"INSERT INTO {quote(table)} ({', '.join(map(quote, names))}) VALUES ({', '.join('?' * len(names))})"
               if names else f"INSERT INTO {quote(table)} DEFAULT VALUES")
        with self._transaction() as conn:
            rowid = conn.execute(sql, [values[n] for n in names]).lastrowid
        assert rowid is not None
        return rowid, self._row(table, rowid)

    def update(self, table: str, values: dict[str, Any], where: dict[str, Any]) -> list[tuple[int, dict, dict]]:
        names = self._checked_columns(table, values, "values")
        if not names:
            raise DatabaseError("nothing_to_update", "values is empty", hint='give {"column": new value, ...}')
        self._require_where(where)
        before = self.rows(table, where)
        assignments = ", ".join(f"{quote(n)} = ?" for n in names)
        with self._transaction() as conn:
            for rowid, _row in before:
                conn.execute(f"UPDATE {quote(table)} SET {assignments} WHERE rowid = ?",
                             [*(values[n] for n in names), rowid])
        return [(rowid, row, self._row(table, rowid)) for rowid, row in before]

    def delete(self, table: str, where: dict[str, Any]) -> list[tuple[int, dict]]:
        self._require_where(where)
        before = self.rows(table, where)
        with self._transaction() as conn:
            for rowid, _row in before:
                conn.execute(f"DELETE FROM {quote(table)} WHERE rowid = ?", [rowid])
        return before

    def add_rows(self, batches: dict[str, list[dict[str, Any]]]) -> dict[str, int]:
        """data/add: rows for any table of the database (the task's data plane, not the agent's), all or none."""
        counts: dict[str, int] = {}
        with self._transaction() as conn:
            for table, rows in batches.items():
                if table not in self.all_tables:
                    raise DatabaseError("unknown_table", f"no table {table!r}",
                                        hint=f"the tables are {', '.join(self.all_tables)}")
                for row in rows:
                    if not isinstance(row, dict):
                        raise DatabaseError("bad_rows", f"{table}: each row is an object of column: value")
                    names = self._checked_columns(table, row, table)
                    conn.execute(f"INSERT INTO {quote(table)} ({', '.join(map(quote, names))}) "
                                 f"VALUES ({', '.join('?' * len(names))})", [row[n] for n in names])
                counts[table] = counts.get(table, 0) + len(rows)
        return counts

    def dump(self) -> dict[str, list[dict[str, Any]]]:
        """data/get: every row of every table, by table."""
        return {table: [row for _rowid, row in self.rows(table)] for table in self.all_tables}

    @staticmethod
    def _require_where(where: dict[str, Any]) -> None:
        if not where:
            raise DatabaseError("where_required", "where is empty: it would change every row",
                                hint='name the rows: {"id": 42}')

    def _row(self, table: str, rowid: int) -> dict[str, Any]:
        cursor = self._writer().execute(f"SELECT * FROM {quote(table)} WHERE rowid = ?", [rowid])
        names = [d[0] for d in cursor.description]
        found = cursor.fetchone()
        return dict(zip(names, map(jsonable, found), strict=True)) if found else {}

    def _transaction(self) -> _Transaction:
        return _Transaction(self._writer())


class _Transaction:
    """BEGIN ... COMMIT, or ROLLBACK when the block raises; SQLite errors become DatabaseErrors."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if kind is None:
            self.conn.execute("COMMIT")
            return
        self.conn.execute("ROLLBACK")
        if isinstance(exc, sqlite3.IntegrityError):
            raise DatabaseError("constraint_failed", f"refused by the database: {exc}", hint="nothing was written")
        if isinstance(exc, sqlite3.Error):
            raise DatabaseError("write_failed", f"{type(exc).__name__}: {exc}", hint="nothing was written")
