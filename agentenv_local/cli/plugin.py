"""`agentenv plugin`: what every installed distribution contributes, whether it works; adding and removing them.

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
    """List, show and check installed plugins; add and remove them with pip."""


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
@click.option("--json", "as_json", is_flag=True, help="Print JSON: ok, counts and each problem (format_version 1).")
@click.pass_context
def check(ctx: click.Context, as_json: bool) -> None:
    """Load every contribution; exit 0 when all are active, else list the problems and exit 1."""
    contributions = _inventory(load=True)
    if as_json:
        report = _check_report(contributions)
        echo_json(report)
        ctx.exit(0 if report["ok"] else 1)
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


def _contribution_rows(contributions: list[Contribution]) -> list[list[str]]:
    return [[c.group, c.name, c.value, c.status, c.reason or ""] for c in contributions]


@plugin.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (format_version 1).")
@click.option("--no-load", is_flag=True, help="Only discover; do not import anything (status stays 'unloaded').")
def show(name: str, as_json: bool, no_load: bool) -> None:
    """What one installed distribution NAME contributes, per group, and whether each loads."""
    from agentenv_local.errors import ValidationError

    from ._pip import installed, normalized

    dist = installed(name)
    if dist is None:
        known = sorted({c.distribution for c in _inventory(load=False)})
        raise ValidationError(f"no installed distribution named {name!r}",
                              hint=f"installed plugins: {', '.join(known)}; install one with "
                                   "`agentenv plugin add SPEC`")
    dist_name = dist.metadata["Name"] or name
    mine = [c for c in _inventory(load=not no_load) if normalized(c.distribution) == normalized(dist_name)]
    groups: dict[str, list[dict]] = {}
    for c in mine:
        groups.setdefault(c.group, []).append({"name": c.name, "value": c.value, "status": c.status,
                                               "reason": c.reason})
    if as_json:
        echo_json({"format_version": FORMAT_VERSION, "name": dist_name, "version": dist.version,
                   "builtin": any(c.builtin for c in mine), "groups": groups})
        return
    click.echo(f"{dist_name} {dist.version}" + (" (built-in)" if any(c.builtin for c in mine) else ""))
    if not mine:
        click.echo("It contributes nothing to agentenv (no entry points in the agentenv_local.* groups).")
        return
    problems = [c for c in mine if c.status not in ("active", "unloaded")]
    click.echo(f"{len(mine)} contribution(s) in {len(groups)} group(s)"
               + (f", {len(problems)} not loading" if problems else "") + ":")
    click.echo("")
    table(_contribution_rows(mine), ["GROUP", "NAME", "VALUE", "STATUS", "REASON"])


def _check_report(contributions: list[Contribution]) -> dict:
    problems = [c for c in contributions if c.status != "active"]
    return {"format_version": FORMAT_VERSION, "ok": not problems,
            "distributions": len({c.distribution for c in contributions}), "contributions": len(contributions),
            "problems": [c.to_dict() for c in problems]}


def _fresh_contributions(names: set[str]) -> list[Contribution]:
    """The contributions of the distributions `names`, discovered anew (what pip just installed) and loaded."""
    from agentenv_local.plugins import GROUPS, PluginRegistry

    from ._pip import normalized

    reg = PluginRegistry()  # not the process's cached one: it was discovered before the install
    out: list[Contribution] = []
    for group in GROUPS:
        out += [c for c in reg.load_all(group).values() if normalized(c.distribution) in names]
    return out


def _confirm(question: str, done: str) -> None:
    """Ask on a terminal; with none to ask on, refuse (a script says --yes)."""
    if not sys.stdin.isatty():
        from agentenv_local.errors import ValidationError

        raise ValidationError(f"not asking: stdin is not a terminal; nothing was {done}",
                              hint="pass --yes to go ahead without asking, or --dry-run to only look")
    click.confirm(question, abort=True)


@plugin.command("add")
@click.argument("specs", nargs=-1, required=True)
@click.option("--index-url", help="The index pip resolves from, passed through to it.")
@click.option("--dry-run", is_flag=True, help="Show what would be installed, and change nothing.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask before installing.")
@click.pass_context
def add(ctx: click.Context, specs: tuple[str, ...], index_url: str | None, dry_run: bool, yes: bool) -> None:
    """Install plugin packages with the pip of agentenv's own interpreter, then load what they contribute.

    SPECS are what pip accepts: names with versions, local folders, wheels, URLs. What would be installed
    is shown first (pip's own dry run); exit 1 if a contribution of an installed package does not load.
    """
    from ._pip import installed, normalized, planned_installs, run

    planned = planned_installs(list(specs), index_url)
    click.echo(f"pip of {sys.executable} would install:" if planned else
               "Nothing to install: every requirement is already satisfied.")
    for name, version in planned:
        now = installed(name)
        click.echo(f"  {name} {version}" + (f" (replacing {now.version})" if now is not None else " (new)"))
    if not planned:
        return
    if dry_run:
        click.echo("Dry run: nothing was installed.")
        return
    if not yes:
        _confirm("Install?", "installed")
    extra = ["--index-url", index_url] if index_url else []
    result = run(["install", *extra, *specs])
    if not result.ok:
        from agentenv_local.errors import ValidationError

        tail = "\n".join(result.output.splitlines()[-8:])
        raise ValidationError(f"pip install failed:\n{tail}", hint="see pip's message above")
    contributions = _fresh_contributions({normalized(name) for name, _ in planned})
    click.echo(f"Installed {', '.join(f'{n} {v}' for n, v in planned)}.")
    if not contributions:
        click.echo("They contribute nothing to agentenv (no entry points in the agentenv_local.* groups).")
        return
    table(_contribution_rows(contributions), ["GROUP", "NAME", "VALUE", "STATUS", "REASON"])
    problems = [c for c in contributions if c.status != "active"]
    if problems:
        click.echo(f"{len(problems)} contribution(s) do not load; fix the package, or remove it with "
                   f"`agentenv plugin remove {problems[0].distribution}`.")
        ctx.exit(1)


@plugin.command("remove")
@click.argument("packages", nargs=-1, required=True)
@click.option("--dry-run", is_flag=True, help="Show what would be removed, and change nothing.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask before removing.")
@click.option("--force", is_flag=True, help="Remove even when another installed package requires it.")
def remove(packages: tuple[str, ...], dry_run: bool, yes: bool, force: bool) -> None:
    """Uninstall plugin PACKAGES with the pip of agentenv's own interpreter (never agentenv-local itself).

    What each package contributes is shown first. Refused, unless --force, while another installed package
    requires one of them.
    """
    from agentenv_local.errors import ValidationError
    from agentenv_local.plugins import CORE_DISTRIBUTION

    from ._pip import dependents, installed, normalized, run

    problems, found = [], []
    for name in packages:
        if normalized(name) == normalized(CORE_DISTRIBUTION):
            problems.append(f"{name}: that is agentenv itself (remove it with pip uninstall {CORE_DISTRIBUTION} "
                            "if you mean to)")
            continue
        dist = installed(name)
        if dist is None:
            problems.append(f"{name}: not installed")
            continue
        found.append((dist.metadata["Name"] or name, dist.version))
    leaving = {normalized(n) for n, _ in found}
    needed = {n: dependents(n, leaving) for n, _ in found}
    if not force:
        problems += [f"{n}: required by {', '.join(who)} (remove those too, or pass --force)"
                     for n, who in needed.items() if who]
    if problems:
        raise ValidationError(f"{len(problems)} package(s) cannot be removed; nothing was removed",
                              problems=problems, hint="`agentenv plugin list` shows what is installed")
    contributions = [c for c in _inventory(load=False) if normalized(c.distribution) in leaving]
    click.echo(f"pip of {sys.executable} would uninstall:")
    for n, version in found:
        mine = [c for c in contributions if normalized(c.distribution) == normalized(n)]
        click.echo(f"  {n} {version}: " + (", ".join(f"{c.group} {c.name}" for c in mine) or "no contributions"))
    if dry_run:
        click.echo("Dry run: nothing was removed.")
        return
    if not yes:
        _confirm("Uninstall?", "removed")
    result = run(["uninstall", "--yes", *(n for n, _ in found)])
    if not result.ok:
        tail = "\n".join(result.output.splitlines()[-8:])
        raise ValidationError(f"pip uninstall failed:\n{tail}", hint="see pip's message above")
    click.echo(f"Removed {', '.join(f'{n} {v}' for n, v in found)}.")
