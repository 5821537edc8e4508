"""`agentenv image`: the local image store on Podman (build, import, list)."""

from __future__ import annotations

from pathlib import Path

import click

from ._common import echo_json, table
from .sandbox import provider_named


@click.group("image")
def image_group():
    """Build, import and list images in Podman's local storage (no registry needed)."""


@image_group.command("build")
@click.argument("name")
@click.argument("context", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--version", "version", default="latest", show_default=True, help="The tag.")
@click.option("-f", "--file", "containerfile", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The Containerfile (default: CONTEXT/Containerfile or CONTEXT/Dockerfile).")
@click.option("--build-arg", "build_args", multiple=True, metavar="KEY=VALUE", help="A build argument (repeatable).")
@click.option("--quiet", is_flag=True, help="Do not show the build's output.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def build(name, context, version, containerfile, build_args, quiet, as_json):
    """Build CONTEXT as localhost/agentenv/NAME:VERSION; an unchanged context is not rebuilt.

    `FROM` must name a local image: use the build argument BASE, set to the base image, e.g.
    `FROM ${BASE}` (it is passed for you).
    """
    args = {}
    for item in build_args:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--build-arg")
        args[key] = value
    progress = None if (quiet or as_json) else (lambda line: click.echo(f"  {line}", err=True))
    result = provider_named("podman").build_image(name, version, context, containerfile=containerfile,
                                                  build_args=args, on_line=progress)
    if as_json:
        echo_json(result)
    elif result["built"]:
        click.echo(f"built {result['ref']} ({result['image_id'][:12]})")
    else:
        click.echo(f"{result['ref']} is up to date (same sources; not rebuilt)")


@image_group.command("import")
@click.argument("name")
@click.argument("tarball", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--version", "version", default="latest", show_default=True, help="The tag.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def import_(name, tarball, version, as_json):
    """Import a rootfs TARBALL as localhost/agentenv/NAME:VERSION."""
    result = provider_named("podman").import_image(name, version, tarball)
    if as_json:
        echo_json(result)
    else:
        click.echo(("imported " if result["built"] else "already imported: ") + result["ref"])


@image_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_images(as_json):
    """Images agentenv built or imported."""
    rows = provider_named("podman").list_images()
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo("No images yet. Build one with: agentenv image build NAME PATH")
        return
    table([[r["name"] or "", r["version"] or "", (r["image_id"] or "")[:12], (r["source_digest"] or "")[:12],
            f"{(r['size'] or 0) / 1e6:.0f} MB"] for r in rows], ["NAME", "VERSION", "IMAGE", "SOURCE", "SIZE"])
