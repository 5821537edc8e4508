"""`agentenv agent install NAME --into SANDBOX_ID`: a coding-CLI agent's CLI into a live sandbox (what the
install_agent step does in a run; hosting/agents/cli_install.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import click

from ._common import echo_json


@click.command("install")
@click.argument("name")
@click.option("--into", "sandbox_id", required=True, metavar="SANDBOX_ID",
              help="The live sandbox (an id from `agentenv sandbox list`).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def install(name: str, sandbox_id: str, as_json: bool) -> None:
    """Install the coding CLI of agent NAME (claude-code, codex, gemini, opencode, pi) into a live sandbox.

    Its files come from the setup cache (scripts/setup-agent-clis.sh), with Node when the sandbox lacks it;
    it runs there as /app/.agents/bin/EXECUTABLE.
    """
    from agentenv_local.errors import AgentenvError
    from agentenv_local.hosting.agents.cli_image import CLI_BINARIES
    from agentenv_local.hosting.agents.cli_install import install_cli

    from .sandbox import _close, _provider_for

    if name not in CLI_BINARIES:
        raise AgentenvError(f"agent {name!r} is not a coding-CLI agent that can be installed",
                            hint="name one of: " + ", ".join(CLI_BINARIES))
    provider = _provider_for(sandbox_id)

    async def go() -> dict[str, Any]:
        try:
            return await install_cli(await provider.get(sandbox_id), name)
        finally:
            await _close(provider)

    done = asyncio.run(go())
    if as_json:
        echo_json({"sandbox_id": sandbox_id, **done})
    else:
        click.echo(f"installed {name} ({done['version']}) into {sandbox_id}: {done['command']}")
