"""Is a query one read-only SELECT? Checked twice: before the run (here: pure, no database), and while it runs
(the SQLite side opens the copy read-only behind an authorizer that allows reads only; the DuckDB side runs in a
throwaway in-memory database with file access switched off)."""

from __future__ import annotations

import re

import duckdb

_LEADING = re.compile(r"^(\s+|--[^\n]*(\n|\Z)|/\*.*?\*/)*", re.DOTALL)
_FIRST_WORD = re.compile(r"[A-Za-z]+")


def _first_keyword(query: str) -> str:
    lead = _LEADING.match(query)
    rest = query[lead.end():] if lead else query
    m = _FIRST_WORD.match(rest)
    return m.group(0).upper() if m else ""


def statement_problem(query: str, dialect: str) -> str | None:
    """Why `query` is not a single read-only SELECT, or None. `dialect` is "duckdb" or "sqlite": a query DuckDB's
    parser cannot read is refused for DuckDB, and for SQLite left to its keyword check and the run-time authorizer
    (SQLite's syntax is not DuckDB's)."""
    if not query.strip():
        return "the query is empty"
    try:
        statements = duckdb.extract_statements(query)
    except duckdb.Error as exc:
        if dialect == "duckdb":
            return f"does not parse: {str(exc).splitlines()[0]}"
        statements = None
    if statements is not None:
        if len(statements) != 1:
            return f"holds {len(statements)} statements; give one SELECT"
        kind = statements[0].type
        if kind != duckdb.StatementType.SELECT:
            article = "an" if kind.name[0] in "AEIOU" else "a"
            return f"is {article} {kind.name} statement; only SELECT queries are run (the check is read-only)"
    first = _first_keyword(query)
    if first not in ("SELECT", "WITH", "VALUES"):
        return f"starts with {first or 'nothing'!r}; only SELECT queries are run (the check is read-only)"
    return None
