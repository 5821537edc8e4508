"""A small query builder over JSON fields, serializable so it can cross the hub socket.

    Query("tasks").where("type", "eq", "file").sort("created_at", desc=True).limit(5)

Operators: eq, ne, gte, lte, in, exists. Paths are dotted (`metadata.owner`). The columns
`id`, `version` and `created_at` are addressed directly; everything else lives in the JSON body.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

OPERATORS = ("eq", "ne", "gte", "lte", "in", "exists")
_PATH_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*)*$")


@dataclass
class Query:
    collection: str
    filters: list[tuple[str, str, Any]] = field(default_factory=list)
    order: list[tuple[str, bool]] = field(default_factory=list)
    max_rows: int | None = None
    latest: bool = True  # only the newest version of each id

    def where(self, path: str, op: str, value: Any = True) -> "Query":
        if op not in OPERATORS:
            raise ValueError(f"unknown operator {op!r}; use one of {', '.join(OPERATORS)}")
        if not _PATH_RE.match(path):
            raise ValueError(f"bad field path {path!r}: use dotted names like metadata.owner")
        self.filters.append((path, op, value))
        return self

    def sort(self, path: str, desc: bool = False) -> "Query":
        if not _PATH_RE.match(path):
            raise ValueError(f"bad field path {path!r}")
        self.order.append((path, desc))
        return self

    def limit(self, n: int) -> "Query":
        self.max_rows = n
        return self

    def all_versions(self) -> "Query":
        self.latest = False
        return self

    def to_wire(self) -> dict:
        return {"collection": self.collection, "filters": [list(f) for f in self.filters],
                "order": [list(o) for o in self.order], "limit": self.max_rows, "latest": self.latest}

    @classmethod
    def from_wire(cls, data: dict) -> "Query":
        q = cls(data["collection"], latest=data.get("latest", True))
        for path, op, value in data.get("filters", []):
            q.where(path, op, value)
        for path, desc in data.get("order", []):
            q.sort(path, desc)
        if data.get("limit") is not None:
            q.limit(int(data["limit"]))
        return q


def compile_filters(query: Query, columns: frozenset[str]) -> tuple[str, list[Any]]:
    """SQL WHERE clause (without the keyword) and its parameters."""
    clauses, params = [], []
    for path, op, value in query.filters:
        expr, params_for = _field_expr(path, value, columns)
        if op == "exists":
            if path in columns:
                clauses.append(f"({path} IS {'NOT ' if value else ''}NULL)")
            else:
                clauses.append(f"({'' if value else 'NOT '}json_exists(body, ?))")
                params.append(_json_path(path))
            continue
        if op == "in":
            values = list(value)
            if not values:
                clauses.append("FALSE")
                continue
            sub = []
            for v in values:
                e, p = _field_expr(path, v, columns)
                sub.append(f"{e} = ?")
                params.extend(p)
                params.append(_sql_value(v))
            clauses.append("(" + " OR ".join(sub) + ")")
            continue
        sql_op = {"eq": "=", "ne": "IS DISTINCT FROM", "gte": ">=", "lte": "<="}[op]
        if value is None:
            params.extend(params_for)
            clauses.append(f"({expr} IS {'NOT ' if op == 'ne' else ''}NULL)")
            continue
        params.extend(params_for)
        params.append(_sql_value(value))
        clauses.append(f"({expr} {sql_op} ?)")
    return (" AND ".join(clauses) or "TRUE"), params


def compile_order(query: Query, columns: frozenset[str]) -> tuple[str, list[Any]]:
    if not query.order:
        return "", []
    parts, params = [], []
    for path, desc in query.order:
        if path in columns:
            parts.append(f"{path} {'DESC' if desc else 'ASC'} NULLS LAST")
        else:
            # Sort numbers numerically and strings lexically: numeric key first, text second.
            parts.append(f"TRY_CAST(json_extract_string(body, ?) AS DOUBLE) {'DESC' if desc else 'ASC'} NULLS LAST")
            parts.append(f"json_extract_string(body, ?) {'DESC' if desc else 'ASC'} NULLS LAST")
            params += [_json_path(path), _json_path(path)]
    return "ORDER BY " + ", ".join(parts), params


def _json_path(path: str) -> str:
    return "$." + path


def _field_expr(path: str, value: Any, columns: frozenset[str]) -> tuple[str, list[Any]]:
    if path in columns:
        return path, []
    if isinstance(value, bool):
        return "CAST(json_extract(body, ?) AS VARCHAR)", [_json_path(path)]
    if isinstance(value, (int, float)):
        return "TRY_CAST(json_extract_string(body, ?) AS DOUBLE)", [_json_path(path)]
    return "json_extract_string(body, ?)", [_json_path(path)]


def _sql_value(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return float(value)
    return value
