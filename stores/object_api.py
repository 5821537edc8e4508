"""What an object store is: the interface the built-in (`local`) and a plugin's object store implement.

An object store is registered in the `agentenv_local.stores` entry-point group like any store; the core
tells it from the other stores there by `store_kind == "objects"` (it never imports this module), and the
project picks one with `[store] objects = "<name>"`. The hub builds it with `open(con, lock, root,
settings)`: the project's DuckDB connection and its lock (where the store keeps its key map), the project's
own objects folder (`.agentenv/objects`), and the settings from `[plugins.<its distribution>]`.

Objects are write-once: `put` of a new key stores it, the same bytes again are a no-op, other bytes are a
`ConflictError`. `get` verifies the bytes against their sha256. A metadata dict is
`{"key", "sha256", "size", "content_type", "created_at"}`.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from .duckdb_engine import duckdb

META_FIELDS = ("key", "sha256", "size", "content_type", "created_at")


def check_key(key: str) -> None:
    parts = key.split("/")
    if not key or key.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"bad object key {key!r}: use relative slash-separated names without '..'")


class ObjectStoreBase(ABC):
    """Write-once bytes by key, verified on read."""

    store_kind: ClassVar[str] = "objects"
    # The settings `open` accepts (from `[plugins.<distribution>]`); any other key is a ConfigError.
    settings_keys: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def check_settings(cls, settings: Mapping[str, Any]) -> list[str]:
        """Why these settings cannot open this store (one line each), or []; the core checks before opening."""
        unknown = sorted(set(settings) - cls.settings_keys)
        if not unknown:
            return []
        accepted = ", ".join(sorted(cls.settings_keys)) or "none"
        return [f"unknown setting(s) {', '.join(unknown)}; accepted: {accepted}"]

    @classmethod
    @abstractmethod
    def open(cls, con: duckdb.DuckDBPyConnection, lock: threading.RLock, root: Path,
             settings: Mapping[str, Any]) -> ObjectStoreBase:
        """The store for one project: `root` is the project's `.agentenv/objects` folder."""

    @abstractmethod
    def put(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> dict: ...

    @abstractmethod
    def get(self, key: str) -> bytes: ...

    @abstractmethod
    def metadata(self, key: str) -> dict | None: ...

    def exists(self, key: str) -> bool:
        return self.metadata(key) is not None

    @abstractmethod
    def list(self, prefix: str = "") -> list[dict]: ...

    @abstractmethod
    def purge(self) -> dict:
        """Forget every object this store holds for the project (after a migration away from it).

        Returns `{"keys": n, "files": n, "bytes": n}`: what was removed from this project's view.
        """
