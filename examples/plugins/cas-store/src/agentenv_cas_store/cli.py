"""`agentenv cas info|gc`: look after the CAS root (an `agentenv_local.cli` entry of this plugin)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from .blobs import CasRoot
from .store import open_root


def _root(root: str | None) -> CasRoot:
    """--root, else the root the current project's `[plugins.agentenv-cas-store]` names (or the default)."""
    from agentenv_local.config import load_config
    from agentenv_local.config.object_stores import plugin_settings

    config = load_config()
    settings = plugin_settings(config, "agentenv-cas-store")
    if root is not None:
        settings["root"] = root
    project_dir = config.state_dir.parent
    return open_root(settings, Path(project_dir))


@click.group("cas")
def cas_group() -> None:
    """The shared content-addressed object store: what its root holds, and freeing what no project uses.

    The root is --root, else `root` in [plugins.agentenv-cas-store] of the current project's config, else
    ~/.cache/agentenv-cas.
    """


@cas_group.command("info")
@click.option("--root", default=None, help="The CAS root (default: the current project's).")
@click.option("--json", "as_json", is_flag=True)
def info(root: str | None, as_json: bool) -> None:
    """How many blobs and bytes the root holds, and for how many projects."""
    stats = _root(root).stats()
    if as_json:
        click.echo(json.dumps(stats, indent=2))
        return
    click.echo(f"{stats['root']}: {stats['blobs']} blob(s), {stats['bytes_on_disk']} bytes on disk, "
               f"{stats['projects']} project(s); new blobs are {stats['codec']}-compressed")


@cas_group.command("gc")
@click.option("--root", default=None, help="The CAS root (default: the current project's).")
@click.option("--dry-run", is_flag=True, help="Count what would be removed; remove nothing.")
@click.option("--json", "as_json", is_flag=True)
def gc(root: str | None, dry_run: bool, as_json: bool) -> None:
    """Remove the blobs no registered project references (projects whose .agentenv is gone are forgotten).

    Safe while projects put objects: puts wait for it, and it for them.
    """
    report = _root(root).gc(dry_run=dry_run)
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    verb = "would remove" if dry_run else "removed"
    click.echo(f"{report['blobs']} blob(s) for {report['projects']} project(s): {verb} {report['removed']} "
               f"unreferenced blob(s) ({report['removed_bytes']} bytes); {report['projects_gone']} project(s) "
               "gone")
