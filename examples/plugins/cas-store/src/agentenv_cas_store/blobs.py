"""The shared CAS root: compressed blobs named by the sha256 of their bytes, and who references them.

Layout under the root (any folder, shared by every project that names it):

    blobs/<2 hex>/<62 hex>       one file per distinct content: a header (magic + codec) and the compressed bytes
    refs/<project id>/<2>/<62>   an empty file: this project holds a key with that content
    projects/<project id>.json   which project (its .agentenv folder) the id is
    gc.lock                      puts hold it shared, `gc` exclusive
    tmp/                         blobs being written (renamed into blobs/ when complete)

A put marks its reference first, then writes the blob if it is not there, both under the shared lock;
gc takes the lock exclusively, so it never sees a reference without its blob nor deletes a blob a put is
about to reuse: a concurrent put is never lost. A blob is written to tmp/, synced and renamed: readers
never see half a blob. Every read is decompressed and checked against its sha256.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib
import json
import os
import tempfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAGIC = b"AECAS1"
CODECS = {"none": b"n", "zlib": b"z", "zstd": b"s"}
_BY_TAG = {tag: name for name, tag in CODECS.items()}
COMPRESSIONS = ("auto", "zlib", "zstd", "none")


def _zstd_module() -> Any:
    """The standard library's zstd (Python 3.14+), else the `zstandard` package, else None."""
    for name in ("compression.zstd", "zstandard"):  # imported by name: neither exists on every interpreter
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


def choose_codec(compression: str) -> str:
    """The codec new blobs are written with: `auto` is zstd when the standard library has it, else zlib."""
    if compression == "auto":
        try:
            importlib.import_module("compression.zstd")
            return "zstd"
        except ImportError:
            return "zlib"
    if compression == "zstd" and _zstd_module() is None:
        raise ValueError("compression = \"zstd\" needs Python 3.14+ or the zstandard package; "
                         "use \"zlib\" or \"auto\"")
    if compression not in CODECS:
        raise ValueError(f"compression = {compression!r}: use one of {', '.join(COMPRESSIONS)}")
    return compression


def _compressor(codec: str, level: int) -> Callable[[bytes], bytes]:
    if codec == "zlib":
        return lambda data: zlib.compress(data, level)
    if codec == "zstd":
        module = _zstd_module()
        assert module is not None
        # compression.zstd and the zstandard package both have one-shot compress(data, level=)/decompress(data)
        return lambda data: bytes(module.compress(data, level=level))
    return lambda data: data


def _decompress(codec: str, payload: bytes) -> bytes:
    if codec == "zlib":
        return zlib.decompress(payload)
    if codec == "zstd":
        module = _zstd_module()
        if module is None:
            raise ValueError("it is zstd-compressed and this Python has no zstd (3.14+ or the zstandard package)")
        return bytes(module.decompress(payload))
    return payload


class CorruptBlob(Exception):
    """A blob whose bytes no longer decompress to the content its name says."""

    def __init__(self, path: Path, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


def project_id(state_dir: Path) -> str:
    """A project's id in the root: from its .agentenv folder's absolute path."""
    return hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:16]


def _shard(root: Path, sha: str) -> Path:
    return root / sha[:2] / sha[2:]


@dataclass
class CasRoot:
    path: Path
    codec: str = "zlib"
    level: int = 6

    def __post_init__(self) -> None:
        for sub in ("blobs", "refs", "projects", "tmp"):
            (self.path / sub).mkdir(parents=True, exist_ok=True)
        self._compress = _compressor(self.codec, self.level)

    def blob_path(self, sha: str) -> Path:
        return _shard(self.path / "blobs", sha)

    def ref_path(self, project: str, sha: str) -> Path:
        return _shard(self.path / "refs" / project, sha)

    @contextlib.contextmanager
    def locked(self, exclusive: bool) -> Iterator[None]:
        # A new descriptor per use: flock belongs to the open file, so threads sharing one would share the lock.
        fd = os.open(self.path / "gc.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)  # releases the lock

    def register(self, project: str, state_dir: Path) -> None:
        record = self.path / "projects" / f"{project}.json"
        body = json.dumps({"state_dir": str(state_dir.resolve())})
        if not record.exists() or record.read_text() != body:
            self._atomic_write(record, body.encode(), mode=0o644)

    def write(self, sha: str, data: bytes, project: str) -> bool:
        """Reference `sha` for `project` and store `data` unless a sound copy is there; True if written."""
        with self.locked(exclusive=False):
            ref = self.ref_path(project, sha)
            if not ref.exists():
                ref.parent.mkdir(parents=True, exist_ok=True)
                ref.touch()
            blob = self.blob_path(sha)
            if blob.exists():
                try:
                    self.read(sha)
                    return False  # deduplicated
                except CorruptBlob:
                    pass  # a damaged copy: these bytes repair it
            compressed = self._compress(data)
            codec = self.codec if len(compressed) < len(data) else "none"  # incompressible: stored as it is
            blob.parent.mkdir(parents=True, exist_ok=True)
            self._atomic_write(blob, MAGIC + CODECS[codec] + (compressed if codec != "none" else data), mode=0o444)
            return True

    def read(self, sha: str) -> bytes:
        """The bytes of `sha`, verified; FileNotFoundError when absent, CorruptBlob when they do not match."""
        path = self.blob_path(sha)
        raw = path.read_bytes()
        if not raw.startswith(MAGIC) or len(raw) < len(MAGIC) + 1:
            raise CorruptBlob(path, "not a CAS blob (bad header)")
        codec = _BY_TAG.get(raw[len(MAGIC):len(MAGIC) + 1])
        if codec is None:
            raise CorruptBlob(path, "unknown codec in its header")
        try:
            data = _decompress(codec, raw[len(MAGIC) + 1:])
        except Exception as exc:  # zlib.error, a zstd error, ValueError: each codec raises its own
            raise CorruptBlob(path, f"does not decompress ({type(exc).__name__}: {exc})") from exc
        if hashlib.sha256(data).hexdigest() != sha:
            raise CorruptBlob(path, "its content's sha256 no longer matches its name")
        return data

    def forget_project(self, project: str) -> int:
        """Drop a project's references (its record stays until gc); returns how many there were."""
        refs = self.path / "refs" / project
        count = sum(1 for p in refs.rglob("*") if p.is_file()) if refs.is_dir() else 0
        if refs.is_dir():
            _rmtree(refs)
        return count

    def gc(self, dry_run: bool = False) -> dict:
        """Remove the blobs no live project references; a project whose store is gone loses its references."""
        report = {"projects": 0, "projects_gone": 0, "blobs": 0, "removed": 0, "removed_bytes": 0, "tmp_removed": 0}
        with self.locked(exclusive=True):
            live: set[str] = set()
            for record in sorted((self.path / "projects").glob("*.json")):
                project = record.stem
                try:
                    state_dir = Path(json.loads(record.read_text())["state_dir"])
                except (OSError, ValueError, KeyError, TypeError):
                    state_dir = None
                if state_dir is not None and (state_dir / "store.duckdb").exists():
                    live.add(project)
                    continue
                report["projects_gone"] += 1
                if not dry_run:
                    self.forget_project(project)
                    record.unlink(missing_ok=True)
            report["projects"] = len(live)
            marked: set[str] = set()
            for refs in (self.path / "refs").iterdir():
                if refs.name in live:  # refs of an unregistered folder count for nothing
                    marked.update(p.parent.name + p.name for p in refs.glob("*/*"))
            for blob in list((self.path / "blobs").glob("*/*")):
                report["blobs"] += 1
                if blob.parent.name + blob.name in marked:
                    continue
                report["removed"] += 1
                report["removed_bytes"] += blob.stat().st_size
                if not dry_run:
                    blob.unlink()
            for tmp in (self.path / "tmp").iterdir():  # no put runs now: every temp file is a dead writer's
                report["tmp_removed"] += 1
                if not dry_run:
                    tmp.unlink(missing_ok=True)
        return report

    def stats(self) -> dict:
        blobs = list((self.path / "blobs").glob("*/*"))
        return {"root": str(self.path), "codec": self.codec, "blobs": len(blobs),
                "bytes_on_disk": sum(b.stat().st_size for b in blobs),
                "projects": len(list((self.path / "projects").glob("*.json")))}

    def _atomic_write(self, path: Path, data: bytes, mode: int) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.path / "tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, mode)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _rmtree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
