"""`agentenv sandbox`: set up Podman, and list, exec into, read the logs of and prune sandboxes."""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING

import click

from ._common import ago, echo_json, table

if TYPE_CHECKING:
    from agentenv_local.sandbox_api import SandboxProvider


def _providers(names: list[str] | None = None) -> dict:
    """The installed sandbox providers (instances for this project), optionally only `names`."""
    from agentenv_local.config import load_config
    from agentenv_local.paths import ProjectPaths, find_state_dir
    from agentenv_local.plugins import registry

    paths = ProjectPaths(find_state_dir()).ensure()
    config = load_config()
    out = {}
    for name, cls in sorted(registry().available("sandbox_providers").items()):
        if names and name not in names:
            continue
        out[name] = cls(paths.state_dir, config.get(f"sandbox.providers.{name}") or {})
    return out


def _provider_for(sandbox_id: str):
    """The provider whose ids look like `sandbox_id` (`podman-…`, `process-…`)."""
    prefix = sandbox_id.split("-", 1)[0]
    providers = _providers()
    if prefix in providers:
        return providers[prefix]
    from agentenv_local.errors import NotFoundError

    raise NotFoundError(f"no sandbox provider makes ids like {sandbox_id!r}",
                        hint="copy an id from `agentenv sandbox list`")


async def _close(provider) -> None:
    close = getattr(provider, "aclose", None)
    if close is not None:
        await close()


@click.group("sandbox")
def sandbox_group():
    """Set up Podman; list, exec into, read logs of and prune sandboxes."""


@sandbox_group.command("setup")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def setup(as_json):
    """Make Podman ready here: build the base image (once) and probe the fixes this machine needs.

    The fixes (runc instead of crun, explicit ulimits) go into ~/.config/agentenv/containers.conf and are
    used by every Podman command agentenv runs. Safe to run again.
    """
    say = (lambda line: None) if as_json else (lambda line: click.echo(line, err=True))
    result = provider_named("podman").setup(on_line=say)
    base = result.pop("base_image")
    if as_json:
        echo_json({"base_image": base, **result})
        return
    click.echo(f"base image  {base}")
    click.echo("fixes       " + (", ".join(result["fixes"]) if result["fixes"] else "none needed"))
    if result["conf"]:
        click.echo(f"config      {result['conf']}")
    click.echo("Podman is ready: `agentenv run hello --sandbox podman`")


def provider_named(name: str) -> SandboxProvider:
    """The sandbox provider `name` for this project, from the plugin registry (`agentenv image` uses it too).
    Nothing is created on disk: the machine-level operations need only its config."""
    from agentenv_local.config import load_config
    from agentenv_local.errors import NotFoundError
    from agentenv_local.paths import find_state_dir
    from agentenv_local.plugins import registry

    cls = registry().get("sandbox_providers", name)
    if cls is None:
        reason = registry().failure("sandbox_providers", name)
        raise NotFoundError(f"the {name!r} sandbox provider is not available" + (f": {reason}" if reason else ""),
                            hint="`agentenv plugin list` shows the sandbox providers there are")
    return cls(find_state_dir(), load_config().get(f"sandbox.providers.{name}") or {})


@sandbox_group.command("list")
@click.option("--provider", "names", multiple=True, help="Only this provider (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_sandboxes(names, as_json):
    """Live sandboxes of this project, from every provider that answers."""
    from agentenv_local.errors import AgentenvError

    rows, notes = [], []

    async def collect():
        for name, provider in _providers(list(names)).items():
            try:
                rows.extend(await provider.list())
            except AgentenvError as exc:
                notes.append(f"{name}: {exc.message}")
            finally:
                await _close(provider)

    asyncio.run(collect())
    if as_json:
        echo_json(rows)
        return
    for note in notes:
        click.echo(f"(skipped {note})", err=True)
    if not rows:
        click.echo("No live sandboxes.")
        return
    table([[r.get("sandbox_id"), r.get("sandbox_type"), r.get("sandbox_name") or "", r.get("run_id") or "",
            ago(r.get("created_at")), r.get("isolation") or ""] for r in rows],
          ["SANDBOX", "PROVIDER", "NAME", "RUN", "CREATED", "ISOLATION"])


@sandbox_group.command("exec", context_settings={"ignore_unknown_options": True})
@click.argument("sandbox_id")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@click.option("--timeout", type=float, default=120, show_default=True, help="Seconds before the command is killed.")
@click.option("--cwd", default="/app", show_default=True, help="Working directory in the sandbox.")
def exec_command(sandbox_id, command, timeout, cwd):
    """Run COMMAND in a live sandbox; its output and exit code are passed through.

    One argument runs under `bash -c`; several are argv: `agentenv sandbox exec ID -- ls -la /app`.
    """
    provider = _provider_for(sandbox_id)

    async def go():
        try:
            sandbox = await provider.get(sandbox_id)
            argv = command[0] if len(command) == 1 else list(command)
            return await sandbox.exec(argv, timeout=timeout, cwd=cwd)
        finally:
            await _close(provider)

    result = asyncio.run(go())
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    if result.timed_out:
        click.echo(f"(timed out after {timeout:g} s)", err=True)
    if result.killed_reason:
        click.echo(f"({result.killed_reason})", err=True)
    sys.exit(result.exit_code if 0 <= result.exit_code < 256 else 1)


@sandbox_group.command("logs")
@click.argument("sandbox_id")
@click.option("--tail", type=click.IntRange(1, 1_000_000), default=200, show_default=True)
def logs(sandbox_id, tail):
    """What a container sandbox's main process printed (Podman only)."""
    provider = _provider_for(sandbox_id)
    try:
        click.echo(provider.logs(sandbox_id, tail), nl=False)
    finally:
        asyncio.run(_close(provider))


@sandbox_group.command("prune")
@click.option("--dry-run", is_flag=True, help="Only say what would be removed.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def prune(dry_run, as_json):
    """Remove every sandbox a dead run left behind, and only those.

    Dead: the run was interrupted (its hub was killed) or is unknown to the store; for warm-pool
    containers, the process that started them is gone. Sandboxes of live runs, and those a finished
    run kept (`--keep`), stay.
    """
    from agentenv_local.errors import AgentenvError, NotFoundError

    from ._common import session

    removed: list[dict] = []
    with session() as s:
        def run_is_dead(run_id: str) -> bool:
            try:
                return s.store.runs.get(run_id)["status"] == "interrupted"
            except NotFoundError:
                return True

        async def sweep():
            for name, provider in _providers().items():
                try:
                    rows = await provider.prune(run_is_dead, dry_run=dry_run)
                    removed.extend({**r, "sandbox_type": name} for r in rows)
                except AgentenvError as exc:
                    click.echo(f"(skipped {name}: {exc.message})", err=True)
                finally:
                    await _close(provider)

        asyncio.run(sweep())
    if as_json:
        echo_json(removed)
        return
    verb = "would remove" if dry_run else "removed"
    for r in removed:
        click.echo(f"{verb} {r['sandbox_type']} {r['sandbox_id']}: {r['reason']}")
    click.echo(f"{len(removed)} sandbox(es) {verb}." if removed else "Nothing to prune.")
