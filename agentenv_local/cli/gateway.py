"""`agentenv gateway`: reach a deployed env's gateway from tools that speak MCP over stdio."""

from __future__ import annotations

import os

import click


@click.group("gateway")
def gateway_group():
    """Use a deployed env's gateway from MCP clients that start a command (stdio)."""


@gateway_group.command("stdio")
@click.argument("instance_id", metavar="INSTANCE")
@click.option("--role", help="Act as this role (sent as the AgentEnv-Role header).")
@click.option("--token", help="A bearer token from `agentenv env bind-role`, or env:NAME to read it from "
                              "an environment variable (keeps it out of editor configs).")
def stdio(instance_id, role, token):
    """Serve INSTANCE's gateway as MCP on stdin/stdout (for editors).

    The instance must be running in a long-lived hub (`agentenv up`, then `agentenv env deploy`).
    Example for Claude Code: `claude mcp add office -- agentenv gateway stdio envi-... --role agent`.
    """
    import anyio

    from agentenv_local.errors import NotFoundError, ValidationError
    from agentenv_local.gateway.stdio_bridge import bridge
    from agentenv_local.hub import HubMethods, connect

    if token and token.startswith("env:"):
        name = token[4:]
        token = os.environ.get(name)
        if not token:
            raise ValidationError(f"--token env:{name}: the environment variable {name} is not set")
    session = connect()
    try:
        running = HubMethods(session).env_instances(status="running")
    finally:
        session.close()
    matches = [r for r in running if r["instance_id"].startswith(instance_id)]
    if len(matches) != 1:
        known = ", ".join(r["instance_id"] for r in running) or "none"
        raise NotFoundError(f"no running env instance {instance_id!r}" if not matches else
                            f"instance prefix {instance_id!r} is ambiguous",
                            hint=f"running instances: {known}; deploy one with `agentenv up --detach` and "
                                 "`agentenv env deploy --id ENV`")
    record = matches[0]
    anyio.run(lambda: bridge(record["mcp_url"], role=role, token=token,
                             name=record.get("mcp_server_name") or "agentenv"))
