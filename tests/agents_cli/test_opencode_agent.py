"""The `opencode` agent (agentenv_local.agents.cli_agents.opencode) driving the real opencode CLI against the fake
model server: a turn's JSON events become trajectory events (the bash call with its output, the final text with
usage), a second turn of the context resumes the CLI's session, cancelling a turn leaves no process it started,
and the reference's `agents` bundle's opencode-smoke task passes under `agentenv run` (a real hub); without a
model it stops with one line naming the model setting."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from agent_cli_kit import (
    LONG_COMMAND,
    MODEL_KEY,
    LongCommandResponder,
    assert_no_model_is_one_line,
    assert_no_process_left,
    cancel_a_running_turn,
    cli_path,
    is_sleep,
    missing_cli_error,
    record_started,
    run_office_task,
    run_reference_smoke,
    second_turn_resumes,
    smoke_bundle_of,
    smoke_fails_without_model,
    tool_calls,
    turn_request,
)
from shell_responder import COMMAND, ShellResponder

from agentenv_local.agents.cli_agents import harness
from agentenv_local.agents.cli_agents.opencode import OpencodeAgent
from agentenv_local.agents.types import TextPart
from agentenv_local.testing.fake_models import FakeModelServer


def model_config(server: FakeModelServer, workdir: Path) -> dict[str, Any]:
    return {"base_url": server.root_url, "api_key": MODEL_KEY, "model": "claude-sonnet-4-5",
            "workspace": str(workdir)}


def test_a_turn_records_the_bash_call_and_a_second_turn_resumes_the_session(workdir: Path) -> None:
    cli_path("opencode", "opencode")
    agent = OpencodeAgent()
    with FakeModelServer(api_key=MODEL_KEY, responder=ShellResponder()) as server:
        first = turn_request(agent, f"Run {COMMAND} and reply with the number.", "ctx-1", "t-1",
                        **model_config(server, workdir))
        result = asyncio.run(agent.run(first))
        assert result.error is None, (result, first.trajectory.events())
        answer = result.parts[0]
        assert isinstance(answer, TextPart) and "42" in answer.text
        events = first.trajectory.events()
        calls = [e for e in events if e["type"] == "tool_call"]
        assert [(c["name"], c["args"]) for c in calls] == [("bash", {"command": COMMAND})]
        assert calls[0]["result"].strip() == "42" and calls[0]["is_error"] is False
        assert calls[0]["server"] is None and calls[0]["tool"] == "bash"
        kinds = [e["type"] for e in events]
        assert kinds.index("tool_use") < kinds.index("tool_call") < kinds.index("final")
        final = [e for e in events if e["type"] == "final"][-1]
        assert "42" in final["text"] and final["usage"]["output_tokens"] > 0
        session = result.usage.provider_details["session_id"]
        assert session and result.usage.tool_call_count == 1 and (result.usage.output_tokens or 0) > 0
        assert MODEL_KEY not in json.dumps(events)
        assert all(not r.problems for r in server.requests)

        second_turn_resumes(agent, server, model_config(server, workdir), session,
                            lambda r: r.path == "/v1/messages" and r.valid and bool(r.tools))


def test_cancelling_a_turn_leaves_no_process_it_started(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cli_path("opencode", "opencode")
    started = record_started(monkeypatch)
    agent = OpencodeAgent()

    def sleepers_and_tree(cli: int) -> tuple[list[int], list[int]]:
        tree = harness.descendants(cli)
        return [pid for pid in tree if is_sleep(pid)], tree  # read before the cancel ends them

    waits = LongCommandResponder("bash", command=LONG_COMMAND, timeout=600000, description="wait a long time")
    with FakeModelServer(api_key=MODEL_KEY, responder=waits) as server:
        req = turn_request(agent, "Wait for a long time.", "ctx-c", "t-c", **model_config(server, workdir))
        sleepers, tree = cancel_a_running_turn(agent, req, started, sleepers_and_tree)
    assert sleepers
    assert_no_process_left(tree, cli=started[0])


def test_a_missing_cli_and_a_missing_model_are_one_clear_line(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    agent = OpencodeAgent()
    assert_no_model_is_one_line(agent, monkeypatch)
    assert "opencode-ai" in missing_cli_error(agent, tmp_path, monkeypatch)


# --- the reference's opencode-smoke task under `agentenv run` ---------------------------------------------------

DROP = ("ANTHROPIC_",)


@pytest.fixture
def smoke_bundle(tmp_path: Path) -> Path:
    """The reference's `agents` bundle with its opencode task only."""
    return smoke_bundle_of(tmp_path, "opencode")


def test_the_smoke_task_passes_with_a_model_and_records_the_bash_call(smoke_bundle: Path) -> None:
    cli_path("opencode", "opencode")
    trajectory = run_reference_smoke(smoke_bundle, "opencode", ShellResponder(), lambda server: {
        "api": "anthropic", "base_url": server.root_url, "default": "claude-sonnet-4-5"}, DROP)
    calls = tool_calls(trajectory)
    assert [(c["name"], c["args"]["command"], c["result"].strip()) for c in calls] == [("bash", COMMAND, "42")]
    assert "42" in [e for e in trajectory if e.get("type") == "final"][-1]["text"]


def test_without_a_model_the_smoke_task_fails_with_one_line(smoke_bundle: Path) -> None:
    smoke_fails_without_model(smoke_bundle, "opencode", DROP)


def test_opencode_calls_an_office_tool_through_the_gateway_under_a_role(tmp_path: Path) -> None:
    cli_path("opencode", "opencode")
    responder = ShellResponder(mcp_tool="_search_emails", mcp_args={"query": "acme pricing"})
    offered = run_office_task(tmp_path, "opencode", responder, lambda server: {
        "api": "anthropic", "base_url": server.root_url, "default": "claude-sonnet-4-5"}, DROP, "/v1/messages")
    assert responder.called == ["office_search_emails"]
    assert offered and all("office_purge_mailbox" not in names for names in offered)  # RBAC of the role
