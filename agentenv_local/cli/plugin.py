"""`agentenv plugin`: what every installed distribution contributes, and whether it works.

Built-ins are listed like any plugin (they register through the same entry-point groups) and
marked as built-in. Listing loads each contribution, so a broken one shows why it is skipped.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from ._common import echo_json, table

if TYPE_CHECKING:
    from agentenv_local.plugins import Contribution

FORMAT_VERSION = 1


@click.group()
def plugin():
    """List installed plugins and what they contribute."""


def _inventory(load: bool = True) -> list[Contribution]:
    from agentenv_local.plugins import GROUPS, registry

    reg = registry()
    contributions: list[Contribution] = []
    for group in GROUPS:
        found = reg.load_all(group) if load else reg.contributions(group)
        contributions += found.values()
    order = {g: i for i, g in enumerate(GROUPS)}
    # Built-ins first, then distributions by name; within one, by group then name.
    contributions.sort(key=lambda c: (not c.builtin, c.distribution.lower(), order.get(c.group, 99), c.name))
    return contributions


def _environment() -> dict:
    from agentenv_local import __version__

    return {"version": __version__, "python": sys.prefix}


def _by_distribution(contributions) -> list[dict]:
    plugins: dict[str, dict] = {}
    for c in contributions:
        entry = plugins.setdefault(c.distribution, {"name": c.distribution, "version": c.version, "contributions": []})
        entry["contributions"].append({"group": c.group, "name": c.name, "value": c.value, "status": c.status,
                                       "reason": c.reason, "builtin": c.builtin})
    return list(plugins.values())


@plugin.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (format_version 1).")
@click.option("--no-load", is_flag=True, help="Only discover; do not import anything (status stays 'unloaded').")
def list_plugins(as_json: bool, no_load: bool) -> None:
    """Every contribution of every installed distribution, built-ins included, with its status."""
    contributions = _inventory(load=not no_load)
    env = _environment()
    if as_json:
        echo_json({"format_version": FORMAT_VERSION, "agentenv": env, "plugins": _by_distribution(contributions)})
        return
    click.echo(f"agentenv {env['version']} · python at {env['python']}")
    if not contributions:
        click.echo("No contributions found: is agentenv-local installed (pip install -e .)?")
        return
    click.echo("")
    table([[c.distribution + (" (built-in)" if c.builtin else ""), c.version, c.group, c.name, c.status,
            c.reason or ""] for c in contributions],
          ["DISTRIBUTION", "VERSION", "GROUP", "NAME", "STATUS", "REASON"])


@plugin.command("check")
@click.pass_context
def check(ctx: click.Context) -> None:
    """Load every contribution; exit 0 when all are active, else list the problems and exit 1."""
    contributions = _inventory(load=True)
    distributions = {c.distribution for c in contributions}
    problems = [c for c in contributions if c.status != "active"]
    if not problems:
        click.echo(f"ok: {len(distributions)} distribution(s), {len(contributions)} contribution(s), all active")
        return
    for c in problems:
        who = f"{c.distribution} {c.version}" + (" (built-in)" if c.builtin else "")
        click.echo(f"{c.status}: {c.group} {c.name!r} from {who} ({c.value}): {c.reason or 'no reason recorded'}")
    plural = "s" if len(problems) != 1 else ""
    click.echo(f"{len(problems)} problem{plural} in {len(contributions)} contribution(s) from "
               f"{len(distributions)} distribution(s).")
    click.echo("Hint: fix or uninstall the distributions named above (pip uninstall <distribution>); "
               "`agentenv plugin list` shows everything.")
    ctx.exit(1)
