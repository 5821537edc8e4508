"""Without the CLI cache the CLI tests skip saying how to install it, unless AGENTENV_REQUIRE_AGENT_CLIS=1."""

from __future__ import annotations

from pathlib import Path

import agent_cli_kit
import pytest


def test_an_absent_cli_skips_with_the_setup_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agent_cli_kit, "CLI_CACHE", tmp_path)
    monkeypatch.delenv("AGENTENV_REQUIRE_AGENT_CLIS", raising=False)
    with pytest.raises(pytest.skip.Exception, match="run scripts/setup-agent-clis.sh"):
        agent_cli_kit.cli_path("codex", "codex")


def test_an_absent_cli_fails_when_required(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agent_cli_kit, "CLI_CACHE", tmp_path)
    monkeypatch.setenv("AGENTENV_REQUIRE_AGENT_CLIS", "1")
    with pytest.raises(pytest.fail.Exception, match="codex is not installed"):
        agent_cli_kit.cli_path("codex", "codex")
