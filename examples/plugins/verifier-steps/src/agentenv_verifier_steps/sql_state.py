"""`sql_state_verifier`: SELECT queries over a task's state, each checked against expected rows or values.

Two sources, either or both:
- `sqlite`: a SQLite file in a deployed sandbox (`sqlite_path`), copied out through the sandbox API (which never
  follows a link) into the step's scratch folder, and opened read-only behind an authorizer that allows reads only;
- `env`: a deployed env's data plane: `data/get` on each of its servers, every list under a data part's key loaded
  into an in-memory DuckDB table `"<server>"."<key>"` (and `<key>` alone when one server has that key), with file
  access switched off before any query runs.
Every query must be one SELECT (refused before the run otherwise); at most `max_rows` rows are read from each.
The scratch folder stays until the step's teardown, so a run kept with `--keep` leaves the copies to look at.
"""

from __future__ import annotations

import asyncio
import datetime
import decimal
import json
import sqlite3
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field

from agentenv_local.errors import AgentenvError, StepError
from agentenv_local.tasks.scoring import ScoreAggregator
from agentenv_local.tasks.step import Step

from .common import Criterion, Outcome, name_problem, open_scratch, remove_scratch, row
from .sql_readonly import statement_problem

if TYPE_CHECKING:
    import duckdb

    from agentenv_local.tasks.context import StepContext

SQLITE_MAGIC = b"SQLite format 3\x00"
_SQLITE_READS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
                           getattr(sqlite3, "SQLITE_RECURSIVE", 33)})


class SqlCheck(Criterion):
    query: str = Field(min_length=1)
    source: Literal["sqlite", "env"] | None = None  # None: the step's only source
    expect_rows: list[list[Any]] | None = None
    expect_value: Any = None
    expect_count: int | None = Field(default=None, ge=0)
    ordered: bool = True  # expect_rows: in this order (false: as a multiset)

    def expectations(self) -> list[str]:
        return [k for k in ("expect_rows", "expect_value", "expect_count") if k in self.model_fields_set]


def plain(value: Any) -> Any:
    """A database value as JSON would hold it (so it compares with the task's expectations and is recorded)."""
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON values: true is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return bool(a == b)


def judge(check: SqlCheck, rows: list[list[Any]], more: bool, max_rows: int) -> Outcome:
    if more:
        return Outcome(passed=False, justification=f"the query returned more than {max_rows} rows (max_rows)")
    shown = json.dumps(rows[:5], default=str)[:300] + (" …" if len(rows) > 5 else "")
    extra = {"rows": rows[:20], "row_count": len(rows)}
    failures = []
    if "expect_count" in check.model_fields_set and len(rows) != check.expect_count:
        failures.append(f"{len(rows)} row(s), wanted {check.expect_count}")
    if "expect_value" in check.model_fields_set:
        if len(rows) != 1 or len(rows[0]) != 1:
            failures.append(f"expect_value needs one row of one column, got {len(rows)} row(s)")
        elif not _same(rows[0][0], check.expect_value):
            failures.append(f"value {json.dumps(rows[0][0], default=str)}, wanted {json.dumps(check.expect_value)}")
    if check.expect_rows is not None:
        want = [plain(r) for r in check.expect_rows]
        if check.ordered:
            ok = _same(rows, want)
        else:
            key = lambda r: json.dumps(r, sort_keys=True, default=str)  # noqa: E731 - a sort key
            ok = len(rows) == len(want) and all(_same(x, y) for x, y in zip(sorted(rows, key=key),
                                                                             sorted(want, key=key)))
        if not ok:
            failures.append(f"rows {shown}, wanted {json.dumps(want)[:300]}")
    if failures:
        return Outcome(passed=False, justification="; ".join(failures), extra=extra)
    return Outcome(passed=True, justification=f"{len(rows)} row(s): {shown}", extra=extra)


class SqlStateVerifierStep(Step):
    type: ClassVar[str] = "sql_state_verifier"
    records_only: ClassVar[bool] = True
    env_ref_fields: ClassVar[tuple[str, ...]] = ("env_id",)

    sandbox_name: str | None = None  # None: the run's only deployed sandbox
    sqlite_path: str | None = None
    env_id: str | None = None
    env_step_id: str | None = None
    checks: list[SqlCheck] = Field(min_length=1)
    max_rows: int = Field(default=1000, ge=1, le=100_000)
    max_db_bytes: int = Field(default=64 * 1024 * 1024, ge=1, le=1024 * 1024 * 1024)
    env_timeout_seconds: float = Field(default=60, gt=0, le=3600)
    score_aggregator: ScoreAggregator = "all_pass"
    verifier_id: str | None = None

    # -- before any run ---------------------------------------------------------------------------------
    def sources(self) -> list[str]:
        return [s for s, on in (("sqlite", self.sqlite_path is not None), ("env", self.env_id is not None)) if on]

    def config_problems(self) -> list[str]:
        problems: list[str] = []
        sources = self.sources()
        if not sources:
            problems.append("give sqlite_path (a SQLite file in a sandbox) and/or env_id (a deployed env's state)")
        if self.sandbox_name is not None and self.sqlite_path is None:
            problems.append("sandbox_name: goes with sqlite_path")
        if self.env_step_id is not None and self.env_id is None:
            problems.append("env_step_id: goes with env_id")
        if why := name_problem("sandbox_name", self.sandbox_name):
            problems.append(why)
        if self.sqlite_path is not None and (not self.sqlite_path.strip() or "\x00" in self.sqlite_path):
            problems.append(f"sqlite_path: {self.sqlite_path!r} is not a path")
        for i, check in enumerate(self.checks):
            where = f"checks[{i}]"
            source = check.source or (sources[0] if len(sources) == 1 else None)
            if check.source is None and len(sources) > 1:
                problems.append(f"{where}: say which source it reads (\"source\": \"sqlite\" or \"env\")")
            elif check.source is not None and check.source not in sources:
                problems.append(f"{where}.source: {check.source!r} is not configured on this step "
                                f"(set {'sqlite_path' if check.source == 'sqlite' else 'env_id'})")
            if source is not None and (why := statement_problem(check.query, "sqlite" if source == "sqlite"
                                                                  else "duckdb")):
                problems.append(f"{where}.query: {why}")
            if not check.expectations():
                problems.append(f"{where}: give what to expect (expect_rows, expect_value or expect_count)")
        return problems

    # -- the run ----------------------------------------------------------------------------------------
    async def execute(self, ctx: StepContext) -> None:
        if problems := self.config_problems():
            raise StepError(f"step {self.id!r} is misconfigured: " + "; ".join(problems))
        scratch = open_scratch(ctx)
        ctx.log(f"scratch folder {scratch} (removed at teardown)")
        sqlite_db: sqlite3.Connection | None = None
        duck: duckdb.DuckDBPyConnection | None = None
        try:
            if self.sqlite_path is not None:
                sqlite_db = await self._open_sqlite(ctx, scratch)
            if self.env_id is not None:
                duck = await self._load_env(ctx, scratch)
            rows = []
            for index, check in enumerate(self.checks):
                source = check.source or self.sources()[0]
                try:
                    if source == "sqlite":
                        assert sqlite_db is not None
                        result, more = await asyncio.to_thread(_run_sqlite, sqlite_db, check.query, self.max_rows)
                    else:
                        assert duck is not None
                        result, more = await asyncio.to_thread(_run_duckdb, duck, check.query, self.max_rows)
                    outcome = judge(check, result, more, self.max_rows)
                except (sqlite3.Error, _duck_error()) as exc:
                    outcome = Outcome(passed=False, justification=f"the query failed: {type(exc).__name__}: {exc}")
                rows.append(row(index, {**check.model_dump(exclude_unset=True), "source": source}, outcome))
        finally:  # the clients; the scratch folder is the teardown's
            if sqlite_db is not None:
                sqlite_db.close()
            if duck is not None:
                duck.close()
        verifier_id = self.verifier_id or self.id
        score = ctx.record_verification(verifier_id, rows, self.score_aggregator)
        ctx.log(f"{verifier_id}: score {score:g} ({sum(1 for r in rows if r['result'])}/{len(rows)} checks passed)")

    async def teardown(self, ctx: StepContext) -> None:
        for path in remove_scratch(ctx):
            ctx.log(f"removed scratch folder {path}")

    async def _open_sqlite(self, ctx: StepContext, scratch: Path) -> sqlite3.Connection:
        from agentenv_local.steps import resolve_sandbox_name

        assert self.sqlite_path is not None
        name = resolve_sandbox_name(ctx, self.sandbox_name)
        sandbox = await ctx.sandbox(name)
        try:
            data = await sandbox.read_file(self.sqlite_path)  # the sandbox API: a link is refused, not followed
        except AgentenvError as exc:
            raise StepError(f"step {self.id!r}: cannot read {self.sqlite_path!r} in sandbox {name!r}: {exc.message}",
                            hint="is the path right, and the file a regular file (not a link)?") from exc
        if len(data) > self.max_db_bytes:
            raise StepError(f"step {self.id!r}: {self.sqlite_path} is {len(data):,} bytes, over max_db_bytes "
                            f"({self.max_db_bytes:,})", hint="raise max_db_bytes")
        if data and not data.startswith(SQLITE_MAGIC):
            raise StepError(f"step {self.id!r}: {self.sqlite_path} in sandbox {name!r} is not a SQLite database")
        copy = scratch / "sandbox.sqlite"
        copy.write_bytes(data)
        db = sqlite3.connect(f"{copy.as_uri()}?mode=ro&immutable=1", uri=True, check_same_thread=False)
        db.set_authorizer(lambda action, *_: sqlite3.SQLITE_OK if action in _SQLITE_READS else sqlite3.SQLITE_DENY)
        ctx.log(f"copied {self.sqlite_path} ({len(data):,} bytes) from sandbox {name!r}")
        return db

    async def _load_env(self, ctx: StepContext, scratch: Path) -> duckdb.DuckDBPyConnection:
        from agentenv_local.steps.env_gateway import EnvGateway, RpcError

        assert self.env_id is not None
        exported: dict[str, list] = {}
        async with EnvGateway(ctx, self.env_id, self.env_timeout_seconds, self.env_step_id) as gw:
            for child in await gw.children():
                try:
                    result = await gw.rpc(child, "data/get")
                except RpcError as exc:
                    raise StepError(f"step {self.id!r}: data/get on {gw.where(child)} failed: {exc.message}",
                                    hint="the env's servers must offer data/get for their state to be checked") from exc
                parts = result.get("parts") if isinstance(result, dict) else None
                if not isinstance(parts, list):
                    raise StepError(f"step {self.id!r}: data/get on {gw.where(child)} returned no parts list")
                exported[child] = parts
        duck, tables = await asyncio.to_thread(load_tables, exported, scratch)
        ctx.log(f"loaded env {self.env_id!r} state: {', '.join(tables) or 'no tables'}")
        return duck


def _tables_of(exported: dict[str, list]) -> dict[tuple[str, str], list]:
    """(server, key) -> rows, for every list under a key of a data part."""
    out: dict[tuple[str, str], list] = {}
    for child, parts in exported.items():
        for part in parts:
            data = part.get("data") if isinstance(part, dict) and part.get("kind") == "data" else None
            if isinstance(data, dict):
                for key, value in data.items():
                    if isinstance(value, list):
                        out.setdefault((child, str(key)), []).extend(value)
    return out


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def load_tables(exported: dict[str, list], scratch: Path) -> tuple[duckdb.DuckDBPyConnection, list[str]]:
    """An in-memory DuckDB with one table per (server, key), file access off once they are in."""
    import duckdb

    duck = duckdb.connect(":memory:")
    try:
        tables = _tables_of(exported)
        names = []
        by_key: dict[str, list[str]] = {}
        for n, ((child, key), items) in enumerate(sorted(tables.items())):
            duck.execute(f"CREATE SCHEMA IF NOT EXISTS {_quote(child)}")
            table = f"{_quote(child)}.{_quote(key)}"
            if not items:
                duck.execute(f"CREATE TABLE {table} (value JSON)")
            else:
                feed = scratch / f"table-{n}.ndjson"
                feed.write_text("".join(json.dumps(item if isinstance(item, dict) else {"value": item}) + "\n"
                                        for item in items))
                duck.execute(f"CREATE TABLE {table} AS SELECT * FROM read_json(?, format = 'newline_delimited')",
                             [str(feed)])
            names.append(f"{child}.{key}")
            by_key.setdefault(key, []).append(table)
        for key, owners in by_key.items():
            if len(owners) == 1:
                duck.execute(f"CREATE VIEW main.{_quote(key)} AS SELECT * FROM {owners[0]}")
        duck.execute("SET enable_external_access = false")
        duck.execute("SET lock_configuration = true")
        return duck, names
    except BaseException:
        duck.close()
        raise


def _run_sqlite(db: sqlite3.Connection, query: str, max_rows: int) -> tuple[list[list[Any]], bool]:
    cursor = db.execute(query)
    try:
        got = cursor.fetchmany(max_rows + 1)
    finally:
        cursor.close()
    return [plain(list(r)) for r in got[:max_rows]], len(got) > max_rows


def _run_duckdb(duck: duckdb.DuckDBPyConnection, query: str, max_rows: int) -> tuple[list[list[Any]], bool]:
    import duckdb

    if why := statement_problem(query, "duckdb"):  # checked before the run too; this database is throwaway anyway
        raise duckdb.InvalidInputException(why)
    cursor = duck.cursor()
    try:
        got = cursor.execute(query).fetchmany(max_rows + 1)
    finally:
        cursor.close()
    return [plain(list(r)) for r in got[:max_rows]], len(got) > max_rows


def _duck_error() -> type[Exception]:
    import duckdb

    return duckdb.Error
