"""Versioned documents and mutable records, on a real DuckDB file."""

from __future__ import annotations

import pytest
from kits.store import open_store

from agentenv_local.errors import ConflictError, NotFoundError

# -- versioned documents ------------------------------------------------------------------

def test_put_makes_v1_then_v2_and_latest_is_the_newest(store):
    docs = store.documents
    first = docs.put("tasks", "greet", {"prompt": "hi"})
    second = docs.put("tasks", "greet", {"prompt": "hello"})
    assert (first["version"], second["version"]) == (1, 2)
    assert docs.latest_version("tasks", "greet") == 2
    assert docs.versions("tasks", "greet") == [1, 2]
    assert docs.get("tasks", "greet")["body"] == {"prompt": "hello"}
    assert docs.get("tasks", "greet", version=1)["body"] == {"prompt": "hi"}
    assert docs.get("tasks", "greet", version=2)["version"] == 2


def test_ids_and_collections_are_versioned_independently(store):
    docs = store.documents
    docs.put("tasks", "a", {})
    docs.put("tasks", "a", {})
    assert docs.put("tasks", "b", {})["version"] == 1
    assert docs.put("envs", "a", {})["version"] == 1
    assert docs.latest_version("artifacts", "a") == 0


def test_put_naming_the_next_version_is_accepted(store):
    docs = store.documents
    docs.put("tasks", "t", {"n": 1})
    assert docs.put("tasks", "t", {"n": 2}, version=2)["version"] == 2
    assert docs.put("tasks", "u", {"n": 1}, version=1)["version"] == 1


@pytest.mark.parametrize("asked", [1, 2, 4])
def test_put_naming_a_stale_or_skipped_version_conflicts_and_writes_nothing(store, asked):
    docs = store.documents
    docs.put("tasks", "t", {"n": 1})
    docs.put("tasks", "t", {"n": 2})
    with pytest.raises(ConflictError) as err:
        docs.put("tasks", "t", {"n": "lost"}, version=asked)
    message = str(err.value)
    assert "tasks/t" in message and f"version {asked}" in message and "latest is v2" in message
    assert "version 3" in err.value.hint
    assert docs.versions("tasks", "t") == [1, 2]
    assert docs.get("tasks", "t")["body"] == {"n": 2}


def test_digest_and_created_at_are_recorded(store):
    doc = store.documents.put("artifacts", "file", {"path": "a.txt"}, digest="sha256:abc")
    got = store.documents.get("artifacts", "file")
    assert got["digest"] == "sha256:abc"
    assert got["created_at"] == pytest.approx(doc["created_at"])


def test_missing_documents(store):
    assert store.documents.find("tasks", "nope") is None
    with pytest.raises(NotFoundError, match="tasks/nope not found"):
        store.documents.get("tasks", "nope")
    store.documents.put("tasks", "t", {})
    with pytest.raises(NotFoundError, match="v7"):
        store.documents.get("tasks", "t", version=7)


@pytest.mark.parametrize("collection", ["", "tasks; DROP TABLE documents", "a.b", "x-y"])
def test_bad_collection_names_are_refused(store, collection):
    with pytest.raises(ValueError, match="bad collection name"):
        store.documents.put(collection, "t", {})


def test_empty_id_is_refused(store):
    with pytest.raises(ValueError, match="non-empty id"):
        store.documents.put("tasks", "", {})


def test_bodies_round_trip_nested_json_and_unicode(store):
    body = {"name": "café ☕", "nested": {"list": [1, 2.5, None, True], "empty": {}}, "n": 10**12}
    store.documents.put("envs", "e", body)
    assert store.documents.get("envs", "e")["body"] == body


def test_documents_survive_close_and_reopen(tmp_path):
    s = open_store(tmp_path)
    s.documents.put("tasks", "t", {"v": 1})
    s.documents.put("tasks", "t", {"v": 2})
    s.close()
    s = open_store(tmp_path)
    try:
        assert s.documents.versions("tasks", "t") == [1, 2]
        assert s.documents.put("tasks", "t", {"v": 3})["version"] == 3
    finally:
        s.close()


# -- mutable records ----------------------------------------------------------------------

def test_record_save_creates_then_bumps_rev(store):
    recs = store.records
    first = recs.save("sandboxes", "sb1", {"state": "starting"})
    assert first["rev"] == 1
    second = recs.save("sandboxes", "sb1", {"state": "running"}, rev=1)
    assert second["rev"] == 2
    assert second["created_at"] == pytest.approx(first["created_at"])
    got = recs.get("sandboxes", "sb1")
    assert (got["rev"], got["body"]) == (2, {"state": "running"})


def test_record_save_with_a_stale_rev_conflicts_and_keeps_the_stored_body(store):
    recs = store.records
    recs.save("sandboxes", "sb1", {"state": "starting"})
    recs.save("sandboxes", "sb1", {"state": "running"})
    with pytest.raises(ConflictError, match="rev 2, not 1"):
        recs.save("sandboxes", "sb1", {"state": "stale"}, rev=1)
    assert recs.get("sandboxes", "sb1")["body"] == {"state": "running"}
    # rev=0 means "must not exist yet"
    with pytest.raises(ConflictError):
        recs.save("sandboxes", "sb1", {}, rev=0)
    assert recs.save("sandboxes", "sb2", {}, rev=0)["rev"] == 1


def test_record_delete_and_missing(store):
    recs = store.records
    recs.save("env_instances", "i1", {})
    assert recs.delete("env_instances", "i1") is True
    assert recs.delete("env_instances", "i1") is False
    assert recs.find("env_instances", "i1") is None
    with pytest.raises(NotFoundError):
        recs.get("env_instances", "i1")


def test_if_changed_writes_identical_content_once_even_from_two_threads(store):
    import threading

    results = []

    def put():
        results.append(store.documents.put("tasks", "same", {"x": 1}, digest="d1", if_changed=True))

    threads = [threading.Thread(target=put) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.documents.versions("tasks", "same") == [1]
    assert sum(1 for r in results if not r.get("unchanged")) == 1
    changed = store.documents.put("tasks", "same", {"x": 2}, digest="d2", if_changed=True)
    assert changed["version"] == 2 and not changed.get("unchanged")
