"""The event log: buffered appends, flushed through DuckDB's appender by a background thread."""

from __future__ import annotations

import threading
import time

import duckdb
import pytest
from kits.store import open_store

from stores.events import EventLog
from stores.migrations import apply_migrations

DEADLINE_S = 20  # how long a poll waits before giving up; generous, never a timing assertion




def wait_for(predicate, what: str):
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    pytest.fail(f"gave up waiting for {what}")


def test_appended_events_are_visible_to_query(store):
    appended = [store.events.append("step.started", {"i": i}, run_id="r1", step_id=f"s{i}") for i in range(5)]
    got = store.events.query()
    assert [e["event_id"] for e in got] == [e["event_id"] for e in appended]
    assert got[0] == {**appended[0], "body": {"i": 0}}
    assert got[3]["step_id"] == "s3" and got[3]["run_id"] == "r1" and got[3]["kind"] == "step.started"


def test_event_ids_increase_and_fields_round_trip(store):
    a = store.events.append("a", {"text": "héllo ✓", "nested": {"x": [1, None]}}, at=100.5, virtual_at=7.25)
    b = store.events.append("b")
    assert b["event_id"] == a["event_id"] + 1
    (first, second) = store.events.query()
    assert (first["at"], first["virtual_at"]) == (100.5, 7.25)
    assert first["body"] == {"text": "héllo ✓", "nested": {"x": [1, None]}}
    assert second["body"] == {} and second["run_id"] is None and second["virtual_at"] is None


def test_query_filters(store):
    for run in ("r1", "r2"):
        for kind in ("tool.call", "tool.result", "clock.tick"):
            store.events.append(kind, {"run": run}, run_id=run)
    assert [e["kind"] for e in store.events.query(run_id="r2")] == ["tool.call", "tool.result", "clock.tick"]
    assert {e["run_id"] for e in store.events.query(kinds=["clock.tick"])} == {"r1", "r2"}
    assert len(store.events.query(run_id="r1", kinds=["tool.call", "tool.result"])) == 2
    all_events = store.events.query()
    tail = store.events.query(after_id=all_events[3]["event_id"])
    assert [e["event_id"] for e in tail] == [e["event_id"] for e in all_events[4:]]
    assert len(store.events.query(limit=2)) == 2
    assert store.events.query(run_id="nope") == []


def test_append_many(store):
    n = store.events.append_many([{"kind": "k", "body": {"i": i}, "run_id": "r"} for i in range(3)])
    assert n == 3
    assert [e["body"]["i"] for e in store.events.query(run_id="r")] == [0, 1, 2]


def test_subscribers_are_called_at_once_and_can_unsubscribe(store):
    seen: list[dict] = []
    unsubscribe = store.events.subscribe(seen.append)
    event = store.events.append("k", {"x": 1}, run_id="r")
    assert seen == [event]
    unsubscribe()
    store.events.append("k")
    assert len(seen) == 1
    unsubscribe()  # a second call is harmless


def test_a_failing_subscriber_does_not_break_the_writer_or_other_subscribers(store):
    seen = []

    def broken(event):
        raise RuntimeError("listener bug")

    store.events.subscribe(broken)
    store.events.subscribe(seen.append)
    store.events.append("k")
    assert len(seen) == 1
    assert len(store.events.query()) == 1


def test_a_background_flush_happens_without_a_query(tmp_path):
    store = open_store(tmp_path, flush_interval=0.05)
    # A second connection to the same file from this process shares the database instance,
    # so it sees what the appender committed without calling store.events.query().
    reader = duckdb.connect(str(tmp_path / "store.duckdb"))
    try:
        assert reader.execute("SELECT count(*) FROM events").fetchall() == [(0,)]
        for i in range(3):
            store.events.append("k", {"i": i})
        wait_for(lambda: reader.execute("SELECT count(*) FROM events").fetchall() == [(3,)], "the background flush")
        assert store.events.flush() == 0  # nothing was left in the buffer
    finally:
        reader.close()
        store.close()


def test_flush_works_after_a_partly_fetched_result(store):
    # Regression: fetchone() leaves an unfinished result on the shared connection, and DuckDB's
    # appender refused to run on such a connection, so the flush failed and the events were lost.
    store.events.append("before")
    store.documents.latest_version("tasks", "t")  # a fetchone() on the shared connection
    assert store.events.flush() == 1
    store.runs.find("nothing")
    store.events.append("after")
    assert [e["kind"] for e in store.events.query()] == ["before", "after"]


def test_a_query_right_after_append_sees_it_while_the_background_thread_flushes(tmp_path):
    store = open_store(tmp_path, flush_interval=0.0005)
    try:
        for _ in range(300):
            event = store.events.append("k")
            assert store.events.query(after_id=event["event_id"] - 1) != []
    finally:
        store.close()


def test_a_full_buffer_is_flushed_early(tmp_path):
    con = duckdb.connect(str(tmp_path / "raw.duckdb"))
    apply_migrations(con)
    log = EventLog(con, threading.RLock(), flush_interval=3600, max_buffer=10)
    reader = con.cursor()
    try:
        for i in range(9):
            log.append("k")
        assert reader.execute("SELECT count(*) FROM events").fetchall() == [(0,)]
        log.append("k")  # the tenth fills the buffer and wakes the flusher
        wait_for(lambda: reader.execute("SELECT count(*) FROM events").fetchall() == [(10,)], "the early flush")
    finally:
        log.close()
        reader.close()
        con.close()


def test_close_flushes_and_ids_stay_monotonic_across_reopen(tmp_path):
    s = open_store(tmp_path, flush_interval=3600)  # only close() flushes
    ids = [s.events.append("k", {"i": i}, run_id="r")["event_id"] for i in range(3)]
    s.close()
    s = open_store(tmp_path)
    try:
        more = [s.events.append("k", {"i": i}, run_id="r")["event_id"] for i in range(3, 5)]
        assert more[0] == ids[-1] + 1 and more[1] == more[0] + 1
        events = s.events.query(run_id="r")
        assert [e["body"]["i"] for e in events] == [0, 1, 2, 3, 4]
        assert [e["event_id"] for e in events] == ids + more
    finally:
        s.close()


def test_concurrent_appenders_get_unique_ids_and_lose_nothing(tmp_path):
    store = open_store(tmp_path, flush_interval=0.01)
    try:
        def work(n):
            for i in range(500):
                store.events.append("k", {"w": n, "i": i}, run_id=f"w{n}")

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        events = store.events.query()
        assert len(events) == 2000
        assert [e["event_id"] for e in events] == list(range(1, 2001))
        for n in range(4):
            assert [e["body"]["i"] for e in events if e["run_id"] == f"w{n}"] == list(range(500))
    finally:
        store.close()
