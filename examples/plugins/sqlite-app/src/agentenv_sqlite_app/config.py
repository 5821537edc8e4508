"""The `sqlite_app` env.toml: what it accepts, and the settings its server gets.

    type = "sqlite_app"
    database = "shop.db"            # a SQLite file in the env's folder (or schema_sql = "schema.sql")
    tables = ["orders", "customers"]  # the tables the agent sees (default: all)
    read_only = false
    write_tables = ["orders"]       # the tables the agent may write (default: every visible one)
    max_rows = 200                  # rows a query returns at most

The record is a subclass of agentenv-local's McpServerEnv: its server is always this package's own
(`module` is filled in, never given), run as a subprocess that gets the settings as JSON in SETTINGS_ENV.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentenv_local.hosting.envs.records import McpServerEnv

SERVER_MODULE = "agentenv_sqlite_app.server:SqliteApp"
SETTINGS_ENV = "AGENTENV_SQLITE_APP_SETTINGS"
# keys of McpServerEnv that would choose another server: this type always runs its own
_NOT_HERE = ("module", "command", "url", "image", "container_port", "run_as")


def path_problem(rel: str) -> str | None:
    """Why `rel` is not a plain relative path inside the env's folder, or None."""
    parts = rel.replace("\\", "/").split("/")
    if not rel or rel.startswith(("/", "~")) or (len(rel) > 1 and rel[1] == ":"):
        return f"{rel!r} must be a path relative to the env's folder"
    if any(part in ("", ".", "..") for part in parts) or "\0" in rel:
        return f"{rel!r} must stay inside the env's folder (no '..', '.' or empty parts)"
    if any(part.startswith(".") for part in parts):
        return f"{rel!r}: files whose name starts with '.' are not stored with the env"
    return None


class Settings(BaseModel):
    """What the server needs: the env.toml's keys about the database."""

    model_config = ConfigDict(extra="forbid")

    database: str | None = None
    schema_sql: str | None = None
    tables: list[str] | None = None
    read_only: bool = False
    write_tables: list[str] | None = None
    max_rows: int = Field(default=200, ge=1, le=10_000)

    def to_env(self) -> str:
        return json.dumps(self.model_dump(mode="json"))

    @classmethod
    def from_env(cls, text: str) -> Settings:
        return cls.model_validate_json(text)


class SqliteAppEnv(McpServerEnv):
    """env.toml of `type = "sqlite_app"` (unknown keys are refused, each problem named by its key)."""

    # the env type group requires the record's `type` to be Literal[its name]; mypy sees a narrowed override
    type: Literal["sqlite_app"] = "sqlite_app"  # type: ignore[assignment]
    module: str | None = SERVER_MODULE
    database: str | None = None
    schema_sql: str | None = None
    tables: list[str] | None = Field(default=None, min_length=1)
    read_only: bool = False
    write_tables: list[str] | None = None
    max_rows: int = Field(default=200, ge=1, le=10_000)

    @model_validator(mode="before")
    @classmethod
    def _own_server(cls, data: Any) -> Any:
        if isinstance(data, dict):
            # a stored env version holds the module this type filled in
            given = [key for key in _NOT_HERE if key in data and not (key == "module" and data[key] == SERVER_MODULE)]
            if given:
                raise ValueError(f"{', '.join(given)}: a sqlite_app env serves its database with its own server; "
                                 "drop these keys (use type = \"mcp_server\" for a server of your own)")
        return data

    @model_validator(mode="after")
    def _database(self) -> SqliteAppEnv:
        if (self.database is None) == (self.schema_sql is None):
            raise ValueError('give exactly one of database = "file.db" (a SQLite file in the env\'s folder) '
                             'and schema_sql = "schema.sql" (SQL that creates and fills it)')
        for key in ("database", "schema_sql"):
            rel = getattr(self, key)
            if rel is not None and (problem := path_problem(rel)):
                raise ValueError(f"{key}: {problem}")
        if self.read_only and self.write_tables:
            raise ValueError("write_tables: a read_only env has no writable tables; drop one of the two")
        if self.tables is not None and self.write_tables is not None:
            hidden = [t for t in self.write_tables if t not in self.tables]
            if hidden:
                raise ValueError(f"write_tables: {', '.join(map(repr, hidden))} not in tables (the agent could "
                                 "write a table it cannot see)")
        return self

    def settings(self) -> Settings:
        return Settings(database=self.database, schema_sql=self.schema_sql, tables=self.tables,
                        read_only=self.read_only, write_tables=self.write_tables, max_rows=self.max_rows)

