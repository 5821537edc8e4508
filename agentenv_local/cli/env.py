"""`agentenv env`: store environment records, deploy them behind a gateway in the hub, list and
tear down instances, and serve one from source with hot reload (`env dev`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from agentenv_local.hub.methods import HubMethods

from ._common import ago, echo_json, serve_until_stopped, session, table


@click.group("env")
def env_group():
    """Put, get and list environments (MCP servers and multi envs)."""


@env_group.command("put")
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--id", "env_id", required=True, help="The env's id in the store.")
def put(folder, env_id):
    """Store FOLDER (its env.toml and files) as the next version of --id."""
    with session() as s:
        doc = put_env_folder(s, folder, env_id)
    click.echo(f"Created {doc['body']['type']} env {env_id} v{doc['version']}.")


def put_env_folder(s: Any, folder: Path, env_id: str) -> dict:
    """Store an env folder (its env.toml and files) as the next version of `env_id`; returns the stored doc.
    A multi env's server envs must be in the store already."""
    from agentenv_local.artifacts import read_folder
    from agentenv_local.errors import ValidationError
    from agentenv_local.hosting.envs import MultiEnv, load_env_folder
    from agentenv_local.hosting.envs.store import env_body

    env, _raw, _declared = load_env_folder(folder.resolve())
    if isinstance(env, MultiEnv):
        missing = [r.env for r in env.refs() if s.store.documents.find("envs", r.env, r.version) is None]
        if missing:
            raise ValidationError(f"{folder}/env.toml: mcp_server_envs: not in the store: {', '.join(missing)}",
                                  hint="put each server env first with `agentenv env put FOLDER --id ID`")
    files = {} if isinstance(env, MultiEnv) or env.url or env.image else read_folder(folder)
    body = env_body(s.store, env_id, env, files, default_name=folder.resolve().name)
    return s.store.documents.put("envs", env_id, body)


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


@env_group.command("dev")
@click.argument("target", metavar="PATH[:CLASS]")
@click.option("--port", type=int, default=None,
              help="Port to serve on (default: $MCP_PORT or 18765; 0 = any free port, printed).")
@click.option("--host", default=None, help="Address to bind (default: $MCP_HOST or 127.0.0.1).")
@click.option("--stdio", is_flag=True, help="Serve MCP over stdin/stdout instead of HTTP.")
@click.option("--sse", is_flag=True, help="Answer MCP POSTs with SSE streams instead of JSON.")
def dev(target, port, host, stdio, sse):
    """Serve the env in PATH from source and reload it on every save.

    Clients stay connected across reloads (MCP sessions get notifications/tools/list_changed); a file
    that fails to load prints its error and the last good version keeps serving. Ctrl-C stops.
    """
    from agentenv_local.env.dev import serve_dev_http, serve_dev_stdio
    from agentenv_local.env.serve import EnvLoadError
    from agentenv_local.errors import ValidationError

    try:
        if stdio:
            serve_dev_stdio(target)
        else:
            serve_dev_http(target, host=host, port=port, json_response=not sse,
                           announce=lambda line: click.echo(line, err=True))
    except KeyboardInterrupt:
        return
    except (EnvLoadError, ValueError, OSError) as e:
        raise ValidationError(f"agentenv env dev {target}: {e}") from None


# -- deployed instances -------------------------------------------------------------------
def _print_endpoints(record: dict) -> None:
    click.echo(f"Deployed {record['env_id']} v{record['env_version']} as {record['instance_id']}.")
    click.echo(f"  gateway: {record['gateway_url']}")
    click.echo(f"  MCP:     {record['mcp_url']}")
    for child in record.get("children") or []:
        where = child.get("url") or "in the hub"
        pid = f", pid {child['pid']}" if child.get("pid") else ""
        click.echo(f"  server {child['name']}: {child['kind']} ({where}{pid})")
    if record.get("expires_at_utc"):
        click.echo(f"  expires: {record['expires_at_utc']} (--ttl-seconds {record.get('ttl_seconds')})")
    click.echo("Add it to an MCP client as a streamable HTTP server, e.g. "
               f"`claude mcp add --transport http {record['mcp_server_name']} {record['mcp_url']}`.")


@env_group.command("deploy")
@click.option("--id", "env_id", default=None, help="The env to deploy (its id in the store).")
@click.option("--version", type=int, default=None, help="A version (default: the latest).")
@click.option("--gateway-mode", type=click.Choice(["performance", "consistent"]), default=None,
              help="consistent: one tool call at a time (default: the env's, else performance).")
@click.option("--resume", "resume", default=None, metavar="INSTANCE",
              help="Redeploy an instance a stopped hub left, with its saved RBAC rules, triggers and clock.")
@click.option("--keep-running", is_flag=True,
              help="Stay in the foreground until Ctrl-C even with a long-lived hub (then tear it down).")
@click.option("--no-control-plane-auth", "open_control_plane", is_flag=True,
              help="Serve the reference's open control plane: RBAC, clock, trigger and data-plane writes "
                   "without the admin token (for compatibility tests; anyone who reaches the port may use it).")
@click.option("--ttl-seconds", type=click.IntRange(60, 1_209_600), default=None,
              help="Tear the instance down this many seconds after it starts (60 to 1209600; default: no limit).")
@click.option("--json", "as_json", is_flag=True, help="Print the instance record as JSON (stdout holds only it).")
def deploy(env_id, version, gateway_mode, resume, keep_running, open_control_plane, ttl_seconds, as_json):
    """Deploy an env behind a gateway in the hub and print its URLs.

    With a long-lived hub (`agentenv up`) it returns at once and the instance runs until
    `agentenv env teardown INSTANCE`. Otherwise this command is the hub: it serves the env until
    Ctrl-C, then tears it down. The gateway's control plane needs the instance's admin token
    (`agentenv env instances INSTANCE --admin-token`).
    """

    from agentenv_local.errors import ValidationError

    if not env_id and not resume:
        raise ValidationError("give the env to deploy: --id ENV (or --resume INSTANCE)")
    with session() as s:
        record = HubMethods(s).deploy_env(env_id, version, gateway_mode=gateway_mode, resume=resume,
                                          control_plane_auth=False if open_control_plane else None,
                                          ttl_seconds=ttl_seconds)
        if as_json:
            echo_json(record)
        else:
            _print_endpoints(record)
        foreground = keep_running or (s.is_hub and not getattr(s.hub, "long_lived", False))
        if not foreground:
            # stdout: JSON only
            click.echo(f"Stop it with `agentenv env teardown {record['instance_id']}`.", err=as_json)
            return
        def teardown() -> None:
            try:
                HubMethods(s).teardown_env(record["instance_id"])
            except Exception as e:  # the hub's close tears it down anyway
                click.echo(f"teardown: {e}", err=True)
            click.echo(f"Tore down {record['instance_id']}.", err=True)

        serve_until_stopped(s, teardown)


@env_group.command("instances")
@click.argument("instance_id", metavar="[INSTANCE]", required=False)
@click.option("--all", "show_all", is_flag=True, help="Terminated instances too.")
@click.option("--admin-token", "admin_token", is_flag=True,
              help="Print INSTANCE's control-plane admin token (Authorization: Bearer TOKEN) and nothing else.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def instances(instance_id, show_all, admin_token, as_json):
    """Deployed env instances (running ones, unless --all), or INSTANCE's record.

    Idle env pool slots (`envp-...`: in-hub envs reset and kept for the next deploy) are listed as
    `pooled`; an instance running on one shows its slot.

    The admin token (needed for /tools/*, clock and trigger writes and the data plane) is shown only
    with --admin-token; give it to the task's own tools, never to an agent.
    """
    from agentenv_local.errors import NotFoundError, ValidationError

    if admin_token and not instance_id:
        raise ValidationError("--admin-token needs the instance: agentenv env instances INSTANCE --admin-token")
    with session() as s:
        rows = HubMethods(s).env_instances(status=None if show_all or instance_id else "running")
        rows += HubMethods(s).env_instances(status="pooled")  # the idle pool slots
        if instance_id:
            rows = [r for r in rows if r["instance_id"] == instance_id]
            if not rows:
                raise NotFoundError(f"no env instance {instance_id!r}",
                                    hint="list them with `agentenv env instances --all`")
            if admin_token:
                token = HubMethods(s).env_admin_token(instance_id)
                if token is None:
                    raise NotFoundError(f"env instance {instance_id} has no admin token",
                                        hint="it was deployed with control_plane_auth = false (an open "
                                             "control plane)")
                click.echo(token)
                return
            echo_json(rows[0])  # one instance: its whole record
            return
    rows.sort(key=lambda r: r.get("created_at_utc") or "", reverse=True)
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo("No env instances running. Deploy one with `agentenv env deploy --id ENV`.")
        return
    table([[r["instance_id"], f"{r['env_id']} v{r.get('env_version')}", _status(r), r.get("mcp_url") or "-",
            r.get("run_id") or "-"] for r in rows], ["INSTANCE", "ENV", "STATUS", "MCP URL", "RUN"])


def _status(record: dict) -> str:
    """An instance's status, with its env pool slot; an idle slot's `pooled (idle, N uses)`."""
    status = record.get("status") or "-"
    if record.get("pool_slot") is True:
        return f"{status} (idle, {record.get('uses', 0)} uses)"
    if isinstance(record.get("pool_slot"), str):
        return f"{status} ({'from pool ' if record.get('from_pool') else 'pool '}{record['pool_slot']})"
    return status


@env_group.command("teardown")
@click.argument("instance_id", metavar="INSTANCE")
def teardown(instance_id):
    """Stop a deployed env instance (its gateway and servers) and remove its files."""
    with session() as s:
        record = HubMethods(s).teardown_env(instance_id)
    click.echo(f"Tore down {record['instance_id']} ({record['env_id']}): {record.get('status')}.")


@env_group.command("bind-role")
@click.argument("instance_id", metavar="INSTANCE")
@click.argument("role")
def bind_role(instance_id, role):
    """Bind ROLE on a running instance to a new bearer token, printed once.

    From then on only requests with `Authorization: Bearer TOKEN` act as ROLE; an `AgentEnv-Role`
    header alone can no longer claim it. Only a digest of the token is stored.
    """
    with session() as s:
        token = HubMethods(s).bind_env_role(instance_id, role)
    click.echo(token)
    click.echo(f"Role {role!r} of {instance_id} now needs: Authorization: Bearer <the token above>", err=True)


# `env validate` (the release gate) and `env snapshot` live in their own modules.
from .env_snapshot import snapshot  # noqa: E402 - registered after the group's own commands
from .env_validate import validate  # noqa: E402 - registered after the group's own commands

env_group.add_command(validate)
env_group.add_command(snapshot)
