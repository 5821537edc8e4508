"""The `codex` agent (agentenv_local.agents.cli_agents.codex) driving the real Codex CLI against the fake model
server's Responses API: a turn's events become trajectory events (the shell call live, then its output 42), a
second turn of the context resumes the CLI's thread, an MCP server registered on the agent is called over
streamable HTTP, cancelling a turn leaves no process, no model is one clear line; and the reference's
codex-smoke task passes under `agentenv run` with the key in no stored byte."""

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
    sleepers_under,
    smoke_bundle_of,
    smoke_fails_without_model,
    tool_calls,
    turn_request,
)
from shell_responder import COMMAND, ShellResponder

from agentenv_local.agents.cli_agents import harness
from agentenv_local.agents.cli_agents.codex import CodexAgent
from agentenv_local.agents.types import TaskResult, TextPart
from agentenv_local.testing.fake_models import FakeModelServer


def answer(result: TaskResult) -> str:
    part = result.parts[0]
    assert isinstance(part, TextPart), result
    return part.text


def model_config(server: FakeModelServer, workdir: Path) -> dict[str, Any]:
    return {"base_url": server.base_url, "api": "openai", "api_key": MODEL_KEY, "model": "gpt-5-codex",
            "workspace": str(workdir)}


def test_a_turn_records_the_shell_call_and_a_second_turn_resumes_the_thread(workdir: Path) -> None:
    cli_path("codex", "codex")
    agent = CodexAgent()
    with FakeModelServer(api_key=MODEL_KEY, responder=ShellResponder()) as server:
        first = turn_request(agent, f"Run {COMMAND} and reply with the number.", "ctx-1", "t-1",
                        **model_config(server, workdir))
        result = asyncio.run(agent.run(first))
        assert result.error is None, (result, first.trajectory.events())
        assert "42" in answer(result)
        events = first.trajectory.events()
        calls = [e for e in events if e["type"] == "tool_call"]
        assert len(calls) == 1 and COMMAND in calls[0]["args"]["command"], events
        assert calls[0]["result"].strip() == "42" and calls[0]["is_error"] is False
        kinds = [e["type"] for e in events]
        assert kinds.index("tool_use") < kinds.index("tool_call") < kinds.index("final")  # the call seen live
        final = [e for e in events if e["type"] == "final"][-1]
        assert "42" in final["text"] and final["usage"]["output_tokens"] > 0
        thread = result.usage.provider_details["session_id"]
        assert thread and result.usage.tool_call_count == 1
        assert MODEL_KEY not in json.dumps(events)
        assert MODEL_KEY not in (agent.codex_home() / "config.toml").read_text()  # the key is in no file
        turns = [r for r in server.requests if r.path == "/v1/responses"]
        assert turns and all(r.valid and r.headers.get("authorization") == f"Bearer {MODEL_KEY}" for r in turns)

        second_turn_resumes(agent, server, model_config(server, workdir), thread,
                            lambda r: r.path == "/v1/responses" and r.valid)


def test_a_registered_mcp_server_is_called_over_http(workdir: Path, echo_mcp_url: str) -> None:
    cli_path("codex", "codex")
    agent = CodexAgent()
    responder = ShellResponder(mcp_tool=".echo", mcp_args={"text": "hello from the fake model"})
    mcp = {"echo": {"url": echo_mcp_url, "headers": {"AgentEnv-Role": "agent"}}}
    with FakeModelServer(api_key=MODEL_KEY, responder=responder) as server:
        req = turn_request(agent, "Say hello with the echo tool", "ctx-m", "t-m", **model_config(server, workdir))
        req = req.model_copy(update={"mcp_servers": mcp})
        result = asyncio.run(agent.run(req))
    assert result.error is None, (result, req.trajectory.events())
    [call] = [e for e in req.trajectory.events() if e["type"] == "tool_call"]
    assert (call["server"], call["tool"], call["args"], call["is_error"]) == \
        ("echo", "echo", {"text": "hello from the fake model"}, False)
    assert "hello from the fake model" in call["result"]
    assert "hello from the fake model" in answer(result)


def test_cancelling_a_turn_leaves_no_process(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cli_path("codex", "codex")
    started = record_started(monkeypatch)
    agent = CodexAgent()

    def seen_and_running(cli: int, events: list[dict]) -> bool:  # the call read live, before any result
        return any(e["type"] == "tool_use" for e in events) and bool(sleepers_under(cli))

    def tree(cli: int) -> list[int]:
        pids = [cli, *harness.descendants(cli)]
        assert any(is_sleep(pid) for pid in pids)
        return pids

    waits = LongCommandResponder("exec_command", cmd=LONG_COMMAND, yield_time_ms=600000)
    with FakeModelServer(api_key=MODEL_KEY, responder=waits) as server:
        req = turn_request(agent, "Wait for a long time.", "ctx-c", "t-c", **model_config(server, workdir))
        before = cancel_a_running_turn(agent, req, started, tree, ready=seen_and_running)
    assert_no_process_left(before)
    events = req.trajectory.events()
    assert any(e["type"] == "tool_use" and LONG_COMMAND in e["args"]["command"] for e in events), events


def test_no_model_endpoint_or_name_is_one_line_naming_the_model_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    agent = CodexAgent()
    assert_no_model_is_one_line(agent, monkeypatch)
    unnamed = assert_no_model_is_one_line(agent, monkeypatch, "t-o", base_url="http://127.0.0.1:9/v1")
    assert "[model] default" in unnamed


def test_a_missing_cli_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    message = missing_cli_error(CodexAgent(), tmp_path, monkeypatch, base_url="http://127.0.0.1:9/v1")
    assert "@openai/codex" in message


# --- the reference's codex-smoke task under `agentenv run` ---------------------------------------------------

DROP = ("OPENAI_",)


@pytest.fixture
def smoke_bundle(tmp_path: Path) -> Path:
    return smoke_bundle_of(tmp_path, "codex")


def test_the_smoke_task_passes_and_records_the_shell_call(smoke_bundle: Path) -> None:
    cli_path("codex", "codex")
    trajectory = run_reference_smoke(smoke_bundle, "codex", ShellResponder(), lambda server: {
        "api": "openai", "base_url": server.base_url, "default": "gpt-5-codex"}, DROP)
    calls = tool_calls(trajectory)
    assert [(c["name"], c["result"].strip()) for c in calls] == [("command_execution", "42")]
    assert COMMAND in calls[0]["args"]["command"]


def test_without_a_model_the_run_fails_with_one_line(smoke_bundle: Path) -> None:
    smoke_fails_without_model(smoke_bundle, "codex", DROP)


def test_codex_calls_an_office_tool_through_the_gateway_under_a_role(tmp_path: Path) -> None:
    cli_path("codex", "codex")
    responder = ShellResponder(mcp_tool=".search_emails", mcp_args={"query": "acme pricing"})
    offered = run_office_task(tmp_path, "codex", responder, lambda server: {
        "api": "openai", "base_url": server.base_url, "default": "gpt-5-codex"}, DROP, "/v1/responses")
    assert len(responder.called) == 1 and responder.called[0].endswith("search_emails"), responder.called
    assert offered and all(not any(n.endswith("purge_mailbox") for n in names) for names in offered)  # RBAC
