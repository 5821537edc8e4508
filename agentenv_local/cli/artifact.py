"""`agentenv artifact`: put files or folders as versioned artifacts, get them back, list them."""

from __future__ import annotations

from pathlib import Path

import click

from ._common import ago, echo_json, file_count, session, table, valid_id


@click.group()
def artifact():
    """Put, get and list artifacts (a file, or a folder as a file bundle; and the typed kinds)."""


@artifact.command("put")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--id", "artifact_id", required=True, callback=valid_id, help="The artifact id.")
@click.option("--type", "artifact_type", type=click.Choice(["file", "file_artifact_universe"]),
              help="Default: file for a file, file_artifact_universe for a folder.")
@click.option("--description", default="")
@click.option("--follow-external-links", is_flag=True,
              help="Store what symlinks in the folder point to outside it (refused by default).")
def put(path, artifact_id, artifact_type, description, follow_external_links):
    """Store PATH (a file, or every file under a folder) as the next version of --id."""
    from agentenv_local.artifacts import BUNDLE, FILE, put_artifact, read_folder

    if path.is_dir():
        files = read_folder(path, follow_external_links=follow_external_links)
        artifact_type = artifact_type or BUNDLE
    else:
        files = {path.name: _read_one(path)}
        artifact_type = artifact_type or FILE
    _check_names(files)
    with session() as s:
        doc = put_artifact(s.store, artifact_id, files, artifact_type=artifact_type, description=description)
    click.echo(f"Created {artifact_type} {artifact_id} v{doc['version']} ({file_count(len(files))}, "
               f"{sum(len(b) for b in files.values())} bytes).")


def _read_one(path: Path) -> bytes:
    from agentenv_local.errors import ValidationError
    from agentenv_local.untrusted import UntrustedInputError, read_file

    try:  # a FIFO or /dev/zero would never end
        return read_file(path, what=str(path), max_bytes=MAX_FILE_BYTES)
    except UntrustedInputError as exc:
        raise ValidationError(str(exc), hint="give a regular file, or a folder of them") from None


def _check_names(files: dict[str, bytes]) -> None:
    """File names become object keys and stored text: refuse ones that are not valid UTF-8."""
    from agentenv_local.errors import ValidationError

    bad = [name.encode("utf-8", "backslashreplace").decode() for name in files if not _is_text(name)]
    if bad:
        raise ValidationError(f"{len(bad)} file name(s) are not valid UTF-8; nothing was written",
                              problems=bad[:20], hint="rename them (e.g. with `convmv`), then put again")


def _is_text(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


MAX_FILE_BYTES = 1 << 31


@artifact.command("get")
@click.option("--id", "artifact_id", required=True)
@click.option("--version", type=int)
@click.option("--output-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Write the files here. Without it, print the artifact's record as JSON.")
def get(artifact_id, version, output_dir):
    """An artifact's record, or its files written to --output-dir."""
    from agentenv_local.artifacts import read_files

    with session() as s:
        doc = s.store.documents.get("artifacts", artifact_id, version)
        if output_dir is None:
            echo_json(doc)
            return
        files = read_files(s.store, doc)
    root = write_files_out(files, output_dir)
    click.echo(f"Wrote {file_count(len(files))} of {artifact_id} v{doc['version']} to {root}.")


def write_files_out(files: dict[str, bytes], output_dir: Path) -> Path:
    """Write an artifact's files under output_dir (refusing any path that climbs out); returns the folder."""
    root = output_dir.resolve()
    for rel, data in files.items():
        target = (root / rel).resolve()
        if root not in target.parents:
            raise click.ClickException(f"refusing to write {rel!r} outside {root}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return root


@artifact.command("list")
@click.option("--type", "artifact_type", help="Only this artifact type.")
@click.option("--limit", type=click.IntRange(1, 100_000), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True)
def list_artifacts(artifact_type, limit, as_json):
    """Artifacts (latest versions), newest first."""
    from agentenv_local.query import Query

    q = Query("artifacts").sort("created_at", desc=True).limit(limit)
    if artifact_type:
        q.where("type", "eq", artifact_type)
    with session() as s:
        docs = s.store.documents.query(q)
    rows = []
    for d in docs:  # a body of the wrong shape (written by hand or an older version) shows, never crashes
        body = d["body"] if isinstance(d.get("body"), dict) else {}
        files = body.get("files")
        rows.append({"id": d["id"], "version": d["version"], "type": body.get("type") or "invalid",
                     "files": len(files) if isinstance(files, dict) else None, "created_at": d["created_at"]})
    if as_json:
        echo_json(rows)
        return
    table([[r["id"], f"v{r['version']}", str(r["type"]), "-" if r["files"] is None else str(r["files"]),
            ago(r["created_at"])] for r in rows],
          ["ARTIFACT", "VERSION", "TYPE", "FILES", "CREATED"])


def _add_typed_groups() -> None:
    """The reference's per-type groups (artifact cli|environment|environment-universe|skill ...)."""
    from .artifact_typed import cli_group, environment_group, skill_group, universe_group

    for group in (cli_group, environment_group, universe_group, skill_group):
        artifact.add_command(group)


_add_typed_groups()
