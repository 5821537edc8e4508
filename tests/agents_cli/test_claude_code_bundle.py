"""The reference's `agents` bundle's claude-code-smoke task run by `agentenv run` (a real hub, the real Claude
Code CLI, the fake model server over HTTP as [model]): it passes and its stored trajectory shows the Bash call
and its output; without a model the run stops with one line naming the model setting."""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_cli_kit import (
    agentenv,
    cli_path,
    run_office_task,
    run_reference_smoke,
    smoke_bundle_of,
    smoke_fails_without_model,
    tool_calls,
)
from kits.reference_bundles import copy_reference_bundle
from shell_responder import COMMAND, ShellResponder

from agentenv_local.testing.fake_models import FakeModelServer

DROP = ("ANTHROPIC_",)


def anthropic_model(server: FakeModelServer) -> dict[str, str]:
    return {"api": "anthropic", "base_url": server.root_url, "default": "claude-sonnet-4-5"}


@pytest.fixture
def smoke_bundle(tmp_path: Path) -> Path:
    """The reference's `agents` bundle with its claude-code task only."""
    return smoke_bundle_of(tmp_path, "claude-code")


def test_the_smoke_task_passes_with_a_model_and_records_the_bash_call(smoke_bundle: Path) -> None:
    cli_path("claude-code", "claude")
    trajectory = run_reference_smoke(smoke_bundle, "claude-code", ShellResponder(), anthropic_model, DROP)
    calls = tool_calls(trajectory)
    assert [(c["name"], c["args"]["command"], c["result"].strip()) for c in calls] == [("Bash", COMMAND, "42")]


def test_without_a_model_the_dry_run_passes_and_the_run_fails_with_one_line(smoke_bundle: Path) -> None:
    dry = smoke_fails_without_model(smoke_bundle, "claude-code", DROP, dry_run=True)
    assert dry is not None and "Would run: tasks/claude-code-smoke.json" in dry.stdout


def test_the_full_bundle_knows_every_agent(tmp_path: Path) -> None:
    bundle = copy_reference_bundle("agents", tmp_path)
    out = agentenv(tmp_path, "run", str(bundle), "--dry-run", drop=DROP)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    assert "not found" not in text
    for name in ("claude-code", "codex", "gemini", "opencode", "openhands", "pi"):
        assert f"Would run: tasks/{name}-smoke.json" in text


def test_claude_calls_an_office_tool_through_the_gateway_under_a_role(tmp_path: Path) -> None:
    cli_path("claude-code", "claude")
    responder = ShellResponder(mcp_tool="__search_emails", mcp_args={"query": "acme pricing"})
    offered = run_office_task(tmp_path, "claude-code", responder, anthropic_model, DROP, "/v1/messages")
    assert responder.called == ["mcp__office__search_emails"]
    assert offered and all("mcp__office__purge_mailbox" not in names for names in offered)  # RBAC of the role
