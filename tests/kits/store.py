"""Opening a real DuckDB store in a test's tmp dir (imported by the store tests and conftest)."""

from __future__ import annotations

from stores.database import DuckDBStore


def open_store(tmp_path, flush_interval: float = 0.2) -> DuckDBStore:
    return DuckDBStore(tmp_path / "store.duckdb", tmp_path / "objects", flush_interval=flush_interval)
