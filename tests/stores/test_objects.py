"""The write-once, content-addressed object store: bytes on disk, metadata in DuckDB."""

from __future__ import annotations

import hashlib
import os
import stat

import pytest
from kits.store import open_store

from agentenv_local.errors import ConflictError, NotFoundError


def test_put_records_sha256_size_and_content_type(store):
    data = b"hello, objects\n"
    meta = store.objects.put("artifacts/file/a/1/hello.txt", data, "text/plain")
    assert meta["sha256"] == hashlib.sha256(data).hexdigest()
    assert meta["size"] == len(data)
    assert meta["content_type"] == "text/plain"
    stored = store.objects.metadata("artifacts/file/a/1/hello.txt")
    assert {k: stored[k] for k in ("key", "sha256", "size", "content_type")} == {
        "key": "artifacts/file/a/1/hello.txt", "sha256": meta["sha256"], "size": len(data),
        "content_type": "text/plain"}
    assert store.objects.get("artifacts/file/a/1/hello.txt") == data
    assert store.objects.exists("artifacts/file/a/1/hello.txt")
    assert not store.objects.exists("artifacts/file/a/1/other.txt")


def test_default_content_type_and_empty_bytes(store):
    meta = store.objects.put("empty", b"")
    assert (meta["size"], meta["content_type"]) == (0, "application/octet-stream")
    assert store.objects.get("empty") == b""


def test_bytes_are_content_addressed_and_shared(store, tmp_path):
    a = store.objects.put("one/a.bin", b"same bytes")
    b = store.objects.put("two/b.bin", b"same bytes")
    assert a["sha256"] == b["sha256"]
    blob = store.objects.blob_path(a["sha256"])
    assert blob == tmp_path / "objects" / "sha256" / a["sha256"][:2] / a["sha256"][2:]
    assert blob.read_bytes() == b"same bytes"
    blobs = [p for p in (tmp_path / "objects" / "sha256").rglob("*") if p.is_file()]
    assert blobs == [blob]
    assert not blob.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)  # read-only on disk


def test_write_once_same_bytes_is_a_no_op(store):
    first = store.objects.put("k", b"v1", "text/plain")
    again = store.objects.put("k", b"v1", "text/plain")
    assert again == first  # the original metadata, created_at included
    assert len(store.objects.list()) == 1


def test_write_once_different_bytes_conflict_and_the_first_bytes_stay(store):
    first = store.objects.put("k", b"first")
    with pytest.raises(ConflictError, match="write-once") as err:
        store.objects.put("k", b"second")
    assert "new key" in err.value.hint
    assert store.objects.get("k") == b"first"
    assert store.objects.metadata("k")["sha256"] == first["sha256"]
    # the refused bytes were not even written as a blob
    assert not store.objects.blob_path(hashlib.sha256(b"second").hexdigest()).exists()


def test_no_temp_files_are_left_behind(store, tmp_path):
    for i in range(25):
        store.objects.put(f"many/{i}", os.urandom(1000 + i))
    with pytest.raises(ConflictError):
        store.objects.put("many/1", b"different")
    assert list((tmp_path / "objects" / "tmp").iterdir()) == []
    assert len(store.objects.list("many/")) == 25


def test_a_failed_rename_leaves_no_temp_file_no_blob_and_no_metadata(store, tmp_path, monkeypatch):
    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        store.objects.put("k", b"payload")
    monkeypatch.undo()
    assert list((tmp_path / "objects" / "tmp").iterdir()) == []
    assert not store.objects.blob_path(hashlib.sha256(b"payload").hexdigest()).exists()
    assert not store.objects.exists("k")
    store.objects.put("k", b"payload")  # and a retry works
    assert store.objects.get("k") == b"payload"


def test_a_corrupted_blob_is_detected_on_get(store):
    meta = store.objects.put("k", b"original bytes")
    blob = store.objects.blob_path(meta["sha256"])
    blob.chmod(0o644)
    blob.write_bytes(b"tampered bytes")
    with pytest.raises(ConflictError, match="corrupt"):
        store.objects.get("k")


def test_a_missing_blob_is_reported(store):
    meta = store.objects.put("k", b"bytes")
    store.objects.blob_path(meta["sha256"]).unlink()
    with pytest.raises(NotFoundError, match="bytes are missing"):
        store.objects.get("k")


def test_unknown_key(store):
    assert store.objects.metadata("nope") is None
    with pytest.raises(NotFoundError, match="'nope' not found"):
        store.objects.get("nope")


@pytest.mark.parametrize("key", ["", "..", "../escape", "a/../../b", "a/..", "/etc/passwd", "/abs", "a//b", "./a",
                                 "a/./b", "trailing/"])
def test_bad_keys_are_refused_and_nothing_is_written(store, tmp_path, key):
    with pytest.raises(ValueError, match="bad object key"):
        store.objects.put(key, b"x")
    assert store.objects.list() == []
    assert not (tmp_path / "objects" / "sha256").exists() or not any((tmp_path / "objects" / "sha256").rglob("*"))


def test_list_by_prefix_is_sorted(store):
    for key in ("b/2", "a/1", "b/1", "c"):
        store.objects.put(key, key.encode())
    assert [m["key"] for m in store.objects.list()] == ["a/1", "b/1", "b/2", "c"]
    assert [m["key"] for m in store.objects.list("b/")] == ["b/1", "b/2"]
    assert store.objects.list("zzz") == []


def test_objects_survive_close_and_reopen(tmp_path):
    s = open_store(tmp_path)
    meta = s.objects.put("keep/me", b"persisted", "text/plain")
    s.close()
    s = open_store(tmp_path)
    try:
        assert s.objects.get("keep/me") == b"persisted"
        assert s.objects.metadata("keep/me")["sha256"] == meta["sha256"]
        with pytest.raises(ConflictError):
            s.objects.put("keep/me", b"changed")
    finally:
        s.close()
