"""The object store seam: `[store] objects` picks an object store from the `agentenv_local.stores` group.

The built-in `local` stays the default (the same ObjectStore over `.agentenv/objects`); an object store
registered under another name (here one registered in code: `MemoryObjects`, a real ObjectStoreBase over its
own DuckDB table) is what the hub opens when the config names it; an unknown name is a ConfigError listing
the ones there are, raised before the store file is created. `agentenv store migrate-objects` (run in this
process through click's runner: the command opens both stores as the hub) copies and verifies every key,
switches the config file, and `cleanup-objects` empties the old store only once the new one holds everything.
"""

from __future__ import annotations

import hashlib
import threading
import time
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, cast

import duckdb
import pytest
from click.testing import CliRunner

from agentenv_local.cli.store import _switch_config, store_group
from agentenv_local.config import load_config, object_stores
from agentenv_local.errors import ConfigError, ConflictError, NotFoundError
from agentenv_local.hub import connect
from agentenv_local.plugins import registry
from stores.object_api import META_FIELDS, ObjectStoreBase, check_key
from stores.objects import ObjectStore


class MemoryObjects(ObjectStoreBase):
    """A minimal second object store: bytes and key map in a DuckDB table of its own."""

    settings_keys = frozenset()

    @classmethod
    def open(cls, con: duckdb.DuckDBPyConnection, lock: threading.RLock, root: Path,
             settings: Mapping[str, Any]) -> MemoryObjects:
        return cls(con, lock)

    def __init__(self, con: duckdb.DuckDBPyConnection, lock: threading.RLock) -> None:
        self._con, self._lock = con, lock
        with lock:
            con.execute("CREATE TABLE IF NOT EXISTS memtest_objects (key VARCHAR PRIMARY KEY, sha256 VARCHAR, "
                        "size BIGINT, content_type VARCHAR, created_at DOUBLE, data BLOB)")

    def put(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> dict:
        check_key(key)
        sha = hashlib.sha256(data).hexdigest()
        existing = self.metadata(key)
        if existing is not None:
            if existing["sha256"] != sha:
                raise ConflictError(f"object {key!r} already exists with different bytes (write-once)")
            return existing
        meta = {"key": key, "sha256": sha, "size": len(data), "content_type": content_type, "created_at": time.time()}
        with self._lock:
            self._con.execute("INSERT INTO memtest_objects VALUES (?, ?, ?, ?, ?, ?)",
                              [key, sha, len(data), content_type, meta["created_at"], data])
        return meta

    def get(self, key: str) -> bytes:
        with self._lock:
            row = self._con.execute("SELECT sha256, data FROM memtest_objects WHERE key = ?", [key]).fetchone()
        if row is None:
            raise NotFoundError(f"object {key!r} not found")
        return bytes(row[1])

    def metadata(self, key: str) -> dict | None:
        with self._lock:
            row = self._con.execute(f"SELECT {', '.join(META_FIELDS)} FROM memtest_objects WHERE key = ?",
                                    [key]).fetchone()
        return dict(zip(META_FIELDS, row)) if row else None

    def list(self, prefix: str = "") -> list[dict]:
        with self._lock:
            rows = self._con.execute(f"SELECT {', '.join(META_FIELDS)} FROM memtest_objects "
                                     "WHERE starts_with(key, ?) ORDER BY key", [prefix]).fetchall()
        return [dict(zip(META_FIELDS, r)) for r in rows]

    def purge(self) -> dict:
        with self._lock:
            n = self._con.execute("SELECT count(*) FROM memtest_objects").fetchone()
            self._con.execute("DELETE FROM memtest_objects")
        return {"keys": int(n[0]) if n else 0, "files": 0, "bytes": 0}


@pytest.fixture
def memtest() -> Iterator[None]:
    registry().register("stores", "memtest", MemoryObjects)
    yield
    registry()._extra["stores"].pop("memtest", None)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "proj"
    (folder / ".agentenv").mkdir(parents=True)
    monkeypatch.chdir(folder)
    return folder


def _config(project: Path, text: str) -> None:
    (project / ".agentenv" / "config.toml").write_text(text)


def test_the_default_is_the_builtin_local_store(project: Path) -> None:
    config = load_config()
    choice = object_stores.resolve(config)
    assert (choice.name, choice.cls, choice.settings) == ("local", ObjectStore, {})
    assert "local" in object_stores.available()
    assert "duckdb" not in object_stores.available() and "secrets" not in object_stores.available()
    with connect(config=config) as session:
        objects = cast(Any, session).hub.store.objects
        assert type(objects) is ObjectStore
        objects.put("a/b.txt", b"bytes")
        assert objects.blob_path(hashlib.sha256(b"bytes").hexdigest()).is_file()


def test_an_unknown_store_is_a_config_error_naming_the_available_ones(project: Path, memtest: None) -> None:
    _config(project, '[store]\nobjects = "s3"\n')
    with pytest.raises(ConfigError) as caught:
        object_stores.resolve(load_config())
    assert caught.value.message == "[store] objects = 's3': no such object store; available: local, memtest"
    with pytest.raises(ConfigError, match="no such object store"):
        connect()
    assert not (project / ".agentenv" / "store.duckdb").exists()  # refused before the store was opened


def test_the_hub_opens_the_configured_object_store(project: Path, memtest: None) -> None:
    _config(project, '[store]\nobjects = "memtest"\n')
    with connect() as session:
        store = cast(Any, session).hub.store
        assert isinstance(store.objects, MemoryObjects)
        store.objects.put("k", b"kept in the table")
        assert session.store.objects.get("k") == b"kept in the table"
        assert not (project / ".agentenv" / "objects" / "sha256").exists()
        # another store over the same project's connection: what the migration copies into
        other = store.open_objects(object_stores.resolve(load_config(), "local").factory())
        assert isinstance(other, ObjectStore) and other.list() == []


def test_migrate_objects_copies_verifies_switches_and_cleanup_empties_the_old_store(project: Path,
                                                                                     memtest: None) -> None:
    _config(project, "# my settings\n[store]\nflush_interval_ms = 100\n\n[runner]\nconcurrency = 2\n")
    with connect() as session:
        for i in range(3):
            session.store.objects.put(f"docs/{i}.txt", f"doc {i}".encode(), "text/plain")
    runner = CliRunner()
    plan = runner.invoke(store_group, ["migrate-objects", "--to", "memtest", "--dry-run"])
    assert plan.exit_code == 0, plan.output
    assert "3 key(s), 15 byte(s) to move from 'local' to 'memtest'; 0 already there" in plan.output

    done = runner.invoke(store_group, ["migrate-objects", "--to", "memtest", "-v"])
    assert done.exit_code == 0, done.output
    assert [line for line in done.output.splitlines() if line.startswith("copied ")] == [
        "copied docs/0.txt", "copied docs/1.txt", "copied docs/2.txt"]
    assert "3 copied, 3 verified" in done.output
    assert "agentenv store cleanup-objects --store local" in done.output
    text = (project / ".agentenv" / "config.toml").read_text()
    assert text == ('# my settings\n[store]\nobjects = "memtest"\nflush_interval_ms = 100\n\n'
                    "[runner]\nconcurrency = 2\n")
    with connect() as session:
        assert isinstance(cast(Any, session).hub.store.objects, MemoryObjects)
        assert session.store.objects.get("docs/2.txt") == b"doc 2"
        local = cast(Any, session).hub.store.open_objects(object_stores.resolve(load_config(), "local").factory())
        assert len(local.list()) == 3  # kept until the cleanup

    again = runner.invoke(store_group, ["migrate-objects", "--to", "local", "--dry-run"])
    assert "3 already there" in again.output
    in_use = runner.invoke(store_group, ["cleanup-objects", "--store", "memtest", "--yes"])
    assert in_use.exit_code == 1 and "is the object store in use" in str(in_use.exception)
    cleaned = runner.invoke(store_group, ["cleanup-objects", "--store", "local", "--yes"])
    assert cleaned.exit_code == 0 and "Removed 3 key(s) and 3 file(s) (15 bytes) from 'local'" in cleaned.output
    assert not any((project / ".agentenv" / "objects" / "sha256").iterdir())
    with connect() as session:
        assert session.store.objects.get("docs/0.txt") == b"doc 0"


def test_cleanup_refuses_while_a_key_is_missing_from_the_store_in_use(project: Path, memtest: None) -> None:
    with connect() as session:
        session.store.objects.put("only/here.txt", b"not migrated")
    _config(project, '[store]\nobjects = "memtest"\n')
    result = CliRunner().invoke(store_group, ["cleanup-objects", "--store", "local", "--yes"])
    assert result.exit_code == 1
    assert "1 key(s) of 'local' are not in 'memtest', e.g. 'only/here.txt'; nothing was removed" in str(
        result.exception)
    _config(project, "")
    with connect() as session:
        assert session.store.objects.get("only/here.txt") == b"not migrated"


def test_switch_config_sets_the_key_and_keeps_the_rest(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()

    class Cfg:
        file_path: Path | None = None

    path = _switch_config(Cfg(), state, "cas")  # no file yet: one is written
    assert path == state / "config.toml" and path.read_text() == '[store]\nobjects = "cas"\n'
    path.write_text('[store]  # the store\nobjects = "local"  # was\n[plugins.x]\nroot = "r"\n')
    Cfg.file_path = path
    _switch_config(Cfg(), state, "cas")
    assert tomllib.loads(path.read_text()) == {"store": {"objects": "cas"}, "plugins": {"x": {"root": "r"}}}
    path.write_text('store = { objects = "local" }\n')
    with pytest.raises(ConfigError, match="cannot set \\[store\\] objects in this file"):
        _switch_config(Cfg(), state, "cas")
    assert path.read_text() == 'store = { objects = "local" }\n'  # left as it was
