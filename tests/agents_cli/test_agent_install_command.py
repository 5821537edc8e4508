"""`agentenv agent install NAME --into SANDBOX_ID` (cli/agent_install.py): codex's CLI into a live process sandbox
of the project, where it then runs; a name with no CLI fails with a hint."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from agent_cli_kit import cli_path

from agentenv_local.sandbox_api import SandboxSpec
from sandboxes.process import ProcessSandboxProvider


def test_agentenv_agent_install_puts_codex_into_a_live_sandbox(tmp_path: Path) -> None:
    cli_path("codex", "codex")
    project = tmp_path / "proj"
    (project / ".agentenv").mkdir(parents=True)
    provider = ProcessSandboxProvider(project / ".agentenv", {})
    sandbox = asyncio.run(provider.create(SandboxSpec(name="s")))
    agentenv = str(Path(sys.executable).parent / "agentenv")
    try:
        out = subprocess.run([agentenv, "agent", "install", "codex", "--into", sandbox.sandbox_id, "--json"],
                             cwd=project, capture_output=True, text=True, timeout=300, check=False)
        assert out.returncode == 0, out.stdout + out.stderr
        assert json.loads(out.stdout)["version"] == "codex-cli 0.169.0"
        ran = asyncio.run(sandbox.exec(".agents/bin/codex --version", cwd="/app"))
        assert ran.stdout.strip() == "codex-cli 0.169.0"
        bad = subprocess.run([agentenv, "agent", "install", "scripted", "--into", sandbox.sandbox_id],
                             cwd=project, capture_output=True, text=True, timeout=300, check=False)
        assert bad.returncode != 0 and "not a coding-CLI agent" in bad.stderr and "claude-code" in bad.stderr
    finally:
        asyncio.run(sandbox.terminate())
