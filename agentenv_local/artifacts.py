"""Artifacts: immutable, versioned data. A `file` is one file; a `file_artifact_universe` is a
bundle of files with relative paths. Bytes go to the object store under write-once keys,
`artifacts/<type>/<id segment>/<version>-<attempt>/<relpath>`; the document records each file's
key, size and sha256.
"""

from __future__ import annotations

import hashlib
import mimetypes
import re
import secrets
from pathlib import Path
from typing import Any

from agentenv_local.errors import NotFoundError, ValidationError

FILE = "file"
BUNDLE = "file_artifact_universe"
ARTIFACT_TYPES = (FILE, BUNDLE)


def key_segment(artifact_id: str) -> str:
    """A filesystem-safe, collision-free path segment for an id (ids may contain '/', '@')."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", artifact_id).strip("-.")[:80] or "artifact"
    return f"{slug}-{hashlib.sha256(artifact_id.encode()).hexdigest()[:12]}"


def files_digest(files: dict[str, bytes], extra: dict | None = None) -> str:
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(rel.encode() + b"\0" + hashlib.sha256(files[rel]).digest())
    if extra:
        h.update(repr(sorted(extra.items())).encode())
    return h.hexdigest()


def read_folder(folder: Path) -> dict[str, bytes]:
    """Every regular file under `folder` (dot entries and __pycache__ skipped), by relative path."""
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if any(part.startswith(".") or part == "__pycache__" for part in rel.parts):
            continue
        if path.is_file():
            out[rel.as_posix()] = path.read_bytes()
    return out


def put_artifact(store, artifact_id: str, files: dict[str, bytes], *, artifact_type: str | None = None,
                 description: str = "", digest: str | None = None, extra: dict[str, Any] | None = None,
                 if_changed: bool = False) -> dict:
    """Write the files to the object store, then the artifact document (next version)."""
    if not files:
        raise ValidationError(f"artifact {artifact_id!r} has no files")
    artifact_type = artifact_type or (FILE if len(files) == 1 else BUNDLE)
    if artifact_type not in ARTIFACT_TYPES:
        raise ValidationError(f"unknown artifact type {artifact_type!r}; use one of {', '.join(ARTIFACT_TYPES)}")
    if artifact_type == FILE and len(files) != 1:
        raise ValidationError(f"a file artifact holds exactly one file; {artifact_id!r} has {len(files)}",
                              hint=f"use type {BUNDLE} for several files")
    version = store.documents.latest_version("artifacts", artifact_id) + 1
    prefix = f"artifacts/{artifact_type}/{key_segment(artifact_id)}/{version}-{secrets.token_hex(4)}/"
    entries = {}
    for rel, data in sorted(files.items()):
        content_type = mimetypes.guess_type(rel)[0] or "application/octet-stream"
        meta = store.objects.put(prefix + rel, data, content_type)
        entries[rel] = {"key": meta["key"], "sha256": meta["sha256"], "size": meta["size"],
                        "content_type": content_type}
    body = {"type": artifact_type, "description": description, "files": entries, "object_prefix": prefix,
            **(extra or {})}
    if artifact_type == FILE:
        (rel, entry), = entries.items()
        body.update({"filename": rel, "content_type": entry["content_type"], "object_url": f"object://{entry['key']}"})
    else:
        body["bundle_object_url"] = f"object://{prefix}"
    return store.documents.put("artifacts", artifact_id, body, digest=digest or files_digest(files),
                               if_changed=if_changed)


def read_files(store, doc: dict) -> dict[str, bytes]:
    body = doc["body"]
    files = body.get("files")
    if not isinstance(files, dict):
        raise NotFoundError(f"artifact {doc['id']} v{doc['version']} has no files recorded")
    return {rel: store.objects.get(entry["key"]) for rel, entry in files.items()}
