"""`agentenv env`: store environment records and read them back. (Deploying them, with the
gateway, comes next: `env deploy|instances|teardown`.)"""

from __future__ import annotations

from pathlib import Path

import click

from ._common import ago, echo_json, session, table


@click.group("env")
def env_group():
    """Put, get and list environments (MCP servers and multi envs)."""


@env_group.command("put")
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--id", "env_id", required=True, help="The env's id in the store.")
def put(folder, env_id):
    """Store FOLDER (its env.toml and files) as the next version of --id."""
    from agentenv_local.artifacts import read_folder
    from agentenv_local.environments import MultiEnv, load_env_folder
    from agentenv_local.environments.store import env_body
    from agentenv_local.errors import ValidationError

    env, _raw, _declared = load_env_folder(folder.resolve())
    with session() as s:
        if isinstance(env, MultiEnv):
            missing = [r.env for r in env.refs() if s.store.documents.find("envs", r.env, r.version) is None]
            if missing:
                raise ValidationError(f"{folder}/env.toml: mcp_server_envs: not in the store: {', '.join(missing)}",
                                      hint="put each server env first with `agentenv env put FOLDER --id ID`")
        files = {} if isinstance(env, MultiEnv) or env.url or env.image else read_folder(folder)
        body = env_body(s.store, env_id, env, files, default_name=folder.resolve().name)
        doc = s.store.documents.put("envs", env_id, body)
    click.echo(f"Created {body['type']} env {env_id} v{doc['version']}.")


@env_group.command("get")
@click.option("--id", "env_id", required=True)
@click.option("--version", type=int, help="A version (default: the latest).")
def get(env_id, version):
    """Print a stored env record as JSON."""
    with session() as s:
        echo_json(s.store.documents.get("envs", env_id, version))


@env_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_envs(as_json):
    """Every stored env (latest versions), newest first."""
    from agentenv_local.query import Query

    with session() as s:
        docs = s.store.documents.query(Query("envs").sort("created_at", desc=True))
    rows = [{"id": d["id"], "version": d["version"], "type": d["body"].get("type"),
             "name": d["body"].get("environment_name") or d["body"].get("name"), "created_at": d["created_at"]}
            for d in docs]
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo("No envs yet. Store one with `agentenv env put FOLDER --id ID`, or run a bundle with envs/.")
        return
    table([[r["id"], f"v{r['version']}", r["type"], r["name"] or "-", ago(r["created_at"])] for r in rows],
          ["ENV", "VERSION", "TYPE", "NAME", "CREATED"])
