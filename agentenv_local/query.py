"""A small query builder over JSON fields, serializable so it can cross the hub socket.

    Query("tasks").where("type", "eq", "file").sort("created_at", desc=True).limit(5)

Operators: eq, ne, gte, lte, in, exists. Paths are dotted (`metadata.owner`). The columns
`id`, `version` and `created_at` are addressed directly; everything else lives in the JSON body.
Backend-neutral: a store compiles it (the DuckDB store's SQL is in stores/query.py).
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
