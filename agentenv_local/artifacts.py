"""Artifacts: immutable, versioned data. A `file` is one file; a `file_artifact_universe` is a
bundle of files with relative paths (the typed kinds that pin these, `environment`, `cli`, ..., are in
typed_artifacts.py). Bytes go to the object store under write-once keys,
`artifacts/<type>/<id segment>/<version>-<attempt>/<relpath>`; the document records each file's
key, size and sha256.
"""

from __future__ import annotations

import hashlib
import mimetypes
import os
import re
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentenv_local.errors import NotFoundError, ValidationError

FILE = "file"
BUNDLE = "file_artifact_universe"
ARTIFACT_TYPES = (FILE, BUNDLE)
ENVIRONMENT = "environment"
ENVIRONMENT_UNIVERSE = "environment_universe"
# The reference's older names for them, still in its documents.
LEGACY_NAMES = {"service": ENVIRONMENT, "service_universe": ENVIRONMENT_UNIVERSE}


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


# Never read, even through an allowed link: a FIFO would hang, /proc and /dev hold this machine's secrets.
_NEVER_UNDER = ("/proc", "/dev", "/sys")
FOLLOW_HINT = ("replace the link with a copy of the file; or, if you trust every link in the folder, pass "
               "--follow-external-links (agentenv run, agentenv artifact put)")


def name_problem(rel: str) -> str | None:
    """Why a file name cannot be an artifact path (it is not valid UTF-8), or None."""
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(rel).decode("ascii", "backslashreplace")
        return f"{shown}: the file name is not valid UTF-8; rename the file"
    return None


def read_folder(folder: Path, *, within: Path | None = None, follow_external_links: bool = False,
                where: str | None = None) -> dict[str, bytes]:
    """Every regular file under `folder` (dot entries and __pycache__ skipped), by relative path.

    A symlink to a file is read only when it stays inside `within` (default: the folder itself), or with
    `follow_external_links`; links into /proc, /dev or /sys and anything that is not a regular file (FIFOs,
    sockets, devices) are never read; links to folders are not walked. Every refusal is collected and
    raised at once (ValidationError naming each file).
    """
    folder = Path(folder)
    where = where or str(folder)
    boundary = os.path.realpath(within or folder)
    out: dict[str, bytes] = {}
    problems: list[str] = []
    for parent, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        for name in sorted(files):
            if name.startswith("."):
                continue
            path = Path(parent) / name
            rel = path.relative_to(folder).as_posix()
            bad = name_problem(rel)
            if bad:
                problems.append(f"{where}/{bad}")
                continue
            try:
                data = _read_one(path, boundary, follow_external_links)
            except ValueError as exc:
                problems.append(f"{where}/{rel}: {exc}")
                continue
            if data is not None:
                out[rel] = data
    if problems:
        raise ValidationError(f"{where}: {len(problems)} file(s) cannot be stored", problems=problems,
                              hint=FOLLOW_HINT if any("outside" in p for p in problems) else None)
    return out


def _read_one(path: Path, boundary: str, follow_external: bool) -> bytes | None:
    """The file's bytes; None for a link to a folder (not walked); ValueError says why it is refused."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC  # O_NONBLOCK: opening a FIFO never waits
    if path.is_symlink():
        target = os.path.realpath(path)
        if any(target == d or target.startswith(d + "/") for d in _NEVER_UNDER):
            raise ValueError(f"a link to {target}, which is never read")
        if os.path.isdir(target):
            return None
        if target != boundary and not target.startswith(boundary.rstrip("/") + "/") and not follow_external:
            raise ValueError(f"a link to {target}, outside {boundary} (copy the file in, or pass "
                             "--follow-external-links if you trust the link)")
        opened = target
    else:
        opened, flags = str(path), flags | os.O_NOFOLLOW
    try:
        fd = os.open(opened, flags)
    except FileNotFoundError:
        raise ValueError("a link to a missing file") from None
    except OSError as exc:
        raise ValueError(f"cannot read it: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("not a regular file (a FIFO, socket or device is never read)")
        return f.read()


def put_artifact(store, artifact_id: str, files: dict[str, bytes], *, artifact_type: str | None = None,
                 description: str = "", digest: str | None = None, extra: dict[str, Any] | None = None,
                 if_changed: bool = False) -> dict:
    """Write the files to the object store, then the artifact document (next version)."""
    if not files:
        raise ValidationError(f"artifact {artifact_id!r} has no files")
    bad_names = [p for p in map(name_problem, files) if p]
    if bad_names:
        raise ValidationError(f"artifact {artifact_id!r}: {len(bad_names)} file name(s) cannot be stored: "
                              + "; ".join(bad_names[:5]) + ("; ..." if len(bad_names) > 5 else ""))
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
    if canonical_type(body.get("type")) in (ENVIRONMENT, ENVIRONMENT_UNIVERSE):  # files pinned by ref
        return typed_files(store, doc)
    files = body.get("files")
    if not isinstance(files, dict):
        raise NotFoundError(f"artifact {doc['id']} v{doc['version']} has no files recorded")
    return {rel: store.objects.get(entry["key"]) for rel, entry in files.items()}


# --- reading the kinds that pin other artifacts (written by typed_artifacts.py) --------------------------

def canonical_type(kind: object) -> object:
    """The type a document's `type` means: the legacy names `service`/`service_universe` read as new ones."""
    return LEGACY_NAMES.get(kind, kind) if isinstance(kind, str) else kind


def _typed_doc(store: Any, ref: dict, want: str, where: str) -> dict:
    """The pinned document `ref`, which must be a `want` artifact (legacy names allowed)."""
    doc = store.documents.find("artifacts", ref["id"], ref.get("version"))
    if doc is None:
        pinned = f" v{ref['version']}" if ref.get("version") else ""
        raise NotFoundError(f"{where}: artifact {ref['id']!r}{pinned} not found",
                            hint=f"put it first (agentenv artifact {want.replace('_', '-')} put)")
    kind = canonical_type((doc.get("body") or {}).get("type"))
    if kind != want:
        raise ValidationError(f"{where}: artifact {ref['id']!r} v{doc['version']} is a {kind!r} artifact, "
                              f"not {want!r}")
    return doc


@dataclass
class EnvironmentFile:
    """One member of an environment (universe): the server it seeds and its data file."""

    artifact_id: str
    version: int
    environment_name: str
    filename: str
    data: bytes


def environment_file(store: Any, doc: dict) -> EnvironmentFile:
    body = doc["body"]
    name = body.get("environment_name") or body.get("service_name")
    ref = body.get("file_artifact_ref") or ({"id": body["file_artifact_id"]} if body.get("file_artifact_id") else None)
    if not isinstance(name, str) or not isinstance(ref, dict):
        raise ValidationError(f"environment artifact {doc['id']} v{doc['version']} names no environment_name "
                              "or file_artifact_ref")
    file_doc = _typed_doc(store, ref, FILE, f"environment {doc['id']!r}")
    (filename, data), = read_files(store, file_doc).items()
    return EnvironmentFile(doc["id"], doc["version"], name, filename, data)


def universe_members(store: Any, doc: dict) -> list[EnvironmentFile]:
    """Every environment file of a universe, in its order (legacy unpinned ids read at their latest)."""
    body = doc["body"]
    refs = body.get("environment_artifact_refs") or body.get("service_artifact_refs")
    if refs is None:
        refs = [{"id": i} for i in body.get("service_artifact_ids") or []]
    return [environment_file(store, _typed_doc(store, ref, ENVIRONMENT, f"universe {doc['id']!r}")) for ref in refs]


def universe_metadata(store: Any, doc: dict) -> dict[str, tuple[str, bytes]]:
    out = {}
    for key, ref in (doc["body"].get("metadata_refs") or {}).items():
        (name, data), = read_files(store, _typed_doc(store, ref, FILE, f"universe {doc['id']!r}")).items()
        out[key] = (name, data)
    return out


def typed_files(store: Any, doc: dict) -> dict[str, bytes]:
    """The files of an environment (`{filename: bytes}`) or universe (`{<environment_name>/<filename>: bytes}`,
    its metadata under `metadata/<key>/<filename>`), as `artifact get --output-dir` and a sandbox load see them."""
    kind = canonical_type(doc["body"].get("type"))
    if kind == ENVIRONMENT:
        member = environment_file(store, doc)
        return {member.filename: member.data}
    if kind != ENVIRONMENT_UNIVERSE:
        raise ValidationError(f"artifact {doc['id']} v{doc['version']} is a {kind!r} artifact, not an environment")
    out = {f"{m.environment_name}/{m.filename}": m.data for m in universe_members(store, doc)}
    out.update({f"metadata/{key}/{name}": data for key, (name, data) in universe_metadata(store, doc).items()})
    return out
