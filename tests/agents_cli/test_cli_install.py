"""install_cli (hosting/agents/cli_install.py): a coding CLI from the setup cache written into a running process
sandbox, whose launcher runs it from the sandbox's work folder; a name with no CLI is one clear error."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from agent_cli_kit import cli_path

from agentenv_local.hosting.agents import cli_image
from agentenv_local.hosting.agents.cli_install import install_cli
from agentenv_local.sandbox_api import SandboxSpec
from sandboxes.process import ProcessSandboxProvider


def test_codex_installed_into_a_process_sandbox_runs_from_its_launcher(tmp_path: Path) -> None:
    cli_path("codex", "codex")

    async def go() -> tuple[dict, str, bool]:
        sandbox = await ProcessSandboxProvider(tmp_path / "state", {}).create(SandboxSpec(name="s"))
        try:
            done = await install_cli(sandbox, "codex")
            ran = await sandbox.exec(".agents/bin/codex --version", cwd="/app")
            return done, ran.stdout, await sandbox.exists("/app/.agents/codex/package.json", "file")
        finally:
            await sandbox.terminate()

    done, printed, copied = asyncio.run(go())
    assert (done["command"], done["version"], done["node"]) == ("/app/.agents/bin/codex", "codex-cli 0.169.0",
                                                                "present")  # the host's node serves it
    assert printed.strip() == "codex-cli 0.169.0" and copied and done["files"] > 10


def test_an_agent_without_a_cli_is_one_clear_error() -> None:
    with pytest.raises(cli_image.AgentImageError) as err:
        cli_image.cli_cache("scripted")
    assert "no CLI-agent image for 'scripted'" in err.value.message and "claude-code" in (err.value.hint or "")
