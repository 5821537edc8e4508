"""The Query builder compiled against real DuckDB documents, records and runs."""

from __future__ import annotations

import pytest

from stores.database import DuckDBStore
from stores.query import OPERATORS, Query


@pytest.fixture
def store(tmp_path):
    s = DuckDBStore(tmp_path / "store.duckdb", tmp_path / "objects")
    yield s
    s.close()


@pytest.fixture
def docs(store):
    d = store.documents
    d.put("tasks", "a", {"meta": {"owner": "ann", "n": 9, "tag": "9", "flag": True, "dash-key": 1}, "kind": "file"})
    d.put("tasks", "b", {"meta": {"owner": "bob", "n": 10, "tag": "10", "flag": False, "dash-key": 2}, "kind": "file"})
    d.put("tasks", "c", {"meta": {"owner": None, "n": 2.5, "tag": "2"}, "kind": "dir"})
    d.put("tasks", "d", {"other": 1})
    d.put("envs", "a", {"meta": {"owner": "ann"}})  # another collection never leaks in
    return d


def ids(docs, query: Query) -> list[str]:
    return [row["id"] for row in docs.query(query)]


def test_eq_on_a_nested_path(docs):
    assert ids(docs, Query("tasks").where("meta.owner", "eq", "ann")) == ["a"]
    assert ids(docs, Query("tasks").where("kind", "eq", "file")) == ["a", "b"]


def test_ne_includes_documents_where_the_field_is_missing_or_null(docs):
    assert ids(docs, Query("tasks").where("meta.owner", "ne", "bob")) == ["a", "c", "d"]


def test_eq_and_ne_none_mean_null_or_missing(docs):
    assert ids(docs, Query("tasks").where("meta.owner", "eq", None)) == ["c", "d"]
    assert ids(docs, Query("tasks").where("meta.owner", "ne", None)) == ["a", "b"]


def test_gte_lte_compare_numbers_numerically(docs):
    # 10 >= 9 numerically although "10" < "9" as text
    assert ids(docs, Query("tasks").where("meta.n", "gte", 9)) == ["a", "b"]
    assert ids(docs, Query("tasks").where("meta.n", "lte", 9)) == ["a", "c"]
    assert ids(docs, Query("tasks").where("meta.n", "gte", 2.5).where("meta.n", "lte", 9.5)) == ["a", "c"]


def test_gte_lte_compare_strings_lexically(docs):
    assert ids(docs, Query("tasks").where("meta.tag", "gte", "9")) == ["a"]
    assert ids(docs, Query("tasks").where("meta.tag", "lte", "10")) == ["b"]
    assert ids(docs, Query("tasks").where("meta.owner", "gte", "b")) == ["b"]


def test_the_value_type_picks_the_comparison(docs):
    # a number compares numerically even against a string field, and vice versa
    assert ids(docs, Query("tasks").where("meta.tag", "gte", 9)) == ["a", "b"]
    assert ids(docs, Query("tasks").where("meta.n", "eq", 9)) == ["a"]
    assert ids(docs, Query("tasks").where("meta.n", "eq", 2.5)) == ["c"]


def test_booleans(docs):
    assert ids(docs, Query("tasks").where("meta.flag", "eq", True)) == ["a"]
    assert ids(docs, Query("tasks").where("meta.flag", "eq", False)) == ["b"]
    assert ids(docs, Query("tasks").where("meta.flag", "ne", True)) == ["b", "c", "d"]


def test_in_with_strings_numbers_and_empty(docs):
    assert ids(docs, Query("tasks").where("meta.owner", "in", ["ann", "bob", "zed"])) == ["a", "b"]
    assert ids(docs, Query("tasks").where("meta.n", "in", [10, 2.5])) == ["b", "c"]
    assert ids(docs, Query("tasks").where("meta.owner", "in", [])) == []
    assert ids(docs, Query("tasks").where("id", "in", ["b", "d"])) == ["b", "d"]


def test_exists_true_and_false(docs):
    # a JSON null is present; only a missing key is absent
    assert ids(docs, Query("tasks").where("meta.owner", "exists", True)) == ["a", "b", "c"]
    assert ids(docs, Query("tasks").where("meta.owner", "exists", False)) == ["d"]
    assert ids(docs, Query("tasks").where("meta.dash-key", "exists")) == ["a", "b"]
    assert ids(docs, Query("tasks").where("digest", "exists", False)) == ["a", "b", "c", "d"]


def test_key_with_a_dash(docs):
    assert ids(docs, Query("tasks").where("meta.dash-key", "eq", 2)) == ["b"]


def test_filters_and_together(docs):
    q = Query("tasks").where("kind", "eq", "file").where("meta.n", "gte", 10)
    assert ids(docs, q) == ["b"]


def test_sort_ascending_and_descending_with_missing_values_last(docs):
    assert ids(docs, Query("tasks").sort("meta.n")) == ["c", "a", "b", "d"]
    assert ids(docs, Query("tasks").sort("meta.n", desc=True)) == ["b", "a", "c", "d"]
    # null and missing owners tie at the end; the second key breaks the tie
    assert ids(docs, Query("tasks").sort("meta.owner").sort("id")) == ["a", "b", "c", "d"]
    assert ids(docs, Query("tasks").sort("meta.owner", desc=True).sort("id", desc=True)) == ["b", "a", "d", "c"]


def test_sort_on_columns_and_several_keys(docs):
    assert ids(docs, Query("tasks").sort("id", desc=True)) == ["d", "c", "b", "a"]
    assert ids(docs, Query("tasks").sort("kind").sort("id", desc=True)) == ["c", "b", "a", "d"]


def test_limit(docs):
    assert ids(docs, Query("tasks").sort("id", desc=True).limit(2)) == ["d", "c"]
    assert ids(docs, Query("tasks").limit(0)) == []


def test_latest_versus_all_versions(store):
    d = store.documents
    d.put("tasks", "t", {"n": 1})
    d.put("tasks", "t", {"n": 5})
    d.put("tasks", "u", {"n": 1})
    # by default only each id's newest version is considered, and filters apply to it
    latest = d.query(Query("tasks"))
    assert [(r["id"], r["version"]) for r in latest] == [("t", 2), ("u", 1)]
    assert ids(d, Query("tasks").where("n", "lte", 2)) == ["u"]
    every = d.query(Query("tasks").all_versions())
    assert [(r["id"], r["version"]) for r in every] == [("t", 1), ("t", 2), ("u", 1)]
    old = d.query(Query("tasks").all_versions().where("n", "lte", 2))
    assert [(r["id"], r["version"]) for r in old] == [("t", 1), ("u", 1)]
    assert [r["version"] for r in d.query(Query("tasks").all_versions().where("version", "gte", 2))] == [2]


@pytest.mark.parametrize("op", ["like", "EQ", "=", "", "contains"])
def test_unknown_operators_are_refused(op):
    with pytest.raises(ValueError, match="unknown operator"):
        Query("tasks").where("meta.owner", op, "x")


@pytest.mark.parametrize("path", ["", "a..b", ".a", "a.", "1abc", "a b", "body->>'x'", "x; DROP TABLE documents",
                                  "a[0]", "$.a"])
def test_bad_paths_are_refused(path):
    with pytest.raises(ValueError, match="bad field path"):
        Query("tasks").where(path, "eq", 1)
    with pytest.raises(ValueError, match="bad field path"):
        Query("tasks").sort(path)


def test_operator_list_is_the_documented_one():
    assert set(OPERATORS) == {"eq", "ne", "gte", "lte", "in", "exists"}


def test_wire_round_trip_gives_the_same_results(docs):
    q = Query("tasks").where("kind", "eq", "file").where("meta.n", "in", [9, 10]).sort("meta.n", desc=True).limit(1)
    wire = q.to_wire()
    assert wire == {"collection": "tasks", "filters": [["kind", "eq", "file"], ["meta.n", "in", [9, 10]]],
                    "order": [["meta.n", True]], "limit": 1, "latest": True}
    assert ids(docs, Query.from_wire(wire)) == ["b"]
    assert [r["id"] for r in docs.query(wire)] == ["b"]  # a plain dict is accepted too
    assert Query.from_wire(Query("tasks").all_versions().to_wire()).latest is False


def test_wire_input_is_validated_like_the_builder():
    with pytest.raises(ValueError, match="unknown operator"):
        Query.from_wire({"collection": "tasks", "filters": [["a", "regex", ".*"]]})
    with pytest.raises(ValueError, match="bad field path"):
        Query.from_wire({"collection": "tasks", "order": [["a;b", False]]})


def test_query_with_a_bad_collection_is_refused(store):
    with pytest.raises(ValueError, match="bad collection name"):
        store.documents.query(Query("tasks where 1=1"))


def test_queries_over_records(store):
    recs = store.records
    recs.save("sandboxes", "s1", {"state": "running", "cpu": 2})
    recs.save("sandboxes", "s2", {"state": "stopped", "cpu": 8})
    recs.save("sandboxes", "s3", {"state": "running", "cpu": 16})
    recs.save("env_instances", "e1", {"state": "running"})
    rows = recs.query(Query("sandboxes").where("state", "eq", "running").sort("cpu", desc=True))
    assert [r["id"] for r in rows] == ["s3", "s1"]
    rows = recs.query(Query("sandboxes").where("cpu", "gte", 8).where("rev", "eq", 1).limit(1).sort("id"))
    assert [r["id"] for r in rows] == ["s2"]
