"""`agentenv artifact cli|environment|environment-universe`: the reference's typed artifact commands."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ._common import file_count, session, valid_id


def _parse_ref(text: str) -> dict:
    """`ID` (latest) or `ID:VERSION` -> {id, version}; an id may itself hold ':' only before a non-number."""
    base, sep, tail = text.rpartition(":")
    if sep and tail.isdigit() and base:
        return {"id": base, "version": int(tail)}
    return {"id": text, "version": None}


def _typed(s, artifact_id: str, version: int | None, want: str) -> dict:
    from agentenv_local.artifacts import canonical_type
    from agentenv_local.errors import ValidationError

    doc = s.store.documents.get("artifacts", artifact_id, version)
    kind = canonical_type(doc["body"].get("type"))
    if kind != want:
        raise ValidationError(f"artifact {artifact_id!r} v{doc['version']} is a {kind!r} artifact, not {want!r}",
                              hint=f"`agentenv artifact get --id {artifact_id}` reads any artifact")
    return doc


def _write_typed(artifact_id: str, version: int | None, want: str, output_dir: Path
                 ) -> tuple[dict, dict[str, bytes], Path]:
    """What every typed `get` does: read a `want` artifact's files and write them to output_dir."""
    from agentenv_local.artifacts import read_files

    from .artifact import write_files_out

    with session() as s:
        doc = _typed(s, artifact_id, version, want)
        files = read_files(s.store, doc)
    return doc, files, write_files_out(files, output_dir)


def _get_options(output_help: str | None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The options every typed `get` takes: --id, --version (latest when absent) and --output-dir."""
    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        command = click.option("--output-dir", required=True, type=click.Path(file_okay=False, path_type=Path),
                               help=output_help)(command)
        command = click.option("--version", type=click.IntRange(min=1))(command)
        return click.option("--id", "artifact_id", required=True)(command)
    return decorate


# --- cli ----------------------------------------------------------------------------------------------------

@click.group("cli")
def cli_group():
    """Command-line tools as artifacts (a folder, its entrypoint, the command name on PATH)."""


@cli_group.command("put")
@click.option("--id", "artifact_id", required=True, callback=valid_id, help="The cli artifact id.")
@click.option("--cli-dir", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="The folder holding the CLI's tree.")
@click.option("--entrypoint", required=True, help="The executable's path inside --cli-dir (e.g. bin/slack).")
@click.option("--command-name", required=True, help="The command it is installed as on PATH (e.g. slack).")
@click.option("--env-id", help="The env this CLI was generated from, if any.")
@click.option("--env-version", type=click.IntRange(min=1), help="That env's version.")
@click.option("--description", default="")
def cli_put(artifact_id, cli_dir, entrypoint, command_name, env_id, env_version, description):
    """Store --cli-dir as the next version of a cli artifact (its files as the bundle <id>__files)."""
    from agentenv_local.artifacts import read_folder
    from agentenv_local.typed_artifacts import put_cli

    files = read_folder(cli_dir)
    with session() as s:
        doc = put_cli(s.store, artifact_id, files, entrypoint=entrypoint, command_name=command_name,
                      env_id=env_id, env_version=env_version, description=description)
    body = doc["body"]
    click.echo(f"Created cli {artifact_id} v{doc['version']}: command_name={body['command_name']} "
               f"entrypoint={body['entrypoint']} ({file_count(len(files))} in "
               f"{body['cli_files_id']} v{body['cli_files_version']})")


@cli_group.command("get")
@_get_options("Write the CLI's tree here.")
def cli_get(artifact_id, version, output_dir):
    """Write a cli artifact's files to --output-dir (the entrypoint keeps its executable bit)."""
    doc, files, root = _write_typed(artifact_id, version, "cli", output_dir)
    entry = root / doc["body"]["entrypoint"]
    entry.chmod(entry.stat().st_mode | 0o111)
    click.echo(f"Wrote {file_count(len(files))} of cli {artifact_id} v{doc['version']} "
               f"to {root}.")
    click.echo(f"Entrypoint: {entry} (command {doc['body']['command_name']})")


# --- environment --------------------------------------------------------------------------------------------

@click.group("environment")
def environment_group():
    """Data files for one env server (environment artifacts)."""


@environment_group.command("put")
@click.argument("filepath", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--id", "artifact_id", required=True, callback=valid_id, help="The environment artifact id.")
@click.option("--description", required=True)
@click.option("--environment-name", "--service-name", "environment_name", required=True,
              help="The env server (child) the file seeds, e.g. crm.")
def environment_put(filepath, artifact_id, description, environment_name):
    """Store FILEPATH as the file <id>__file and an environment artifact pinning it."""
    from agentenv_local.typed_artifacts import check_environment_name, put_environment

    from .artifact import _read_one

    check_environment_name(environment_name, "--environment-name")
    data = _read_one(filepath)
    with session() as s:
        doc = put_environment(s.store, artifact_id, filepath.name, data, environment_name=environment_name,
                              description=description)
    ref = doc["body"]["file_artifact_ref"]
    click.echo(f"Created environment {artifact_id} v{doc['version']}: environment_name={environment_name}")
    click.echo(f"  pinned file: {ref['id']}:{ref['version']}")


@environment_group.command("get")
@_get_options(None)
def environment_get(artifact_id, version, output_dir):
    """Write an environment artifact's file to --output-dir."""
    doc, files, root = _write_typed(artifact_id, version, "environment", output_dir)
    click.echo(f"Wrote {', '.join(sorted(files))} of environment {artifact_id} v{doc['version']} "
               f"({doc['body']['environment_name']}) to {root}.")


# --- environment-universe -----------------------------------------------------------------------------------

@click.group("environment-universe")
def universe_group():
    """Sets of environment artifacts (what snapshot_env stores)."""


@universe_group.command("put")
@click.option("--id", "artifact_id", required=True, callback=valid_id, help="The universe id.")
@click.option("--environment-artifact", "environment_artifacts", multiple=True, required=True,
              help="An environment artifact, ID or ID:VERSION (repeatable; no version: its latest, pinned).")
@click.option("--metadata", "metadata_entries", multiple=True, metavar="KEY=PATH",
              help="A metadata file (repeatable), stored as <id>__metadata__<KEY>.")
@click.option("--description", default="")
def universe_put(artifact_id, environment_artifacts, metadata_entries, description):
    """Store a universe pinning existing environment artifacts."""
    from .artifact import _read_one

    metadata: dict[str, tuple[str, bytes]] = {}
    for entry in metadata_entries:
        key, sep, path = entry.partition("=")
        if not sep or not key or not path:
            raise click.BadParameter(f"{entry!r} is not KEY=/path/to/file", param_hint="--metadata")
        if key in metadata:
            raise click.BadParameter(f"key {key!r} is given twice", param_hint="--metadata")
        file = Path(path)
        if not file.is_file():
            raise click.BadParameter(f"{path}: no such file", param_hint="--metadata")
        metadata[key] = (file.name, _read_one(file))
    from agentenv_local.typed_artifacts import put_environment_universe

    with session() as s:
        doc = put_environment_universe(s.store, artifact_id, [_parse_ref(r) for r in environment_artifacts],
                                       metadata=metadata, description=description)
    refs = [f"{r['id']}:{r['version']}" for r in doc["body"]["environment_artifact_refs"]]
    click.echo(f"Created environment_universe {artifact_id} v{doc['version']}: environment_artifacts={refs}"
               + (f" metadata={sorted(metadata)}" if metadata else ""))


@universe_group.command("get")
@_get_options("Each environment's file goes to <environment_name>/, metadata to metadata/<key>/.")
def universe_get(artifact_id, version, output_dir):
    """Write a universe's files to --output-dir."""
    doc, files, root = _write_typed(artifact_id, version, "environment_universe", output_dir)
    click.echo(f"Wrote {file_count(len(files))} of environment_universe {artifact_id} "
               f"v{doc['version']} to {root}.")


# --- skill --------------------------------------------------------------------------------------------------

@click.group("skill")
def skill_group():
    """Agent Skills folders (SKILL.md and every other file of the folder) as skill artifacts."""


@skill_group.command("put")
@click.option("--id", "artifact_id", required=True, callback=valid_id,
              help="The skill id; its last segment must be SKILL.md's name.")
@click.option("--skill-dir", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="The skill's folder: SKILL.md at its root, and any other files (scripts, references).")
def skill_put(artifact_id, skill_dir):
    """Store --skill-dir as the next version of a skill (its files as the bundle <id>__files)."""
    from agentenv_local.artifacts import read_folder
    from agentenv_local.skills import put_skill

    files = read_folder(skill_dir)
    with session() as s:
        doc = put_skill(s.store, artifact_id, files)
    body = doc["body"]
    click.echo(f"Created skill {artifact_id} v{doc['version']}: name={body['skill_name']} ({file_count(len(files))} in"
               f" {body['skill_files_id']} v{body['skill_files_version']})")
    click.echo(f"  description: {body['description']}")


@skill_group.command("get")
@_get_options("Write the skill's folder here.")
def skill_get(artifact_id, version, output_dir):
    """Write a skill's files (SKILL.md and the rest of its folder) to --output-dir."""
    doc, files, root = _write_typed(artifact_id, version, "skill", output_dir)
    click.echo(f"Wrote {file_count(len(files))} of skill {artifact_id} v{doc['version']} "
               f"({doc['body']['skill_name']}) to {root}.")
