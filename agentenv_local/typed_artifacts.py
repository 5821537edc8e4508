"""The reference's typed artifacts: documents that pin other artifacts rather than hold files themselves.

- `environment` (legacy `service`): one data file for one env server, `environment_name`; the file is the
  `file` artifact `<id>__file`, pinned by `file_artifact_ref {id, version}`.
- `environment_universe` (legacy `service_universe`): a set of pinned `environment` artifacts
  (`environment_artifact_refs`), plus `metadata_refs {key: ref}` to files (`<id>__metadata__<key>`).
  `snapshot_env` stores one; `load_artifact` with `env_id` sends each member's file to its server.
- `cli`: a command-line tool, its tree the file bundle `<id>__files`, with `entrypoint` (the executable's
  path in the tree) and `command_name` (what it is called on PATH).
- `docker_image`: a build context (`Dockerfile` and its files, the bundle `<id>__files`) that
  `build_docker_image` builds into a sandbox provider's local image store (Podman's).

Each document names the child artifacts it pins, so a version never changes under it; the legacy type names
are read as their new ones (`artifacts.canonical_type`; reading every kind is in artifacts.py, which this module
builds on), as the reference's documents use both.
"""

from __future__ import annotations

import posixpath
import re
import tempfile
from pathlib import Path
from typing import Any, Callable

from agentenv_local.artifacts import (
    BUNDLE,
    ENVIRONMENT,
    ENVIRONMENT_UNIVERSE,
    FILE,
    _typed_doc,
    canonical_type,
    files_digest,
    key_segment,
    put_artifact,
    read_files,
)
from agentenv_local.errors import ValidationError

CLI = "cli"
DOCKER_IMAGE = "docker_image"
TYPED = (ENVIRONMENT, ENVIRONMENT_UNIVERSE, CLI, DOCKER_IMAGE)

# A command name becomes a file name on PATH: a plain name, never a path or an option.
COMMAND_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}")
# An environment name is a server (child) name of an env.
ENVIRONMENT_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")
DOCKERFILES = ("Dockerfile", "Containerfile")


def derived_id(artifact_id: str, *parts: str) -> str:
    """The id of a child artifact written with its parent: `<id>__<part>[__<part>]`."""
    return "__".join((artifact_id, *parts))


def ref_of(doc: dict) -> dict[str, Any]:
    return {"id": doc["id"], "version": doc["version"]}


# --- environment ------------------------------------------------------------------------------------------

def check_environment_name(name: str | None, where: str) -> str:
    if not name or not ENVIRONMENT_NAME.fullmatch(name):
        raise ValidationError(f"{where}: environment_name {name!r} must name one server of an env "
                              "(letters, digits, '.', '_', '-')", hint="e.g. --environment-name crm")
    return name


def put_environment(store: Any, artifact_id: str, filename: str, data: bytes, *, environment_name: str,
                    description: str = "", extra: dict[str, Any] | None = None, digest: str | None = None,
                    if_changed: bool = False) -> dict:
    """Store `data` as the file `<id>__file`, then the `environment` document pinning it."""
    check_environment_name(environment_name, f"environment {artifact_id!r}")
    file_doc = put_artifact(store, derived_id(artifact_id, "file"), {filename: data}, artifact_type=FILE,
                            description=description or filename, if_changed=True)
    body = {"type": ENVIRONMENT, "description": description, "environment_name": environment_name,
            "service_name": environment_name,  # the reference writes both spellings
            "file_artifact_ref": ref_of(file_doc), "filename": filename, **(extra or {})}
    digest = digest or files_digest({filename: data}, {"type": ENVIRONMENT, "environment_name": environment_name,
                                                       "description": description})
    return store.documents.put("artifacts", artifact_id, body, digest=digest, if_changed=if_changed)


# --- environment_universe ---------------------------------------------------------------------------------

def put_environment_universe(store: Any, artifact_id: str, environment_refs: list[dict], *,
                             metadata: dict[str, tuple[str, bytes]] | None = None, description: str = "",
                             extra: dict[str, Any] | None = None) -> dict:
    """The `environment_universe` document pinning each environment (latest version when a ref has none).

    Every ref is checked before anything is written; `metadata` ({key: (filename, bytes)}) is stored as the
    files `<id>__metadata__<key>`."""
    where = f"environment_universe {artifact_id!r}"
    if not environment_refs:
        raise ValidationError(f"{where}: it needs at least one environment artifact",
                              hint="--environment-artifact ID[:VERSION] (repeatable)")
    docs = [_typed_doc(store, ref, ENVIRONMENT, where) for ref in environment_refs]
    names: dict[str, str] = {}
    for d in docs:
        name = d["body"].get("environment_name") or d["body"].get("service_name")
        if name in names:
            raise ValidationError(f"{where}: environments {names[name]!r} and {d['id']!r} both seed {name!r}",
                                  hint="a universe holds one environment artifact per server")
        names[name] = d["id"]
    for key in metadata or {}:
        if not ENVIRONMENT_NAME.fullmatch(key):
            raise ValidationError(f"{where}: metadata key {key!r} must be letters, digits, '.', '_', '-'")
    metadata_refs = {key: ref_of(put_artifact(store, derived_id(artifact_id, "metadata", key), {name: data},
                                              artifact_type=FILE, description=f"metadata {key!r} of {artifact_id}"))
                     for key, (name, data) in (metadata or {}).items()}
    refs = [ref_of(d) for d in docs]
    body = {"type": ENVIRONMENT_UNIVERSE, "description": description, "environment_artifact_refs": refs,
            "service_artifact_refs": refs, "metadata_refs": metadata_refs or None, **(extra or {})}
    return store.documents.put("artifacts", artifact_id, body)


# --- cli --------------------------------------------------------------------------------------------------

def put_cli(store: Any, artifact_id: str, files: dict[str, bytes], *, entrypoint: str, command_name: str,
            env_id: str | None = None, env_version: int | None = None, description: str = "",
            extra: dict[str, Any] | None = None, digest: str | None = None, if_changed: bool = False) -> dict:
    """The CLI's tree as the bundle `<id>__files`, then the `cli` document naming its entrypoint."""
    where = f"cli {artifact_id!r}"
    problems = []
    if not COMMAND_NAME.fullmatch(command_name or ""):
        problems.append(f"command_name {command_name!r} must be a plain name (letters, digits, '.', '_', '-'; "
                        "not starting with '.' or '-'): it becomes a file on PATH")
    if entrypoint not in files:
        problems.append(f"entrypoint {entrypoint!r} is not one of its files ({', '.join(sorted(files)[:5])}"
                        f"{', ...' if len(files) > 5 else ''})")
    if problems:
        raise ValidationError(f"{where}: {len(problems)} problem(s); nothing was written", problems=problems,
                              hint="--entrypoint is a path inside --cli-dir, e.g. bin/mytool")
    digest = digest or files_digest(files, {"type": CLI, "entrypoint": entrypoint, "command_name": command_name,
                                            "env_id": env_id, "env_version": env_version})
    if if_changed and (same := _unchanged(store, artifact_id, digest)) is not None:
        return same
    tree = put_artifact(store, derived_id(artifact_id, "files"), files, artifact_type=BUNDLE,
                        description=f"files of cli {artifact_id}", if_changed=True)
    body = {"type": CLI, "description": description, "command_name": command_name, "entrypoint": entrypoint,
            "cli_files_id": tree["id"], "cli_files_version": tree["version"],
            "cli_object_url": tree["body"]["bundle_object_url"], "files": tree["body"]["files"],
            "env_id": env_id, "env_version": env_version, **(extra or {})}
    return store.documents.put("artifacts", artifact_id, body, digest=digest, if_changed=if_changed)


def _unchanged(store: Any, artifact_id: str, digest: str) -> dict | None:
    """The latest version of `artifact_id`, marked unchanged, when it already has `digest` (if_changed puts
    check this before storing the files, so an unchanged artifact writes nothing)."""
    latest = store.documents.find("artifacts", artifact_id)
    return {**latest, "unchanged": True} if latest is not None and latest.get("digest") == digest else None


# --- docker_image -----------------------------------------------------------------------------------------

def put_docker_image(store: Any, artifact_id: str, files: dict[str, bytes], *, description: str = "",
                     dockerfile_path: str | None = None, extra: dict[str, Any] | None = None,
                     digest: str | None = None, if_changed: bool = False) -> dict:
    """A build context (the bundle `<id>__files`) and the image name it builds as in the local store."""
    dockerfile = dockerfile_path or next((name for name in DOCKERFILES if name in files), None)
    if dockerfile is None or dockerfile not in files:
        raise ValidationError(f"docker_image {artifact_id!r}: its files hold no "
                              f"{dockerfile_path or ' or '.join(DOCKERFILES)}",
                              hint="a docker_image artifact is a build context with a Dockerfile at its root")
    source_digest = files_digest(files, {"type": DOCKER_IMAGE, "dockerfile_path": dockerfile})
    digest = digest or source_digest
    if if_changed and (same := _unchanged(store, artifact_id, digest)) is not None:
        return same
    context = put_artifact(store, derived_id(artifact_id, "files"), files, artifact_type=BUNDLE,
                           description=f"build context of docker_image {artifact_id}", if_changed=True)
    body = {"type": DOCKER_IMAGE, "description": description, "image_name": image_name(artifact_id),
            "dockerfile_path": dockerfile, "source_digest": source_digest,
            "build_context_id": context["id"], "build_context_version": context["version"],
            "build_context_object_url": context["body"]["bundle_object_url"], "files": context["body"]["files"],
            **(extra or {})}
    return store.documents.put("artifacts", artifact_id, body, digest=digest, if_changed=if_changed)


def image_name(artifact_id: str) -> str:
    """The name an image artifact is built under: its id made a valid image name (lowercase, no '@')."""
    slug = re.sub(r"[^a-z0-9._-]+", "-", artifact_id.lower()).strip("-._")[:60] or "image"
    return f"artifact-{slug}-{key_segment(artifact_id)[-12:]}"


def build_docker_image(store: Any, doc: dict, provider: Any,
                       on_line: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Build a docker_image artifact's context into `provider`'s image store (unchanged sources are not rebuilt
    by the provider); returns the provider's result (`ref`, `image_id`, `built`)."""
    body = doc["body"]
    if canonical_type(body.get("type")) != DOCKER_IMAGE:
        raise ValidationError(f"artifact {doc['id']} v{doc['version']} is a {body.get('type')!r} artifact, "
                              "not a docker_image")
    files = read_files(store, doc)
    with tempfile.TemporaryDirectory(prefix="agentenv-image-") as tmp:
        root = Path(tmp)
        for rel, data in files.items():
            target = root / rel
            if posixpath.isabs(rel) or ".." in Path(rel).parts:
                raise ValidationError(f"artifact {doc['id']}: file {rel!r} leaves the build context")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        return dict(provider.build_image(body["image_name"], f"v{doc['version']}", root,
                                         containerfile=root / body["dockerfile_path"], on_line=on_line))


# --- bundle folders (artifacts/<name>/ with an artifact.toml) ---------------------------------------------

# What an artifact.toml may set for each typed kind a bundle folder can be, beyond type, id and description.
BUNDLE_KEYS: dict[str, tuple[str, ...]] = {ENVIRONMENT: ("environment_name",), CLI: ("command_name", "entrypoint"),
                                           DOCKER_IMAGE: ("dockerfile_path",)}
# The reference's stored names an artifact.toml may use for them.
BUNDLE_KEY_ALIASES = {"service_name": "environment_name"}


def infer_bundle_type(files: dict[str, bytes], declared: str | None) -> str | None:
    """A bundle folder's type, as the reference infers it: the declared one (legacy names read as new), else a
    root Dockerfile makes a docker_image; None leaves it to the file/file-bundle rule."""
    if declared:
        kind = canonical_type(declared)
        return kind if isinstance(kind, str) else None
    return DOCKER_IMAGE if "Dockerfile" in files else None


def bundle_problems(kind: str, settings: dict[str, Any], files: dict[str, bytes]) -> list[str]:
    """What is wrong with a typed bundle folder's artifact.toml keys and files (each a line of its own)."""
    keys = {BUNDLE_KEY_ALIASES.get(k, k): v for k, v in settings.items()}
    problems = [f"{k} must be a string, got {type(keys[k]).__name__}" for k in BUNDLE_KEYS.get(kind, ())
                if k in keys and not isinstance(keys[k], str)]
    if problems:
        return problems
    if kind == ENVIRONMENT:
        if not keys.get("environment_name"):
            problems.append("environment_name is required: the env server the file seeds")
        elif not ENVIRONMENT_NAME.fullmatch(keys["environment_name"]):
            problems.append(f"environment_name {keys['environment_name']!r} must name one server of an env "
                            "(letters, digits, '.', '_', '-')")
        if len(files) != 1:
            problems.append(f"an environment wraps exactly one file; this folder has {len(files)}")
    elif kind == CLI:
        problems += [f"{k} is required" for k in ("command_name", "entrypoint") if not keys.get(k)]
        if keys.get("command_name") and not COMMAND_NAME.fullmatch(keys["command_name"]):
            problems.append(f"command_name {keys['command_name']!r} must be a plain name (letters, digits, '.', "
                            "'_', '-'; not starting with '.' or '-')")
        if keys.get("entrypoint") and keys["entrypoint"] not in files:
            problems.append(f"entrypoint {keys['entrypoint']!r} is not one of this folder's files")
    elif kind == DOCKER_IMAGE:
        dockerfile = keys.get("dockerfile_path") or "Dockerfile"
        if dockerfile not in files and not (not keys.get("dockerfile_path") and "Containerfile" in files):
            problems.append(f"a docker_image folder is a build context: {dockerfile} is not among its files")
    return problems


def put_bundle_artifact(store: Any, artifact_id: str, files: dict[str, bytes], kind: str,
                        settings: dict[str, Any], *, description: str = "", digest: str | None = None,
                        extra: dict[str, Any] | None = None, if_changed: bool = False) -> dict:
    """Store a typed bundle folder (its keys checked by `bundle_problems` when the bundle was read)."""
    keys = {BUNDLE_KEY_ALIASES.get(k, k): v for k, v in settings.items()}
    if kind == ENVIRONMENT:
        (filename, data), = files.items()
        return put_environment(store, artifact_id, filename, data, environment_name=keys["environment_name"],
                               description=description, extra=extra, digest=digest, if_changed=if_changed)
    if kind == CLI:
        return put_cli(store, artifact_id, files, entrypoint=keys["entrypoint"], command_name=keys["command_name"],
                       description=description, extra=extra, digest=digest, if_changed=if_changed)
    if kind == DOCKER_IMAGE:
        return put_docker_image(store, artifact_id, files, description=description,
                                dockerfile_path=keys.get("dockerfile_path"), extra=extra, digest=digest,
                                if_changed=if_changed)
    return put_artifact(store, artifact_id, files, artifact_type=kind, description=description, digest=digest,
                        extra=extra, if_changed=if_changed)
