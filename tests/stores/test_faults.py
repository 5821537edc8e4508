"""The store's fault handling on real DuckDB files: text that is not UTF-8, a missing table, and
a failure that stops the store until it is opened again (stores/faults.py)."""

from __future__ import annotations

import duckdb
import pytest
from kits.store import open_store

from agentenv_local.errors import StoreError, ValidationError


def test_text_that_is_not_utf8_is_stored_as_escapes(store):
    name = "report\udcff.txt"  # how Python holds a file name with the byte 0xff
    store.documents.put("artifacts", "a", {"files": [name]})  # before: DuckDB InvalidInputException
    assert store.documents.get("artifacts", "a")["body"]["files"] == ["report\\xff.txt"]


def test_a_lookup_by_a_name_that_is_not_utf8_is_a_clear_error(store):
    with pytest.raises(ValidationError, match=r"'x\\\\xff' is not valid UTF-8 text"):
        store.documents.find("tasks", "x\udcff")


def test_a_dropped_table_is_reported_as_damage(tmp_path):
    open_store(tmp_path).close()
    con = duckdb.connect(str(tmp_path / "store.duckdb"))
    con.execute("DROP TABLE step_journal")
    con.close()
    with pytest.raises(StoreError, match=r"is damaged \(table\(s\) step_journal missing\)") as caught:
        open_store(tmp_path)
    assert f"mv {tmp_path / 'store.duckdb'}" in (caught.value.hint or "")


def test_a_failure_of_the_file_stops_the_store_until_it_is_reopened(tmp_path):
    store = open_store(tmp_path)
    store.documents.put("tasks", "t", {"steps": []})
    # What a write on a full disk raises, from DuckDB itself (its own connection, not a mock).
    with pytest.raises(StoreError, match="no space left"), store._guard.check():
        raise duckdb.TransactionException(
            'TransactionContext Error: Failed to commit: Could not write file "x.wal": No space left on device')
    with pytest.raises(StoreError, match="no space left"):  # reads too: the hub's runs are out of step
        store.documents.find("tasks", "t")
    with pytest.raises(StoreError, match="no space left"):  # close still closes the file, then says why
        store.close()
    reopened = open_store(tmp_path)
    assert reopened.documents.get("tasks", "t")["body"] == {"steps": []}
    reopened.close()
