"""Schema migrations: numbered, recorded once in schema_migrations, transactional."""

from __future__ import annotations

import subprocess
import sys

import duckdb
import pytest
from kits.store import open_store

from agentenv_local.errors import HubError
from stores import migrations
from stores.migrations import MIGRATIONS, apply_migrations

EXPECTED_TABLES = {"schema_migrations", "documents", "records", "runs", "step_journal", "events", "objects"}



def recorded(con) -> list[tuple[int, str, float]]:
    return con.execute("SELECT number, name, applied_at FROM schema_migrations ORDER BY number").fetchall()


def tables(con) -> set[str]:
    return {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}


def test_migration_numbers_are_unique_and_increasing():
    numbers = [n for n, _, _ in MIGRATIONS]
    assert numbers == sorted(set(numbers))
    assert numbers[0] == 1


def test_a_fresh_store_records_every_migration(tmp_path):
    s = open_store(tmp_path)
    s.close()
    con = duckdb.connect(str(tmp_path / "store.duckdb"))
    try:
        rows = recorded(con)
        assert [(n, name) for n, name, _ in rows] == [(n, name) for n, name, _ in MIGRATIONS]
        assert all(at > 0 for _, _, at in rows)
        assert EXPECTED_TABLES <= tables(con)
    finally:
        con.close()


def test_reopening_applies_nothing_new(tmp_path):
    s = open_store(tmp_path)
    s.close()
    con = duckdb.connect(str(tmp_path / "store.duckdb"))
    try:
        before = recorded(con)
        assert apply_migrations(con) == []
        assert recorded(con) == before
    finally:
        con.close()
    s = open_store(tmp_path)  # and a store opens over it happily
    s.close()


def test_only_missing_migrations_are_applied(tmp_path, monkeypatch):
    con = duckdb.connect(str(tmp_path / "raw.duckdb"))
    try:
        monkeypatch.setattr(migrations, "MIGRATIONS", MIGRATIONS[:2])
        assert apply_migrations(con) == [1, 2]
        assert "runs" not in tables(con)
        monkeypatch.setattr(migrations, "MIGRATIONS", MIGRATIONS)
        assert apply_migrations(con) == [n for n, _, _ in MIGRATIONS[2:]]
        assert apply_migrations(con) == []
        assert EXPECTED_TABLES <= tables(con)
    finally:
        con.close()


def test_a_failing_migration_is_rolled_back_and_not_recorded(tmp_path, monkeypatch):
    def _broken(con):
        con.execute("CREATE TABLE half_done (x INTEGER)")
        raise RuntimeError("migration bug")

    con = duckdb.connect(str(tmp_path / "raw.duckdb"))
    try:
        apply_migrations(con)
        monkeypatch.setattr(migrations, "MIGRATIONS", [*MIGRATIONS, (99, "broken", _broken)])
        with pytest.raises(RuntimeError, match="migration bug"):
            apply_migrations(con)
        assert "half_done" not in tables(con)
        assert 99 not in [n for n, _, _ in recorded(con)]
        # fixed, it applies on the next open
        monkeypatch.setattr(migrations, "MIGRATIONS",
                            [*MIGRATIONS, (99, "fixed", lambda c: c.execute("CREATE TABLE half_done (x INTEGER)"))])
        assert apply_migrations(con) == [99]
        assert "half_done" in tables(con)
    finally:
        con.close()


def test_data_survives_close_and_reopen(tmp_path):
    s = open_store(tmp_path)
    s.documents.put("tasks", "t", {"a": 1})
    s.records.save("sandboxes", "sb", {"state": "up"})
    s.runs.create({"run_id": "r", "task_id": "t", "task_version": 1, "status": "succeeded"})
    s.events.append("k", {"x": 1}, run_id="r")
    s.objects.put("o", b"bytes")
    s.close()
    s.close()  # closing twice is harmless
    s = open_store(tmp_path)
    try:
        assert s.documents.get("tasks", "t")["body"] == {"a": 1}
        assert s.records.get("sandboxes", "sb")["body"] == {"state": "up"}
        assert s.runs.get("r")["status"] == "succeeded"
        assert [e["body"] for e in s.events.query(run_id="r")] == [{"x": 1}]
        assert s.objects.get("o") == b"bytes"
    finally:
        s.close()


def test_a_store_held_by_another_process_gives_an_actionable_error(tmp_path):
    path = tmp_path / "store.duckdb"
    open_store(tmp_path).close()
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import duckdb, sys; c = duckdb.connect(sys.argv[1]); print('ready', flush=True); sys.stdin.read()",
         str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(HubError) as err:
            open_store(tmp_path)
        assert str(path) in err.value.message
        assert "hub" in err.value.hint
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)


def test_opening_the_store_leaves_duckdbs_python_layer_unimported(tmp_path):
    # `import duckdb` (>= 2.0) builds relations and expressions over the engine: 0.1 s of CPU per process
    # that opens the store. The stores need only the engine (stores/duckdb_engine.py).
    code = ("import sys; from pathlib import Path; from stores.database import DuckDBStore; "
            "s = DuckDBStore(Path(sys.argv[1]) / 'store.duckdb', Path(sys.argv[1]) / 'objects'); "
            "s.documents.put('tasks', 'x', {'a': 1}); s.close(); print('duckdb' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stdout + out.stderr
