"""The DuckDB side of the core's Query builder (agentenv_local.query): a Query compiled to SQL over the
`body` JSON column and the real columns (`id`, `version`, `created_at`, ...) of a table."""

from __future__ import annotations

from typing import Any

from agentenv_local.query import OPERATORS, Query

__all__ = ["OPERATORS", "Query", "compile_filters", "compile_order"]


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
