"""The store's writer thread (stores/writer.py): writes in submission order, many per transaction, a
failing write reported alone (the rest of its batch kept), everything queued written at close."""

from __future__ import annotations

import threading

import pytest
from kits.store import open_store

from agentenv_local.errors import NotFoundError, StoreError


def _run(store, run_id: str) -> None:
    store.runs.create({"run_id": run_id, "task_id": "t", "task_version": 1, "status": "queued", "steps": {}})


def test_writes_land_in_order_and_batch_into_fewer_commits(store):
    _run(store, "r1")
    hold = threading.Event()
    blocker = store.writer.submit(hold.wait, 30)  # keeps the thread busy while the rest queue up
    futures = [store.writer.submit(store.runs.journal_append, "r1", f"s{i}", "success", {"i": i})
               for i in range(200)]
    futures.append(store.writer.submit(store.runs.update, "r1", {"status": "running"}))
    before = store.writer.batches
    hold.set()
    assert blocker.result(30) is True
    assert [f.result(30) for f in futures[:-1]] == list(range(1, 201))  # seq in submission order
    assert futures[-1].result(30)["status"] == "running"
    commits = store.writer.batches - before
    assert 1 <= commits <= 201 // 10  # at most 64 writes per commit: 4 of them, never one per write
    assert [e["body"]["i"] for e in store.runs.journal("r1")] == list(range(200))
    assert store.runs.get("r1")["status"] == "running"


def test_a_failing_write_fails_alone_and_its_batch_is_kept(store):
    _run(store, "r1")
    hold = threading.Event()
    store.writer.submit(hold.wait, 30)
    ok_before = store.writer.submit(store.runs.journal_append, "r1", "a", "success", {})
    bad = store.writer.submit(store.runs.update, "missing-run", {"status": "running"})
    ok_after = store.writer.submit(store.runs.journal_append, "r1", "b", "success", {})
    hold.set()
    assert ok_before.result(30) == 1 and ok_after.result(30) == 2
    with pytest.raises(NotFoundError):
        bad.result(30)
    assert [e["step_id"] for e in store.runs.journal("r1")] == ["a", "b"]


def test_close_writes_what_is_queued_and_refuses_more(tmp_path):
    store = open_store(tmp_path)
    _run(store, "r1")
    futures = [store.writer.submit(store.runs.journal_append, "r1", f"s{i}", "success", {}) for i in range(50)]
    store.close()
    assert all(f.done() for f in futures)
    with pytest.raises(StoreError, match="closed"):
        store.writer.submit(store.runs.get, "r1")
    again = open_store(tmp_path)
    try:
        assert len(again.runs.journal("r1")) == 50
    finally:
        again.close()


def test_update_with_merges_what_the_change_returns_from_one_read(store):
    _run(store, "r1")
    store.runs.update("r1", {"steps": {"a": {"status": "waiting"}}})

    def change(run: dict) -> dict:
        steps = run["steps"]
        steps["a"] = {**steps["a"], "status": "passed"}
        return {"steps": steps, "current_step": None}
    merged = store.runs.update_with("r1", change)
    assert merged["rev"] == 3 and merged["steps"] == {"a": {"status": "passed"}}
    got = store.runs.get("r1")
    assert got["steps"] == {"a": {"status": "passed"}} and got["current_step"] is None and got["task_id"] == "t"
    with pytest.raises(NotFoundError):
        store.runs.update_with("missing", change)


def _as_in_the_file(store, run_id: str) -> dict:
    """The run's row read from DuckDB itself, past what RunStore keeps of runs in flight."""
    from stores.runs import _row

    with store.runs._lock:
        return _row(store.runs._con.execute("SELECT * FROM runs WHERE run_id = ?", [run_id]).fetchone())


def test_what_the_store_keeps_of_a_run_in_flight_is_what_the_file_holds_after_a_rollback(store):
    _run(store, "r1")
    store.runs.update("r1", {"status": "running", "steps": {"a": {"status": "running"}}})
    hold = threading.Event()
    store.writer.submit(hold.wait, 30)
    good = store.writer.submit(store.runs.update, "r1", {"steps": {"a": {"status": "passed"}}})
    seq = store.writer.submit(store.runs.journal_append, "r1", "a", "success", {})
    bad = store.writer.submit(store.runs.update, "missing-run", {"status": "running"})  # rolls the batch back
    hold.set()
    assert good.result(30)["steps"] == {"a": {"status": "passed"}} and seq.result(30) == 1
    with pytest.raises(NotFoundError):
        bad.result(30)
    kept = store.runs.get("r1")
    store.runs.flush()  # a run in flight's record is written behind
    assert kept == _as_in_the_file(store, "r1") and kept["rev"] == 3
    assert store.runs.journal_append("r1", "b", "success", {}) == 2


def test_a_read_run_is_a_copy_and_an_ended_run_is_read_from_the_file(store):
    _run(store, "r1")
    got = store.runs.get("r1")
    got["steps"]["x"] = {"status": "changed by the reader"}
    assert store.runs.get("r1")["steps"] == {}
    store.runs.update("r1", {"status": "passed", "score": 1})
    assert store.runs.get("r1") == _as_in_the_file(store, "r1")


def test_a_run_in_flights_changes_are_written_behind_together_and_its_end_at_once(store):
    for run_id in ("r1", "r2"):
        _run(store, run_id)
    for step in range(5):
        for run_id in ("r1", "r2"):
            store.runs.update(run_id, {"status": "running", "current_step": f"s{step}"})
    assert _as_in_the_file(store, "r1")["rev"] == 1  # not yet in the file...
    assert store.runs.get("r1")["current_step"] == "s4"  # ...but every reader sees it
    assert [r["rev"] for r in store.runs.list()] == [6, 6]  # a query writes what waits first
    assert _as_in_the_file(store, "r2")["current_step"] == "s4"
    store.runs.update("r1", {"status": "running", "current_step": "s5"})
    import time

    from stores.runs import FLUSH_AFTER_S

    time.sleep(FLUSH_AFTER_S * 5)  # written behind by itself
    assert _as_in_the_file(store, "r1")["current_step"] == "s5"
    store.runs.update("r2", {"status": "passed"})
    assert _as_in_the_file(store, "r2")["status"] == "passed"  # an end is written at once
