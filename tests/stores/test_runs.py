"""Runs (task instances) with a rev compare-and-swap, run history queries, and the step journal."""

from __future__ import annotations

import pytest
from kits.store import open_store

from agentenv_local.errors import ConflictError, NotFoundError
from stores.query import Query


def new_run(run_id: str, task_id: str = "hello", status: str = "queued", created_at: float = 1000.0, **extra) -> dict:
    return {"run_id": run_id, "task_id": task_id, "task_version": 1, "status": status, "created_at": created_at,
            **extra}


def test_create_sets_rev_1_and_keeps_extra_fields_in_the_body(store):
    run = store.runs.create(new_run("hello-1", owner="pid:1", task_name="Hello", context={"big": [1, 2, 3]}))
    assert run["rev"] == 1
    got = store.runs.get("hello-1")
    assert got["task_id"] == "hello" and got["status"] == "queued" and got["owner"] == "pid:1"
    assert got["task_name"] == "Hello" and got["context"] == {"big": [1, 2, 3]}
    assert got["score"] is None and got["started_at"] is None


def test_create_fills_created_at(store):
    run = store.runs.create({"run_id": "r", "task_id": "t", "task_version": 3, "status": "queued"})
    assert run["created_at"] > 0
    assert store.runs.get("r")["created_at"] == pytest.approx(run["created_at"])


def test_creating_an_existing_run_conflicts(store):
    store.runs.create(new_run("r1"))
    with pytest.raises(ConflictError, match="r1 already exists"):
        store.runs.create(new_run("r1", status="running"))
    assert store.runs.get("r1")["status"] == "queued"


def test_update_merges_and_bumps_rev(store):
    store.runs.create(new_run("r1", task_name="Hello"))
    updated = store.runs.update("r1", {"status": "running", "started_at": 1001.0, "steps": {"a": "running"}}, rev=1)
    assert updated["rev"] == 2
    again = store.runs.update("r1", {"status": "succeeded", "score": 0.75})
    assert again["rev"] == 3
    got = store.runs.get("r1")
    assert (got["status"], got["score"], got["started_at"], got["rev"]) == ("succeeded", 0.75, 1001.0, 3)
    assert got["task_name"] == "Hello" and got["steps"] == {"a": "running"}


def test_update_with_a_stale_rev_conflicts_and_changes_nothing(store):
    store.runs.create(new_run("r1"))
    store.runs.update("r1", {"status": "running"}, rev=1)
    with pytest.raises(ConflictError, match="rev 2, not 1"):
        store.runs.update("r1", {"status": "cancelled"}, rev=1)
    got = store.runs.get("r1")
    assert (got["status"], got["rev"]) == ("running", 2)


def test_update_or_get_of_a_missing_run(store):
    assert store.runs.find("nope") is None
    with pytest.raises(NotFoundError, match="'nope' not found"):
        store.runs.get("nope")
    with pytest.raises(NotFoundError):
        store.runs.update("nope", {"status": "running"})


@pytest.fixture
def history(store):
    rows = [
        new_run("hello-a", "hello", "succeeded", 1001.0, score=1.0, task_name="Hello", context={"big": "x" * 100}),
        new_run("hello-b", "hello", "failed", 1003.0, score=0.0, error="boom"),
        new_run("other-a", "other", "succeeded", 1002.0, score=0.5),
        new_run("hello-c", "hello", "running", 1004.0),
        new_run("other-b", "other", "queued", 1005.0),
    ]
    for row in rows:
        store.runs.create(row)
    return store.runs


def run_ids(rows) -> list[str]:
    return [r["run_id"] for r in rows]


def test_list_is_newest_first_by_default(history):
    assert run_ids(history.list()) == ["other-b", "hello-c", "hello-b", "other-a", "hello-a"]


def test_list_filters_by_status_and_task(history):
    assert run_ids(history.list(Query("runs").where("status", "eq", "succeeded"))) == ["other-a", "hello-a"]
    assert run_ids(history.list(Query("runs").where("task_id", "eq", "hello"))) == ["hello-c", "hello-b", "hello-a"]
    q = Query("runs").where("task_id", "eq", "hello").where("status", "in", ["failed", "running"])
    assert run_ids(history.list(q)) == ["hello-c", "hello-b"]
    scored_not_succeeded = Query("runs").where("status", "ne", "succeeded").where("score", "exists")
    assert run_ids(history.list(scored_not_succeeded)) == ["hello-b"]
    assert run_ids(history.list(Query("runs").where("created_at", "gte", 1004))) == ["other-b", "hello-c"]


def test_list_ordering_and_limit(history):
    assert run_ids(history.list(Query("runs").sort("created_at"))) == [
        "hello-a", "other-a", "hello-b", "hello-c", "other-b"]
    by_score = history.list(Query("runs").sort("score", desc=True).sort("run_id"))
    assert run_ids(by_score) == ["hello-a", "other-a", "hello-b", "hello-c", "other-b"]  # no score last
    assert run_ids(history.list(Query("runs").where("task_id", "eq", "hello").limit(2))) == ["hello-c", "hello-b"]
    wire_query = {"collection": "runs", "filters": [["task_id", "eq", "other"]], "limit": 1}
    assert run_ids(history.list(wire_query)) == ["other-b"]


def test_list_summary_leaves_the_bulky_body_out(history):
    (summary,) = history.list(Query("runs").where("run_id", "eq", "hello-a"))
    assert summary["task_name"] == "Hello" and "context" not in summary and summary["score"] == 1.0
    (failed,) = history.list(Query("runs").where("run_id", "eq", "hello-b"))
    assert failed["error"] == "boom"
    (full,) = history.list(Query("runs").where("run_id", "eq", "hello-a"), summary=False)
    assert full["context"] == {"big": "x" * 100}


def test_list_filters_on_body_fields(history):
    assert run_ids(history.list(Query("runs").where("error", "eq", "boom"))) == ["hello-b"]
    assert run_ids(history.list(Query("runs").where("task_name", "exists"))) == ["hello-a"]


def test_resolve_by_prefix(history):
    assert history.resolve("hello-a") == "hello-a"
    assert history.resolve("other-b") == "other-b"
    with pytest.raises(NotFoundError, match="ambiguous") as err:
        history.resolve("other-")
    assert "more characters" in err.value.hint
    with pytest.raises(NotFoundError, match="'zzz' not found"):
        history.resolve("zzz")


def test_resolve_unique_prefix(store):
    store.runs.create(new_run("hello-20250101-deadbeef"))
    store.runs.create(new_run("hello-20250101-cafef00d"))
    assert store.runs.resolve("hello-20250101-d") == "hello-20250101-deadbeef"
    assert store.runs.resolve("hello-20250101-caf") == "hello-20250101-cafef00d"
    with pytest.raises(NotFoundError, match="ambiguous"):
        store.runs.resolve("hello-2025")


def test_mark_interrupted_only_touches_active_runs_of_dead_owners(store):
    store.runs.create(new_run("dead-queued", status="queued", owner="pid:1"))
    store.runs.create(new_run("dead-running", status="running", owner="pid:1"))
    store.runs.create(new_run("alive-running", status="running", owner="pid:2"))
    store.runs.create(new_run("dead-finished", status="succeeded", owner="pid:1"))
    gone = store.runs.mark_interrupted(lambda owner: owner == "pid:2")
    assert sorted(gone) == ["dead-queued", "dead-running"]
    for run_id in gone:
        run = store.runs.get(run_id)
        assert run["status"] == "interrupted" and run["finished_at"] and "stopped" in run["error"]
        assert run["rev"] == 2
    assert store.runs.get("alive-running")["status"] == "running"
    assert store.runs.get("dead-finished")["status"] == "succeeded"
    assert store.runs.mark_interrupted(lambda owner: False) == ["alive-running"]


def test_journal_appends_in_order_per_run(store):
    store.runs.create(new_run("r1"))
    store.runs.create(new_run("r2"))
    assert store.runs.journal_append("r1", "deploy", "succeeded", {"out": {"url": "x"}}) == 1
    assert store.runs.journal_append("r2", "deploy", "failed", {"error": "no"}) == 1
    assert store.runs.journal_append("r1", "prompt", "failed", {"error": "timeout"}) == 2
    assert store.runs.journal_append("r1", "prompt", "succeeded", {}, generation=1) == 3
    journal = store.runs.journal("r1")
    assert [(j["seq"], j["step_id"], j["status"], j["generation"]) for j in journal] == [
        (1, "deploy", "succeeded", 0), (2, "prompt", "failed", 0), (3, "prompt", "succeeded", 1)]
    assert journal[0]["body"] == {"out": {"url": "x"}}
    assert journal[0]["recorded_at"] <= journal[2]["recorded_at"]
    assert [j["step_id"] for j in store.runs.journal("r2")] == ["deploy"]
    assert store.runs.journal("nope") == []


def test_runs_and_journal_survive_close_and_reopen(tmp_path):
    s = open_store(tmp_path)
    s.runs.create(new_run("r1", status="running"))
    s.runs.journal_append("r1", "a", "succeeded", {})
    s.close()
    s = open_store(tmp_path)
    try:
        assert s.runs.get("r1")["status"] == "running"
        assert s.runs.journal_append("r1", "b", "succeeded", {}) == 2
        assert [j["step_id"] for j in s.runs.journal("r1")] == ["a", "b"]
    finally:
        s.close()
