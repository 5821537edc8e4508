"""The `gemini` agent (agentenv_local.agents.cli_agents.gemini) driving the real Gemini CLI against the fake model
server's Gemini API: a turn's stream-json events become trajectory events (the shell call, an MCP call of the echo
env), a second turn of the context resumes the CLI's session, cancelling a turn leaves no process, and without
a model the run stops with one line; the reference's `gemini-smoke` task passes under `agentenv run`.

Gemini CLI refuses `$((6 * 7))` (the smoke task's command) as command substitution, so the fake model here
asks for `expr 6 '*' 7`: the agent, the CLI and the verifier's "42" are the same."""

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
    record_started,
    run_office_task,
    run_reference_smoke,
    sleepers_under,
    smoke_bundle_of,
    smoke_fails_without_model,
    tool_calls,
    turn_request,
)
from shell_responder import ShellResponder

from agentenv_local.agents.cli_agents.gemini import GeminiAgent
from agentenv_local.agents.types import text_of
from agentenv_local.testing.fake_models import FakeModelServer, Reply

EXPR = "expr 6 '*' 7"
MODEL = "gemini-2.5-flash"


def model_config(server: FakeModelServer, workdir: Path) -> dict[str, Any]:
    return {"base_url": server.root_url, "api_key": MODEL_KEY, "model": MODEL, "workspace": str(workdir)}


def test_a_turn_records_the_shell_call_live_and_its_output(workdir: Path) -> None:
    cli_path("gemini", "gemini")
    agent = GeminiAgent()
    with FakeModelServer(api_key=MODEL_KEY, responder=ShellResponder(command=EXPR)) as server:
        req = turn_request(agent, "Compute 6 * 7 with your shell tool.", "ctx-1", "t-1",
                           **model_config(server, workdir))
        result = asyncio.run(agent.run(req))
        problems = [r.problems for r in server.requests if r.problems]
    assert result.error is None, (result, req.trajectory.events())
    assert "42" in text_of(result.parts) and not problems
    events = req.trajectory.events()
    kinds = [e["type"] for e in events]
    assert kinds.index("tool_use") < kinds.index("tool_call") < kinds.index("final")  # the call before its result
    [call] = [e for e in events if e["type"] == "tool_call"]
    assert (call["name"], call["args"], call["result"].strip(), call["is_error"], call["server"]) == \
        ("run_shell_command", {"command": EXPR}, "42", False, None)
    final = events[-1]
    assert final["type"] == "final" and "42" in final["text"] and final["usage"]["output_tokens"] > 0
    assert result.usage.tool_call_count == 1 and result.usage.provider_details["session_id"]
    assert result.usage.input_tokens and result.usage.total_tokens
    assert MODEL_KEY not in json.dumps(events)


def test_an_mcp_tool_of_the_env_is_called_and_routed_to_its_server(workdir: Path, echo_mcp_url: str) -> None:
    cli_path("gemini", "gemini")
    agent = GeminiAgent()
    responder = ShellResponder(mcp_tool="echo", mcp_args={"text": "hello from the fake model"})
    with FakeModelServer(api_key=MODEL_KEY, responder=responder) as server:
        req = turn_request(agent, "Say hello with the echo tool.", "ctx-m", "t-m", mcp={"echo": {"url": echo_mcp_url}},
                      **model_config(server, workdir))
        result = asyncio.run(agent.run(req))
    assert result.error is None, (result, req.trajectory.events())
    [call] = [e for e in req.trajectory.events() if e["type"] == "tool_call"]
    assert (call["server"], call["tool"], call["is_error"]) == ("echo", "echo", False), call
    assert "hello from the fake model" in call["result"] and "hello from the fake model" in text_of(result.parts)


def test_a_second_turn_resumes_the_session(workdir: Path) -> None:
    # a first turn without tools: Gemini CLI 0.61.0 resends a tool's function response twice on --resume,
    # which the API (and the fake) refuses (see test_cli_gemini.py)
    cli_path("gemini", "gemini")
    agent = GeminiAgent()
    with FakeModelServer(api_key=MODEL_KEY, script=[Reply(text="Noted: the number is 42.")]) as server:
        first = turn_request(agent, "Remember the number 42.", "ctx-r", "t-1", **model_config(server, workdir))
        result = asyncio.run(agent.run(first))
        assert result.error is None, (result, first.trajectory.events())
        session = result.usage.provider_details["session_id"]
        server.reset([Reply(text="It was 42.")])
        second = turn_request(agent, "What was the number?", "ctx-r", "t-2", **model_config(server, workdir))
        again = asyncio.run(agent.run(second))
        turns = [r for r in server.requests if r.valid and r.tools]
    assert again.error is None, (again, second.trajectory.events())
    assert next(e for e in second.trajectory.events() if e["type"] == "turn")["resume_session"] == session
    history = json.dumps(turns[-1].messages)
    assert "Remember the number 42." in history and "Noted: the number is 42." in history
    assert text_of(again.parts) == "It was 42." and again.usage.provider_details["session_id"] == session


def test_cancelling_a_turn_leaves_no_process(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cli_path("gemini", "gemini")
    started = record_started(monkeypatch)
    agent = GeminiAgent()
    waits = LongCommandResponder("run_shell_command", command=LONG_COMMAND)
    with FakeModelServer(api_key=MODEL_KEY, responder=waits) as server:
        req = turn_request(agent, "Wait for a long time.", "ctx-c", "t-c", **model_config(server, workdir))
        before = cancel_a_running_turn(agent, req, started, sleepers_under)
    assert before
    assert_no_process_left(before, group=started[0])
    assert any(e["type"] == "tool_use" and e["name"] == "run_shell_command" for e in req.trajectory.events())


def test_no_model_endpoint_is_one_line_naming_the_model_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert_no_model_is_one_line(GeminiAgent(), monkeypatch)


# --- the reference's gemini-smoke task under `agentenv run` ---------------------------------------------------------

DROP = ("GEMINI_", "GOOGLE_")


@pytest.fixture
def smoke_bundle(tmp_path: Path) -> Path:
    """The reference's `agents` bundle with its gemini task only, and a project folder next to it."""
    return smoke_bundle_of(tmp_path, "gemini")


def test_the_smoke_task_passes_and_its_trajectory_shows_the_shell_call(smoke_bundle: Path) -> None:
    cli_path("gemini", "gemini")
    trajectory = run_reference_smoke(smoke_bundle, "gemini", ShellResponder(command=EXPR), lambda server: {
        "base_url": server.root_url, "default": MODEL}, DROP)
    assert [(c["name"], c["args"]["command"], c["result"].strip()) for c in tool_calls(trajectory)] == \
        [("run_shell_command", EXPR, "42")]


def test_without_a_model_the_run_stops_with_one_line(smoke_bundle: Path) -> None:
    smoke_fails_without_model(smoke_bundle, "gemini", DROP)


def test_gemini_calls_an_office_tool_through_the_gateway_under_a_role(tmp_path: Path) -> None:
    cli_path("gemini", "gemini")
    responder = ShellResponder(mcp_tool="search_emails", mcp_args={"query": "acme pricing"})
    offered = run_office_task(tmp_path, "gemini", responder, lambda server: {
        "base_url": server.root_url, "default": MODEL}, DROP, f"/v1beta/models/{MODEL}:streamGenerateContent")
    assert len(responder.called) == 1 and responder.called[0].endswith("search_emails"), responder.called
    assert offered and all(not any(n.endswith("purge_mailbox") for n in names) for names in offered)  # RBAC
