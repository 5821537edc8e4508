"""`agentenv agent`: store, list, deploy, validate and install A2A agents (`install`: cli/agent_install.py)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import click

from agentenv_local.hub.methods import HubMethods

from ._common import ago, echo_json, serve_until_stopped, session, table
from .agent_install import install


def _json_option(text: str | None, what: str) -> dict:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint=what) from exc
    if not isinstance(value, dict):
        raise click.BadParameter("must be a JSON object", param_hint=what)
    return value


@click.group("agent")
def agent_group():
    """Store, list, deploy and validate A2A agents; install a coding CLI into a sandbox."""


agent_group.add_command(install)


@agent_group.command("put")
@click.option("--id", "agent_id", required=True, help="The agent's id (e.g. support-bot).")
@click.option("--spec", help="What to start: scripted, tool-loop, human, file.py[:Class] or pkg.mod:Class.")
@click.option("--url", help="An agent that is already served (its A2A base URL).")
@click.option("--config", "config_json", help="Default agent-config fields, as JSON (a scripted agent's plan).")
@click.option("--env-var", "env_vars", multiple=True, metavar="KEY=VALUE", help="For subprocess agents (repeatable).")
@click.option("--description", help="What the agent is for.")
def put(agent_id, spec, url, config_json, env_vars, description):
    """Store an agent record (a new version when it changed)."""
    from agentenv_local.agents import registry

    body = {"spec": spec, "url": url, "config": _json_option(config_json, "--config"), "description": description,
            "env_vars": dict(item.split("=", 1) for item in env_vars if "=" in item)}
    body = registry.validate_body({k: v for k, v in body.items() if v not in (None, {}, "")})
    import hashlib

    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    with session() as s:
        doc = s.store.documents.put(registry.COLLECTION, agent_id, body, digest=digest, if_changed=True)
    state = "unchanged" if doc.get("unchanged") else "stored"
    click.echo(f"agent {agent_id}: v{doc['version']} ({state})")


@agent_group.command("get")
@click.argument("agent_id")
@click.option("--version", type=int, help="A version (default: the latest).")
def get(agent_id, version):
    """An agent record as JSON (built-ins too)."""
    from agentenv_local.agents import registry

    with session() as s:
        echo_json(registry.resolve(s.store, agent_id, version))


@agent_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_agents(as_json):
    """The agents known by name (built-in, then plugins'), then the stored ones."""
    from agentenv_local.agents import registry
    from agentenv_local.agents.builtin import named_agents
    from agentenv_local.query import Query

    rows: list[dict[str, Any]] = [{"id": name, "version": None, "kind": "built-in", "description": text,
                                   "aliases": []} for name, text in registry.BUILTIN_DESCRIPTIONS.items()]
    rows += [{"id": name, "version": None, "kind": f"plugin ({spec})", "description": "", "aliases": []}
             for name, spec in sorted(named_agents().items()) if name not in registry.BUILTIN_DESCRIPTIONS]
    with session() as s:
        for doc in s.store.documents.query(Query(registry.COLLECTION)):
            rows.append(_stored_row(doc))
    if as_json:
        echo_json(rows)
        return
    table([[r["id"], f"v{r['version']}" if r["version"] else "-", r["kind"], ", ".join(r["aliases"]) or "-",
            r["description"]] for r in rows], ["AGENT", "VERSION", "KIND", "ALIASES", "DESCRIPTION"])


def _stored_row(doc: dict) -> dict[str, Any]:
    """A stored agent's `agent list` row: a bundle's (`agents/<name>/`) with the bundle and its aliases, which
    a task of that bundle may name it by (with its folder name)."""
    body = doc["body"]
    command = body.get("command")
    kind = body.get("spec") or body.get("url") or (f"image {body['image']}" if body.get("image") else None) or (
        f"command {' '.join(command)}" if isinstance(command, list) else "")
    row = {"id": doc["id"], "version": doc["version"], "kind": kind, "description": body.get("description") or "",
           "aliases": list(body.get("aliases") or [])}
    if body.get("bundle"):
        row["bundle"] = body["bundle"]
    return row


@agent_group.command("deploy")
@click.argument("agent_id")
@click.option("--version", type=int, help="A stored agent's version.")
@click.option("--runtime", type=click.Choice(["in_hub", "subprocess"]), default="in_hub", show_default=True)
@click.option("--config", "config_json", help="agent-config fields to set, as JSON.")
@click.option("--keep-running", is_flag=True, help="Stay in the foreground until Ctrl-C, then tear it down.")
@click.option("--ttl-seconds", type=click.IntRange(60, 1_209_600), default=None,
              help="Tear the instance down this many seconds after it starts (60 to 1209600; default: no limit).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def deploy(agent_id, version, runtime, config_json, keep_running, ttl_seconds, as_json):
    """Start an agent that stays up (in the hub: behind `agentenv up`, or in the foreground)."""
    with session() as s:
        record = HubMethods(s).deploy_agent(agent_id, version, runtime=runtime,
                                            config=_json_option(config_json, "--config"), ttl_seconds=ttl_seconds)
        if as_json:
            echo_json(record)
        else:
            click.echo(f"agent {agent_id} is up: {record['a2a_url']} (instance {record['instance_id']}, "
                       f"{record['runtime']})")
        foreground = keep_running or (s.is_hub and not getattr(s.hub, "long_lived", False))
        if not foreground:
            click.echo(f"Stop it with `agentenv agent teardown {record['instance_id']}`.", err=as_json)
            return
        serve_until_stopped(s, lambda: HubMethods(s).teardown_agent(record["instance_id"]))


@agent_group.command("instances")
@click.argument("instance_id", metavar="[INSTANCE]", required=False)
@click.option("--all", "show_all", is_flag=True, help="Stopped instances too.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def instances(instance_id, show_all, as_json):
    """Agents `agentenv agent deploy` started (running ones, unless --all), or INSTANCE's record as JSON."""
    from agentenv_local.errors import NotFoundError

    with session() as s:
        rows = HubMethods(s).agent_instances(status=None if show_all or instance_id else "running")
    if instance_id:  # the reference's lookup by id: one record, stopped ones too
        found = [r for r in rows if r["instance_id"] == instance_id]
        if not found:
            raise NotFoundError(f"no agent instance {instance_id!r}",
                                hint="list them with `agentenv agent instances --all`")
        echo_json(found[0])
        return
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo("No agent instances. Start one with: agentenv agent deploy scripted --keep-running")
        return
    table([[r["instance_id"], r["agent_id"], r["runtime"], r["status"], r["a2a_url"], ago(r.get("created_at"))]
           for r in rows], ["INSTANCE", "AGENT", "RUNTIME", "STATUS", "URL", "STARTED"])


@agent_group.command("teardown")
@click.argument("instance_id")
def teardown(instance_id):
    """Stop an agent instance."""
    with session() as s:
        HubMethods(s).teardown_agent(instance_id)
    click.echo(f"Tore down {instance_id}.")


@agent_group.command("validate")
@click.argument("agent")
@click.option("--version", type=int, help="A stored agent's version.")
@click.option("--config", "config_json", help="agent-config fields to set first (e.g. a scripted plan).")
@click.option("--prompt", default="hello", show_default=True, help="What the core-protocol check sends.")
@click.option("--timeout", type=float, default=60, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def validate(agent, version, config_json, prompt, timeout, as_json):
    """Run the conformance checks against AGENT: a URL, a stored id, a built-in or a Python agent.

    Checks: the card, the core protocol (message/send, tasks/get, an unknown method refused), agent-config,
    mcp-config, the trajectory and skills (each extension only when the card offers it). Exit 1 on a failure.
    """
    from agentenv_local.agents import registry
    from agentenv_local.agents.conformance import run_checks, summarize
    from agentenv_local.hosting.agents.hosted import resolve_spec, serve_in_hub

    config = _json_option(config_json, "--config")

    async def go(spec: dict) -> list:
        from agentenv_local.agents.client import A2AClient

        hosted = None
        url = spec["url"]
        if not url:
            hosted = await serve_in_hub(resolve_spec(spec["spec"]), {})
            url = hosted.url
        try:
            if config or spec["config"]:
                async with A2AClient(url, timeout=timeout) as client:
                    await client.agent_config_set(**{**spec["config"], **config})
            return await run_checks(url, prompt=prompt, timeout=timeout)
        finally:
            if hosted is not None:
                await hosted.stop()

    if agent.startswith(("http://", "https://")):
        spec = {"url": agent.rstrip("/"), "spec": None, "config": {}}
    else:
        with session() as s:
            spec = registry.resolve(s.store, agent, version)
    checks = asyncio.run(go(spec))
    summary = summarize(checks)
    if as_json:
        echo_json(summary)
    else:
        marks = {"pass": "PASS", "fail": "FAIL", "skip": "skip"}
        for c in checks:
            click.echo(f"{marks[c.status]:<5} {c.name:<24} {c.detail}")
        click.echo(f"{summary['passed']} passed, {summary['failed']} failed, {summary['skipped']} skipped")
    if summary["failed"]:
        raise SystemExit(1)
