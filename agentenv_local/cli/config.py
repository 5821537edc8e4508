"""`agentenv config show|explain|sources|debug`: the resolved configuration, where each value came from, its layers.

Read-only: builds no store and starts no hub. Secrets print as `***`.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click


def _fail(exc) -> None:
    click.echo(exc.render(), err=True)
    sys.exit(exc.exit_code)


def _load():
    from agentenv_local.config import load_config

    return load_config()


def _fmt(value: Any) -> str:
    if value is None:
        return "(unset)"
    if value == "***":  # masked: print bare
        return "***"
    return json.dumps(value, ensure_ascii=False, default=str)


def _dump(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


@click.group("config")
def config() -> None:
    """Show the resolved configuration, where each value came from, and the layers it is built from.

    Layers, lowest first: built-in default < .agentenv/config.toml (or $AGENTENV_CONFIG) <
    AGENTENV_* environment variables < values set in code. See docs/configuration.md.
    """


@config.command("show")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def show(as_json: bool) -> None:
    """Every key with its resolved value and where it came from."""
    from agentenv_local.config import NO_FILE
    from agentenv_local.errors import AgentenvError

    try:
        data = _load().show()
    except AgentenvError as exc:
        _fail(exc)
        return
    if as_json:
        _dump(data)
        return
    click.echo(f"config file: {data['file'] or NO_FILE}")
    click.echo(f"state dir:   {data['state_dir']}")
    click.echo("")
    width = max((len(k) for k in data["keys"]), default=0)
    for key, row in data["keys"].items():
        extra = f"  [{row['ref']}]" if row.get("ref") else ""
        value = "(error)" if "error" in row else _fmt(row["value"])
        click.echo(f"{key.ljust(width)} = {value}  ({row['source']}){extra}")
    if data["warnings"]:
        click.echo("")
        click.echo("Warnings:")
        for w in data["warnings"]:
            click.echo(f"  - {w}")


@config.command("explain")
@click.argument("path")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def explain(path: str, as_json: bool) -> None:
    """Where one key's value came from, and what it shadows (PATH like runner.concurrency)."""
    from agentenv_local.errors import AgentenvError

    try:
        data = _load().explain(path)
    except AgentenvError as exc:
        _fail(exc)
        return
    if as_json:
        _dump(data)
        return
    _print_explain(data)


def _print_explain(data: dict, indent: str = "") -> None:
    if "children" in data:
        click.echo(f"{indent}[{data['path'] or '(all)'}]  ({data['source']})")
        if data.get("description"):
            click.echo(f"{indent}  {data['description']}")
        for child in data["children"]:
            _print_explain(child, indent + "  ")
        if not data["children"]:
            click.echo(f"{indent}  (empty)")
        return
    click.echo(f"{indent}{data['path']} = {'(error)' if 'error' in data else _fmt(data['value'])}")
    click.echo(f"{indent}  source:   {data['source']}")
    if data.get("ref"):
        click.echo(f"{indent}  ref:      {data['ref']}")
    if data.get("error"):
        click.echo(f"{indent}  error:    {data['error']}")
    if data.get("type"):
        click.echo(f"{indent}  type:     {data['type']} (default {_fmt(data.get('default'))})")
    if data.get("env_var"):
        click.echo(f"{indent}  env var:  {data['env_var']}")
    if data.get("description"):
        click.echo(f"{indent}  meaning:  {data['description']}")
    if data["shadowed"]:
        click.echo(f"{indent}  shadowed:")
        for s in data["shadowed"]:
            click.echo(f"{indent}    {_fmt(s['value'])}  ({s['source']})")


@config.command("sources")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the list is in precedence order).")
def sources_command(as_json: bool) -> None:
    """Every layer the configuration is built from, lowest precedence first, found or not.

    A line starting with -> is a layer that is there; [keys] are what it sets. A bad file is shown as
    unreadable, not raised: this is the command for "the file I edited is not being read".
    """
    from agentenv_local.config.sources import sources

    layers = sources()
    if as_json:
        _dump({"sources": layers})
        return
    for layer in layers:
        mark = "->" if layer["present"] else "  "
        keys = layer["shadows"]
        shown = f" -> [{', '.join(keys[:6])}{', ...' if len(keys) > 6 else ''}]" if keys else ""
        detail = f"  ({layer['detail']})" if layer["detail"] else ""
        click.echo(f"{mark} {layer['kind']:<8} {layer['where']}{shown}{detail}")


@config.command("debug")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def debug(as_json: bool) -> None:
    """Every place looked at for the state dir and config file, then every key's value and where it came from.

    Secrets print as ***; a key whose reference cannot be resolved shows the error instead of failing.
    """
    from agentenv_local.config.sources import search_path
    from agentenv_local.errors import AgentenvError

    places = search_path()
    try:
        resolved: dict | None = _load().show()
        error = None
    except AgentenvError as exc:
        resolved, error = None, exc.message + (f" ({exc.hint})" if exc.hint else "")
    if as_json:
        _dump({"search_path": places, "config": resolved, "error": error})
        return
    for place in places:
        mark = "->" if place["used"] else "  "
        click.echo(f"{mark} {place['path']}  ({place['why']}, exists: {'yes' if place['exists'] else 'no'})")
    click.echo("")
    if resolved is None:
        click.echo(f"the config cannot be loaded: {error}")
        sys.exit(1)
    width = max((len(k) for k in resolved["keys"]), default=0)
    for key, row in resolved["keys"].items():
        extra = f"  [{row['ref']}]" if row.get("ref") else ""
        value = "(error)" if "error" in row else _fmt(row["value"])
        click.echo(f"{key.ljust(width)} = {value}  ({row['source']}){extra}")
    for w in resolved["warnings"]:
        click.echo(f"warning: {w}")
