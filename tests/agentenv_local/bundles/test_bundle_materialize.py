"""Materializing a bundle into a real DuckDB store: versions only on change, nothing on error or dry run."""

from __future__ import annotations

import pytest

from agentenv_local.artifacts import put_artifact, read_files
from agentenv_local.bundles import load_bundle, materialize
from agentenv_local.errors import ValidationError


def all_documents(store) -> set[tuple[str, str, int]]:
    out = set()
    for collection in ("artifacts", "tasks", "evals"):
        for doc in store.documents.query({"collection": collection}):
            out |= {(collection, doc["id"], v) for v in store.documents.versions(collection, doc["id"])}
    return out


def rendered(result) -> list[str]:
    return [line.render() for line in result.lines]


def test_new_then_unchanged_then_changed(hello_copy, store):
    b = load_bundle(hello_copy.root)
    first = materialize(store, b)
    assert rendered(first) == ["artifacts/greeting: v1 (new)", "tasks/hello.json: v1 (new)"]
    task_id = b.tasks["hello"].id
    assert first.task_versions == {"hello": (task_id, 1)}
    doc = store.documents.get("artifacts", b.artifacts["greeting"].id)
    assert read_files(store, doc)["hello.txt"] == (hello_copy.root / "artifacts/greeting/hello.txt").read_bytes()

    again = materialize(store, load_bundle(hello_copy.root))
    assert rendered(again) == ["artifacts/greeting: v1, unchanged", "tasks/hello.json: v1, unchanged"]

    hello_copy.file("artifacts/greeting/hello.txt", "hello, changed\n")
    hello_copy.file("README.md", "# a new description only\n")  # not part of any entity's content
    changed = materialize(store, load_bundle(hello_copy.root))
    # The task pins the artifact version it was stored with, so a changed artifact means a new task
    # version: "task v1" always runs with the same inputs.
    assert rendered(changed) == ["artifacts/greeting: v2 (changed)", "tasks/hello.json: v2 (changed)"]
    steps = {s["id"]: s for s in store.documents.get("tasks", task_id, 2)["body"]["steps"]}
    assert steps["load"]["artifact_version"] == 2
    assert store.documents.get("tasks", task_id, 1)["body"]["steps"][1]["artifact_version"] == 1

    hello_copy.file("evals/all.toml", 'tasks = ["hello"]\n')
    with_eval = materialize(store, load_bundle(hello_copy.root))
    assert rendered(with_eval)[-1] == "evals/all.toml: v1 (new)"
    ev = store.documents.get("evals", with_eval.eval_versions["all"][0])
    assert ev["body"]["tasks"] == [{"task_id": task_id, "task_version": 2}]


def test_dry_run_writes_nothing(hello_copy, store):
    result = materialize(store, load_bundle(hello_copy.root), dry_run=True)
    assert rendered(result) == ["artifacts/greeting: v1 (new)", "tasks/hello.json: v1 (new)"]
    assert all_documents(store) == set()
    assert store.objects.list() == []


def test_missing_artifact_reference_writes_nothing(bundle, store, steps):
    bundle.artifact("present", {"x.txt": "x"})
    bundle.task("t", steps("absent"))
    b = load_bundle(bundle.root)
    with pytest.raises(ValidationError) as info:
        materialize(store, b)
    assert info.value.problems == [
        ("tasks/t.json: step 'load': field 'artifact_id': artifact 'absent' is not in this bundle "
         "(artifacts/: present) nor in the store")]
    assert "nothing was written or run" in info.value.message
    assert all_documents(store) == set()  # not even the bundle's own artifact
    assert store.objects.list() == []


def test_reference_to_a_stored_artifact_is_fine(bundle, store, steps):
    put_artifact(store, "shared/greeting", {"hello.txt": b"hi"})
    bundle.task("t", steps("shared/greeting"))
    result = materialize(store, load_bundle(bundle.root))
    assert rendered(result) == ["tasks/t.json: v1 (new)"]


def test_seed_placeholders_are_not_checked_before_the_run(bundle, store, steps):
    bundle.task("t", steps("<which>"))
    assert rendered(materialize(store, load_bundle(bundle.root))) == ["tasks/t.json: v1 (new)"]
