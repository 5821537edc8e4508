"""install_cli into a running Podman container of the base image (Python and bash, no Node): the CLI's files and
Node with its libraries land under /app/.agents, and the launcher runs the Node CLI in the container."""

from __future__ import annotations

import asyncio

import pytest

from agentenv_local.hosting.agents import cli_image
from agentenv_local.hosting.agents.cli_install import install_cli
from agentenv_local.sandbox_api import SandboxSpec


def test_gemini_installed_into_a_container_brings_node_and_runs(provider_factory) -> None:
    if not (cli_image.CLI_CACHE / "gemini" / "node_modules" / ".bin" / "gemini").exists():
        pytest.skip("the gemini CLI is not in .cache/agent-clis (scripts/setup-agent-clis.sh installs it)")
    provider = provider_factory()

    async def go() -> tuple[dict, str, int]:
        sandbox = await provider.create(SandboxSpec(name="s"))
        try:
            before = (await sandbox.exec(["sh", "-c", "command -v node"])).exit_code
            done = await install_cli(sandbox, "gemini")
            ran = await sandbox.exec(["sh", "-c", "HOME=/tmp /app/.agents/bin/gemini --version"], timeout=120)
            return done, ran.stdout, before
        finally:
            await sandbox.terminate()

    done, printed, had_node = asyncio.run(go())
    assert had_node != 0 and done["node"] == "installed"
    assert printed.strip() == done["version"] == "0.61.0"
