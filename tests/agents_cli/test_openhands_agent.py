"""The `openhands` agent (agentenv_local.agents.cli_agents.openhands) driving the real OpenHands CLI against the
fake model server: a turn's JSON events become trajectory events (terminal call, its result, final with usage), a
second turn of the context resumes the same conversation, the env's MCP servers reach the CLI, cancelling a turn
leaves no process, and the reference's `openhands-smoke` task passes through `agentenv run` (without a model: one
line naming the model setting)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from agent_cli_kit import (
    LONG_COMMAND,
    MODEL_KEY,
    LongCommandResponder,
    alive,
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
from agentenv_local.agents.cli_agents.openhands import OpenHandsAgent
from agentenv_local.testing.fake_models import FakeModelServer, RecordedRequest


def model_config(server: FakeModelServer, workdir: Path) -> dict[str, Any]:
    return {"base_url": server.base_url, "api": "openai", "api_key": MODEL_KEY, "model": "fake-model",
            "workspace": str(workdir)}


def chat_turns(server: FakeModelServer) -> list[RecordedRequest]:
    return [r for r in server.requests if r.path == "/v1/chat/completions"]


def test_a_turn_records_the_terminal_call_and_a_second_turn_resumes_the_conversation(workdir: Path) -> None:
    cli_path("openhands-venv", "openhands", venv=True)
    agent = OpenHandsAgent()
    with FakeModelServer(api_key=MODEL_KEY, responder=ShellResponder()) as server:
        first = turn_request(agent, f"Run {COMMAND} and reply with the number.", "ctx-1", "t-1",
                        **model_config(server, workdir))
        result = asyncio.run(agent.run(first))
        assert result.error is None, (result, first.trajectory.events())
        assert "42" in result.parts[0].text
        events = first.trajectory.events()
        calls = [e for e in events if e["type"] == "tool_call"]
        assert [(c["name"], c["args"]["command"]) for c in calls] == [("terminal", COMMAND)]
        assert calls[0]["result"].strip() == "42" and calls[0]["is_error"] is False
        kinds = [e["type"] for e in events]
        assert kinds.index("tool_use") < kinds.index("tool_call")  # the call is seen before its result
        final = [e for e in events if e["type"] == "final"][-1]
        assert "42" in final["text"] and final["usage"]["output_tokens"] > 0 and final["usage"]["input_tokens"] > 0
        session = result.usage.provider_details["session_id"]
        assert session and result.usage.tool_call_count == 1
        assert MODEL_KEY not in json.dumps(events)
        assert all({k.lower(): v for k, v in r.headers.items()}.get("authorization") == f"Bearer {MODEL_KEY}"
                   for r in chat_turns(server))

        second_turn_resumes(agent, server, model_config(server, workdir), session,
                            lambda r: r.path == "/v1/chat/completions")

        other = turn_request(agent, "Hello", "ctx-2", "t-3", **model_config(server, workdir))
        assert asyncio.run(agent.run(other)).usage.provider_details["session_id"] != session  # a context each


def test_the_envs_mcp_server_reaches_the_cli(workdir: Path, echo_mcp_url: str) -> None:
    cli_path("openhands-venv", "openhands", venv=True)
    agent = OpenHandsAgent()
    # OpenHands adds a required security_risk argument to every tool, MCP tools included
    responder = ShellResponder(mcp_tool="echo", mcp_args={"text": "hello from the fake model", "security_risk": "LOW"})
    with FakeModelServer(api_key=MODEL_KEY, responder=responder) as server:
        req = turn_request(agent, "Say hello with echo", "ctx-m", "t-m", mcp={"echo": {"url": echo_mcp_url}},
                      **model_config(server, workdir))
        result = asyncio.run(agent.run(req))
    assert result.error is None, (result, req.trajectory.events())
    calls = [e for e in req.trajectory.events() if e["type"] == "tool_call"]
    assert [c["name"] for c in calls] == ["echo"] and "hello from the fake model" in calls[0]["result"]
    assert "hello from the fake model" in result.parts[0].text


def test_cancelling_a_turn_leaves_no_process(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cli_path("openhands-venv", "openhands", venv=True)
    started = record_started(monkeypatch)
    agent = OpenHandsAgent()

    def sleeping_and_tree(cli: int) -> tuple[list[int], list[int]]:
        sleeping = sleeping_in(workdir)
        return sleeping, harness.descendants(cli) + sleeping

    waits = LongCommandResponder("terminal", command=LONG_COMMAND, timeout=600, security_risk="LOW")
    with FakeModelServer(api_key=MODEL_KEY, responder=waits) as server:
        req = turn_request(agent, "Wait for a long time.", "ctx-c", "t-c", **model_config(server, workdir))
        sleeping, tree = cancel_a_running_turn(agent, req, started, sleeping_and_tree, polls=1800,
                                               ready=lambda cli, events: bool(sleeping_in(workdir)))
    assert sleeping  # the terminal's long command ran
    assert sleeping_in(workdir) == [], "the terminal's long command is still running"
    assert_no_process_left(tree, cli=started[0])
    assert any(e["type"] == "tool_use" and e["name"] == "terminal" for e in req.trajectory.events())


def sleeping_in(workdir: Path) -> list[int]:
    """The long commands running in `workdir`: OpenHands runs them in tmux panes, outside the CLI's own tree."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and is_sleep(int(entry.name)) and alive(int(entry.name)):
            try:
                if Path(os.readlink(entry / "cwd")) == workdir:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_a_missing_cli_and_a_missing_model_are_one_clear_error_each(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    agent = OpenHandsAgent()
    missing_cli_error(agent, tmp_path, monkeypatch)
    assert "[model] base_url" in assert_no_model_is_one_line(agent, monkeypatch)


# --- the reference's `agents` bundle through `agentenv run` -------------------------------------------------------

DROP = ("ANTHROPIC_",)


@pytest.fixture
def smoke_bundle(tmp_path: Path) -> Path:
    """The reference's `agents` bundle with its openhands task only."""
    return smoke_bundle_of(tmp_path, "openhands")


def test_the_smoke_task_passes_with_a_model_and_records_the_terminal_call(smoke_bundle: Path) -> None:
    cli_path("openhands-venv", "openhands", venv=True)
    trajectory = run_reference_smoke(smoke_bundle, "openhands", ShellResponder(), lambda server: {
        "api": "openai", "base_url": server.base_url, "default": "fake-model"}, DROP)
    calls = tool_calls(trajectory)
    assert [(c["name"], c["args"]["command"], c["result"].strip()) for c in calls] == [("terminal", COMMAND, "42")]


def test_without_a_model_the_smoke_task_fails_with_one_line(smoke_bundle: Path) -> None:
    smoke_fails_without_model(smoke_bundle, "openhands", DROP, dry_run=True)


def test_an_anthropic_endpoint_is_spoken_as_the_messages_api(workdir: Path) -> None:
    cli_path("openhands-venv", "openhands", venv=True)
    agent = OpenHandsAgent()
    with FakeModelServer(api_key=MODEL_KEY, responder=ShellResponder()) as server:
        req = turn_request(agent, f"Run {COMMAND} and reply with the number.", "ctx-a", "t-a", base_url=server.root_url,
                      api="anthropic", api_key=MODEL_KEY, model="claude-sonnet-4-5", workspace=str(workdir))
        result = asyncio.run(agent.run(req))
    assert result.error is None, (result, req.trajectory.events())
    assert "42" in result.parts[0].text
    turns = [r for r in server.requests if r.path == "/v1/messages"]
    assert turns and all(r.valid and r.model == "claude-sonnet-4-5" for r in turns)


def test_openhands_calls_an_office_tool_through_the_gateway_under_a_role(tmp_path: Path) -> None:
    cli_path("openhands-venv", "openhands", venv=True)
    # OpenHands adds a required security_risk argument to every tool; it does not reach the MCP server
    responder = ShellResponder(mcp_tool="search_emails", mcp_args={"query": "acme pricing", "security_risk": "LOW"})
    offered = run_office_task(tmp_path, "openhands", responder, lambda server: {
        "api": "openai", "base_url": server.base_url, "default": "fake-model"}, DROP, "/v1/chat/completions")
    assert len(responder.called) == 1 and responder.called[0].endswith("search_emails"), responder.called
    assert offered and all(not any(n.endswith("purge_mailbox") for n in names) for names in offered)  # RBAC
    # log_activity has an argument named `kind`, which OpenHands cannot hold: offered renamed, not dropped
    assert all(any(n.endswith("log_activity") for n in names) for names in offered), offered
