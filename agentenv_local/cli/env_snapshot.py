"""`agentenv env snapshot --instance-id`: a deployed env instance's state as an environment_universe artifact.

The reference's command bakes a servicedb image of a cloud VM; here an instance's state is what its servers
export (`data/get` on each, through its gateway with the instance's admin token), so it is stored the way
`snapshot_env` stores it and loads back with `load_artifact` (or `deploy_env.artifact_id`).
"""

from __future__ import annotations

from typing import Any

import click

from agentenv_local.hub.methods import HubMethods

from ._common import echo_json, session, valid_id


def export_services(record: dict, token: str | None, timeout: float) -> dict[str, bytes]:
    """{service: its snapshot file} for every server of a running instance; an export failure names the server."""
    import httpx2

    from agentenv_local import jsonrpc
    from agentenv_local.errors import AgentenvError
    from agentenv_local.steps.env_gateway import message_of
    from agentenv_local.steps.env_snapshot import snapshot_file

    services = [c["name"] for c in record.get("children") or [] if isinstance(c, dict) and c.get("name")]
    if not services or not record.get("gateway_url"):
        raise AgentenvError(f"env instance {record['instance_id']} has no servers behind a gateway to export")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    exported: dict[str, bytes] = {}
    with httpx2.Client(base_url=str(record["gateway_url"]).rstrip("/"), timeout=timeout, headers=headers) as http:
        for service in services:
            where = f"env instance {record['instance_id']} server {service!r}"
            try:
                r = http.post(f"/svc/mcp-{service}/agentenv", json=jsonrpc.request("data/get", {}))
                answer: Any = r.json()
            except Exception as exc:  # transport or a body that is not JSON: say which server and why
                raise AgentenvError(f"{where}: data/get failed: {type(exc).__name__}: {exc}",
                                    hint="is the instance still running? (agentenv env instances)") from exc
            result = answer.get("result") if isinstance(answer, dict) else None
            parts = result.get("parts") if isinstance(result, dict) else None
            if not isinstance(parts, list):
                raise AgentenvError(f"{where} failed to export its data (data/get): {message_of(answer)}",
                                    hint="every server of the env must offer data/get to be snapshotted")
            exported[service] = snapshot_file(service, parts)
    return exported


@click.command("snapshot")
@click.option("--instance-id", required=True, help="The deployed env instance (agentenv env instances).")
@click.option("--id", "snapshot_id", callback=valid_id, default=None,
              help="The artifact to store (default: <instance>__env-snapshot; a new version each time).")
@click.option("--timeout", type=click.FloatRange(min=1), default=600, show_default=True,
              help="Seconds per server's export.")
@click.option("--json", "as_json", is_flag=True, help="Print the stored artifact's record as JSON.")
def snapshot(instance_id, snapshot_id, timeout, as_json):
    """Store a running env instance's state (every server's data/get) as an environment_universe artifact."""
    from agentenv_local.errors import NotFoundError, ValidationError
    from agentenv_local.steps.env_snapshot import store_snapshot

    with session() as s:
        hub = HubMethods(s)
        found = [r for r in hub.env_instances(status=None) if r["instance_id"] == instance_id]
        if not found:
            raise NotFoundError(f"no env instance {instance_id!r}", hint="list them with `agentenv env instances`")
        record = found[0]
        if record.get("status") != "running":
            raise ValidationError(f"env instance {instance_id} is {record.get('status')}, not running: its "
                                  "servers cannot export", hint="deploy it again (agentenv env deploy --resume)")
        exported = export_services(record, hub.env_admin_token(instance_id), timeout)
        artifact_id = snapshot_id or f"{instance_id}__env-snapshot"
        doc = store_snapshot(s.store, artifact_id, record["env_id"], exported, {},
                             origin={"instance_id": instance_id}, where=f"instance {instance_id}")
    if as_json:
        echo_json(doc)
        return
    click.echo(f"Snapshot of {instance_id} ({record['env_id']}: {', '.join(exported)}) stored as "
               f"environment_universe {doc['id']} v{doc['version']}.")
    click.echo(f"Load it back with load_artifact (env_id, artifact_id: {doc['id']}), or "
               f"`agentenv artifact environment-universe get --id {doc['id']} --output-dir DIR`.")
