"""`CasObjectStore`: the object store `cas`, an `agentenv_local.stores` entry.

The key map (key -> sha256, size, content type) stays in the project's own DuckDB file, in the table
`cas_objects`; the bytes go to the shared CAS root (blobs.py), once per content whatever the project,
key or version. Select it with `[store] objects = "cas"` (after `agentenv store migrate-objects --to cas`);
its settings are `[plugins.agentenv-cas-store]`: `root`, `compression`, `level`.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import duckdb

from agentenv_local.errors import ConfigError, ConflictError, NotFoundError
from stores.object_api import META_FIELDS, ObjectStoreBase, check_key

from .blobs import COMPRESSIONS, CasRoot, CorruptBlob, choose_codec, project_id

TABLE = "cas_objects"
SETTINGS = "[plugins.agentenv-cas-store]"


def default_root() -> Path:
    """`$XDG_CACHE_HOME/agentenv-cas`, or `~/.cache/agentenv-cas`."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "agentenv-cas"


def root_from_settings(settings: Mapping[str, Any], project_dir: Path) -> Path:
    """The CAS root the settings name: `~` expanded, a relative path taken from the project folder."""
    raw = settings.get("root")
    if raw is None:
        return default_root()
    root = Path(str(raw)).expanduser()
    return root if root.is_absolute() else project_dir / root


def open_root(settings: Mapping[str, Any], project_dir: Path) -> CasRoot:
    """The CAS root of these settings (checked), created if missing."""
    problems = CasObjectStore.check_settings(settings)
    if problems:
        raise ConfigError(f"{SETTINGS} cannot configure the 'cas' object store", problems=problems,
                          hint=f"fix {SETTINGS} in the config file")
    return CasRoot(root_from_settings(settings, project_dir), choose_codec(str(settings.get("compression", "auto"))),
                   int(settings.get("level", 6)))


class CasObjectStore(ObjectStoreBase):
    """Write-once objects whose bytes live, compressed and deduplicated, in a CAS root shared by projects."""

    settings_keys = frozenset({"root", "compression", "level"})

    @classmethod
    def check_settings(cls, settings: Mapping[str, Any]) -> list[str]:
        problems = super().check_settings(settings)
        if "root" in settings and (not isinstance(settings["root"], str) or not settings["root"].strip()):
            problems.append("root: a folder path (string) is expected")
        compression = settings.get("compression", "auto")
        if compression not in COMPRESSIONS:
            problems.append(f"compression = {compression!r}: use one of {', '.join(COMPRESSIONS)}")
        else:
            try:
                choose_codec(str(compression))
            except ValueError as exc:
                problems.append(str(exc))
        level = settings.get("level", 6)
        if not isinstance(level, int) or isinstance(level, bool) or not 1 <= level <= 19:
            problems.append(f"level = {level!r}: an integer from 1 to 19 is expected (zlib uses at most 9)")
        return problems

    @classmethod
    def open(cls, con: duckdb.DuckDBPyConnection, lock: threading.RLock, root: Path,
             settings: Mapping[str, Any]) -> CasObjectStore:
        state_dir = Path(root).parent  # root is the project's .agentenv/objects
        cas = open_root(settings, state_dir.parent)
        if cas.codec == "zlib":
            cas.level = min(cas.level, 9)
        return cls(con, lock, cas, state_dir)

    def __init__(self, con: duckdb.DuckDBPyConnection, lock: threading.RLock, cas: CasRoot, state_dir: Path):
        self._con = con
        self._lock = lock
        self.cas = cas
        self.project = project_id(state_dir)
        with self._lock:
            self._con.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (key VARCHAR PRIMARY KEY, sha256 VARCHAR NOT NULL,"
                              " size BIGINT NOT NULL, content_type VARCHAR, created_at DOUBLE)")
        cas.register(self.project, state_dir)

    def blob_path(self, sha256: str) -> Path:
        return self.cas.blob_path(sha256)

    def put(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> dict:
        check_key(key)
        sha = hashlib.sha256(data).hexdigest()
        existing = self.metadata(key)
        if existing is not None:
            if existing["sha256"] == sha:
                return existing
            raise ConflictError(f"object {key!r} already exists with different bytes (write-once)",
                                hint="objects never change once written; put the new bytes under a new key")
        self.cas.write(sha, data, self.project)
        meta = {"key": key, "sha256": sha, "size": len(data), "content_type": content_type, "created_at": time.time()}
        with self._lock:
            row = self._con.execute(f"SELECT sha256 FROM {TABLE} WHERE key = ?", [key]).fetchone()
            if row and row[0] != sha:
                raise ConflictError(f"object {key!r} was written concurrently with different bytes")
            if not row:
                self._con.execute(f"INSERT INTO {TABLE} VALUES (?, ?, ?, ?, ?)",
                                  [key, sha, len(data), content_type, meta["created_at"]])
        return meta

    def get(self, key: str) -> bytes:
        meta = self.metadata(key)
        if meta is None:
            raise NotFoundError(f"object {key!r} not found")
        try:
            return self.cas.read(meta["sha256"])
        except FileNotFoundError as exc:
            raise NotFoundError(f"object {key!r} is recorded but its blob is missing from the CAS root "
                                f"({self.cas.blob_path(meta['sha256'])})",
                                hint="was the root moved, or gc run from a project that does not list this one? "
                                     "put the same bytes again to restore it") from exc
        except CorruptBlob as exc:
            raise ConflictError(f"object {key!r} is corrupt in the CAS root: {exc.path}: {exc.reason}",
                                hint="the bytes on disk changed after they were written; put the same bytes again "
                                     "(e.g. `agentenv artifact put` of the original file) to repair the blob, or "
                                     "delete it") from exc

    def metadata(self, key: str) -> dict | None:
        with self._lock:
            row = self._con.execute(f"SELECT {', '.join(META_FIELDS)} FROM {TABLE} WHERE key = ?", [key]).fetchone()
        return dict(zip(META_FIELDS, row)) if row else None

    def list(self, prefix: str = "") -> list[dict]:
        with self._lock:
            rows = self._con.execute(f"SELECT {', '.join(META_FIELDS)} FROM {TABLE} WHERE starts_with(key, ?)"
                                     " ORDER BY key", [prefix]).fetchall()
        return [dict(zip(META_FIELDS, r)) for r in rows]

    def purge(self) -> dict:
        """Forget this project's keys and references; `agentenv cas gc` then frees the blobs no one else holds."""
        with self._lock:
            keys, size = self._con.execute(f"SELECT count(*), coalesce(sum(size), 0) FROM {TABLE}").fetchone() or (0, 0)
            self._con.execute(f"DELETE FROM {TABLE}")
            refs = self.cas.forget_project(self.project)
        return {"keys": int(keys), "files": refs, "bytes": int(size)}
