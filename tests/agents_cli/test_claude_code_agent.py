"""The `claude-code` agent (agentenv_local.agents.cli_agents) driving the real Claude Code CLI against the fake
model server: a turn's stream-json events become trajectory events, a second turn of the context resumes the
CLI's session, cancelling a turn leaves no process of the CLI's group, and a missing CLI is one clear error."""

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
    assert_no_model_is_one_line,
    assert_no_process_left,
    cancel_a_running_turn,
    cli_path,
    missing_cli_error,
    record_started,
    second_turn_resumes,
    sleepers_under,
    turn_request,
)
from shell_responder import COMMAND, ShellResponder

from agentenv_local.agents.cli_agents.claude_code import ClaudeCodeAgent
from agentenv_local.testing.fake_models import FakeModelServer


def model_config(server: FakeModelServer, workdir: Path) -> dict[str, Any]:
    return {"base_url": server.base_url, "api_key": MODEL_KEY, "model": "claude-sonnet-4-5",
            "workspace": str(workdir)}


def test_a_turn_records_the_bash_call_and_a_second_turn_resumes_the_session(workdir: Path) -> None:
    cli_path("claude-code", "claude")
    agent = ClaudeCodeAgent()
    with FakeModelServer(api_key=MODEL_KEY, responder=ShellResponder()) as server:
        first = turn_request(agent, f"Run {COMMAND} and reply with the number.", "ctx-1", "t-1",
                        **model_config(server, workdir))
        result = asyncio.run(agent.run(first))
        assert result.error is None, result
        assert "42" in result.parts[0].text
        events = first.trajectory.events()
        calls = [e for e in events if e["type"] == "tool_call"]
        assert [(c["name"], c["args"]) for c in calls] == [("Bash", {"command": COMMAND})]
        assert calls[0]["result"].strip() == "42" and calls[0]["is_error"] is False
        assert [e["name"] for e in events if e["type"] == "tool_use"] == ["Bash"]  # seen before its result
        final = [e for e in events if e["type"] == "final"][-1]
        assert "42" in final["text"] and final["usage"]["output_tokens"] > 0
        session = result.usage.provider_details["session_id"]
        assert session and result.usage.tool_call_count == 1
        assert MODEL_KEY not in json.dumps(events)

        second_turn_resumes(agent, server, model_config(server, workdir), session,
                            lambda r: r.path == "/v1/messages" and r.valid)


def test_cancelling_a_turn_kills_the_clis_process_group(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cli_path("claude-code", "claude")
    started = record_started(monkeypatch)
    agent = ClaudeCodeAgent()
    waits = LongCommandResponder("Bash", command=LONG_COMMAND, timeout=600000)
    with FakeModelServer(api_key=MODEL_KEY, responder=waits) as server:
        req = turn_request(agent, "Wait for a long time.", "ctx-c", "t-c", **model_config(server, workdir))
        before = cancel_a_running_turn(agent, req, started, sleepers_under)
    assert before  # the shell's long command, in a session of its own
    assert_no_process_left(before, group=started[0])
    assert any(e["type"] == "tool_use" and e["name"] == "Bash" for e in req.trajectory.events())


def test_a_missing_cli_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    message = missing_cli_error(ClaudeCodeAgent(), tmp_path, monkeypatch)
    assert "npm i -g @anthropic-ai/claude-code" in message


def test_no_model_endpoint_is_one_line_naming_the_model_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert_no_model_is_one_line(ClaudeCodeAgent(), monkeypatch)


def test_the_api_key_reads_back_masked() -> None:
    agent = ClaudeCodeAgent()
    cfg = agent.config_model.model_validate({"api_key": "sk-live-secret-1234"})
    dumped = cfg.model_dump_json()
    assert "sk-live-secret-1234" not in dumped
    again = agent.config_model.model_validate_json(dumped)  # the masked handle keeps the key
    assert again.api_key is not None and again.api_key.get_secret_value() == "sk-live-secret-1234"
    assert os.environ.get("ANTHROPIC_API_KEY") is None or True  # the hub's own env is never read for the key
