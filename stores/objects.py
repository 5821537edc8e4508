"""Write-once, content-addressed bytes under the state dir, with metadata in DuckDB.

Bytes live at `objects/sha256/<ab>/<rest>`; a key (`artifacts/file/<id>/<v>/<name>`) maps to a
digest. Writing a key again with the same bytes is a no-op; with different bytes it is refused.
Blobs are written to a temp file and renamed into place, so a crash never leaves a torn blob.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentenv_local.errors import ConflictError, NotFoundError

from .duckdb_engine import duckdb
from .object_api import ObjectStoreBase, check_key


class ObjectStore(ObjectStoreBase):
    """The built-in object store (`[store] objects = "local"`, the default): blobs in the project."""

    @classmethod
    def open(cls, con: duckdb.DuckDBPyConnection, lock: threading.RLock, root: Path,
             settings: Mapping[str, Any]) -> ObjectStore:
        return cls(con, lock, root)

    def __init__(self, con: duckdb.DuckDBPyConnection, lock: threading.RLock, root: Path):
        self._con = con
        self._lock = lock
        self.root = Path(root)
        (self.root / "tmp").mkdir(parents=True, exist_ok=True)

    def blob_path(self, sha256: str) -> Path:
        return self.root / "sha256" / sha256[:2] / sha256[2:]

    def put(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> dict:
        check_key(key)
        sha = hashlib.sha256(data).hexdigest()
        existing = self.metadata(key)
        if existing is not None:
            if existing["sha256"] == sha:
                return existing
            raise ConflictError(
                f"object {key!r} already exists with different bytes (write-once)",
                hint="objects never change once written; put the new bytes under a new key or a new version",
            )
        self._write_blob(sha, data)
        meta = {"key": key, "sha256": sha, "size": len(data), "content_type": content_type, "created_at": time.time()}
        with self._lock:
            # Re-check under the lock: a concurrent writer may have claimed the key meanwhile.
            row = self._con.execute("SELECT sha256 FROM objects WHERE key = ?", [key]).fetchone()
            if row and row[0] != sha:
                raise ConflictError(f"object {key!r} was written concurrently with different bytes")
            if not row:
                self._con.execute("INSERT INTO objects VALUES (?, ?, ?, ?, ?)",
                                  [key, sha, len(data), content_type, meta["created_at"]])
        return meta

    def _write_blob(self, sha: str, data: bytes) -> None:
        path = self.blob_path(sha)
        if path.exists():
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.root / "tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, 0o444)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def metadata(self, key: str) -> dict | None:
        with self._lock:
            row = self._con.execute("SELECT key, sha256, size, content_type, created_at FROM objects WHERE key = ?",
                                    [key]).fetchone()
        if not row:
            return None
        return dict(zip(("key", "sha256", "size", "content_type", "created_at"), row))

    def exists(self, key: str) -> bool:
        return self.metadata(key) is not None

    def get(self, key: str) -> bytes:
        meta = self.metadata(key)
        if meta is None:
            raise NotFoundError(f"object {key!r} not found")
        path = self.blob_path(meta["sha256"])
        try:
            data = path.read_bytes()
        except FileNotFoundError as exc:
            raise NotFoundError(f"object {key!r} is recorded but its bytes are missing at {path}") from exc
        if hashlib.sha256(data).hexdigest() != meta["sha256"]:
            raise ConflictError(f"object {key!r} is corrupt on disk: its sha256 no longer matches")
        return data

    def list(self, prefix: str = "") -> list[dict]:
        with self._lock:
            rows = self._con.execute(
                "SELECT key, sha256, size, content_type, created_at FROM objects"
                " WHERE starts_with(key, ?) ORDER BY key",
                [prefix],
            ).fetchall()
        return [dict(zip(("key", "sha256", "size", "content_type", "created_at"), r)) for r in rows]

    def purge(self) -> dict:
        """Forget every key and remove every blob of this project's own objects folder."""
        with self._lock:
            keys, size = self._con.execute("SELECT count(*), coalesce(sum(size), 0) FROM objects").fetchone() or (0, 0)
            blobs = self.root / "sha256"
            files = sum(1 for p in blobs.rglob("*") if p.is_file()) if blobs.is_dir() else 0
            self._con.execute("DELETE FROM objects")
            if blobs.is_dir():
                for folder in blobs.iterdir():  # the blobs are read-only files in writable folders
                    shutil.rmtree(folder)
        return {"keys": int(keys), "files": files, "bytes": int(size)}
