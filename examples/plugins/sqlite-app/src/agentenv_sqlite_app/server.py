"""SqliteApp: the env a `sqlite_app` env.toml deploys, an agentenv_local.env.Env over a private copy of its database.

Started by the hub as `python -m agentenv_local.env agentenv_sqlite_app.server:SqliteApp` in the instance's folder
with the settings in AGENTENV_SQLITE_APP_SETTINGS (env_type.py). To try it by hand, from an env folder:

    AGENTENV_SQLITE_APP_SETTINGS='{"database": "shop.db"}' python -m agentenv_local.env agentenv_sqlite_app.server
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from agentenv_local.env import DataPart, Env, EnvError, ToolContext, add_data, get_data, reset_data, tool

from .config import SETTINGS_ENV, Settings
from .database import Database, DatabaseError, read_seed

READ = {"readOnlyHint": True}
Table = Annotated[str, Field(description="A table name, as list_tables gives it")]
Row = Annotated[dict[str, Any], Field(description="column: value")]
Where = Annotated[dict[str, Any], Field(description="column: value that the rows must all have (at least one)")]


def refused(exc: DatabaseError) -> EnvError:
    return EnvError(exc.code, exc.message, hint=exc.hint)


class SqliteApp(Env):
    """The tables of one SQLite database as tools; writes are reported to the gateway's changelog."""

    environment_name = "sqlite_app"
    environment_description = "A SQLite database: list, describe and query its tables; change the writable ones."
    keeps_changelog = True

    def __init__(self, folder: Path | None = None, settings: Settings | None = None):
        """`folder` and `settings` given: a library use (a DatabaseError says what is wrong). Else a server started
        by the env type: its settings from the environment, its database in the working folder; a problem ends the
        process with one line, which the deploy's error shows."""
        if settings is not None:
            self.db = Database(read_seed(folder or Path.cwd(), settings), settings)
            return
        text = os.environ.get(SETTINGS_ENV)
        if not text:
            raise SystemExit(f"sqlite_app: no settings: set {SETTINGS_ENV} (JSON), as the env type does")
        try:
            settings = Settings.from_env(text)
            self.db = Database(read_seed(folder or Path.cwd(), settings), settings)
        except DatabaseError as exc:
            raise SystemExit(f"sqlite_app: {exc.message}" + (f" ({exc.hint})" if exc.hint else "")) from None
        except ValueError as exc:  # pydantic's ValidationError: settings not written by the env type
            raise SystemExit(f"sqlite_app: bad {SETTINGS_ENV}: {exc}") from None

    def on_shutdown(self) -> None:
        self.db.remove()

    # -- tools -------------------------------------------------------------------------------------------------
    @tool(annotations=READ)
    def list_tables(self) -> dict:
        """The tables you can see: their names, row counts and whether you may write them."""
        return {"tables": self.db.list_tables()}

    @tool(annotations=READ)
    def describe_table(self, table: Table) -> dict:
        """A table's columns: name, type, not_null, default, primary_key (its position in the key, 0 if not)."""
        try:
            name = self.db.table(table)
        except DatabaseError as exc:
            raise refused(exc) from None
        return {"table": name, "columns": self.db.columns(name), "writable": name in self.db.writable}

    @tool(annotations=READ)
    def query(self, sql: Annotated[str, Field(description="One SELECT statement; ? for each value")],
              params: Annotated[list[Any], Field(description="The values of the ? placeholders, in order")] = [],  # noqa: B006  pydantic copies defaults
              limit: Annotated[int | None, Field(ge=1, description="At most this many rows (capped)")] = None
              ) -> dict:
        """Run one read-only SELECT on the visible tables. Returns columns, rows (objects), row_count and
        truncated (more rows matched than were returned)."""
        try:
            return self.db.query(sql, params, limit)
        except DatabaseError as exc:
            raise refused(exc) from None

    @tool()
    def insert_row(self, ctx: ToolContext, table: Table, values: Row) -> dict:
        """Insert one row into a writable table; returns the row as stored."""
        try:
            name = self.db.table(table, write=True)
            rowid, row = self.db.insert(name, values)
        except DatabaseError as exc:
            raise refused(exc) from None
        ctx.record_change(name, "insert", self.db.key_of(name, row, rowid), after=row)
        return {"inserted": row}

    @tool()
    def update_rows(self, ctx: ToolContext, table: Table, values: Row, where: Where) -> dict:
        """Set `values` on the rows of a writable table that match `where`; returns the rows as they are now."""
        try:
            name = self.db.table(table, write=True)
            changed = self.db.update(name, values, where)
        except DatabaseError as exc:
            raise refused(exc) from None
        for rowid, before, after in changed:
            ctx.record_change(name, "update", self.db.key_of(name, after, rowid), before=before, after=after)
        return {"updated": len(changed), "rows": [after for _rowid, _before, after in changed]}

    @tool()
    def delete_rows(self, ctx: ToolContext, table: Table, where: Where) -> dict:
        """Delete the rows of a writable table that match `where`; returns how many went."""
        try:
            name = self.db.table(table, write=True)
            gone = self.db.delete(name, where)
        except DatabaseError as exc:
            raise refused(exc) from None
        for rowid, before in gone:
            ctx.record_change(name, "delete", self.db.key_of(name, before, rowid), before=before)
        return {"deleted": len(gone)}

    # -- the data plane (the task's, not the agent's) ----------------------------------------------------------
    @reset_data
    def reset(self) -> None:
        """data/reset: back to the seed database, as the env started."""
        self.db.reset()

    @add_data
    def add(self, parts: list) -> None:
        """data/add: rows per table, {"table": [{"column": value}, ...]}, as data parts or JSON file/text parts."""
        batches: dict[str, list] = {}
        for part in parts:
            if part.kind == "data":
                data = part.data
            else:
                raw = part.read_bytes() if part.kind == "file" else part.text.encode()
                try:
                    data = json.loads(raw)
                except ValueError as exc:
                    raise EnvError("bad_rows", f"a {part.kind} part is not JSON: {exc}") from None
            if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
                raise EnvError("bad_rows", 'each part is {"table": [{"column": value}, ...]}')
            for table, rows in data.items():
                batches.setdefault(table, []).extend(rows)
        try:
            self.db.add_rows(batches)
        except DatabaseError as exc:
            raise refused(exc) from None

    @get_data
    def get(self) -> list:
        """data/get: every table's rows, {"table": [{"column": value}, ...]} (what data/add loads back)."""
        return [DataPart(data=self.db.dump())]
