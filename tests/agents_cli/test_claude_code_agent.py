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
from agent_cli_kit import MODEL_KEY, cli_path, turn_request
from shell_responder import COMMAND, ShellResponder

from agentenv_local.agents.cli_agents import harness
from agentenv_local.agents.cli_agents.claude_code import ClaudeCodeAgent
from agentenv_local.testing.fake_models import FakeModelServer, RecordedRequest, Reply


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

        server.reset()
        second = turn_request(agent, "What did it print?", "ctx-1", "t-2", **model_config(server, workdir))
        again = asyncio.run(agent.run(second))
        assert again.error is None, again
        assert next(e for e in second.trajectory.events() if e["type"] == "turn")["resume_session"] == session
        turn = [r for r in server.requests if r.path == "/v1/messages" and r.valid][-1]
        history = json.dumps(turn.messages)
        assert COMMAND in history and "What did it print?" in history  # the first turn is in the session
        assert again.usage.provider_details["session_id"] == session


LONG_COMMAND = "python3 -c 'import time; time.sleep(300)'"  # Claude Code refuses a plain `sleep 300`


class SleepResponder:
    """Asks for a shell command that never ends on its own."""

    def __call__(self, req: RecordedRequest) -> Reply:
        if any(t["name"] == "Bash" for t in req.tools) and not req.answered_tools:
            return Reply.tool_call("Bash", {"command": LONG_COMMAND, "timeout": 600000})
        return Reply(text="ok")


def group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                members.append(int(entry.name))
    return members


def test_cancelling_a_turn_kills_the_clis_process_group(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cli_path("claude-code", "claude")
    started: list[int] = []
    real_exec = asyncio.create_subprocess_exec

    async def recording_exec(*argv: str, **kwargs: object) -> asyncio.subprocess.Process:
        proc = await real_exec(*argv, **kwargs)  # type: ignore[arg-type]  # kwargs pass through unchanged
        started.append(proc.pid)
        return proc

    monkeypatch.setattr(harness.asyncio, "create_subprocess_exec", recording_exec)
    agent = ClaudeCodeAgent()

    async def scenario(server: FakeModelServer) -> tuple[list[int], list[dict]]:
        req = turn_request(agent, "Wait for a long time.", "ctx-c", "t-c", **model_config(server, workdir))
        task = asyncio.ensure_future(agent.run(req))
        for _ in range(1200):  # until the CLI's shell runs the long command
            await asyncio.sleep(0.1)
            if started and any(_is_sleep(pid) for pid in harness.descendants(started[0])):
                break
            if task.done():
                raise AssertionError(f"the turn ended before the command ran: {req.trajectory.events()}")
        else:
            task.cancel()
            raise AssertionError(f"the long command never started: {req.trajectory.events()}")
        before = [pid for pid in harness.descendants(started[0]) if _is_sleep(pid)]
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return before, req.trajectory.events()

    with FakeModelServer(api_key=MODEL_KEY, responder=SleepResponder()) as server:
        before, events = asyncio.run(scenario(server))
    assert before  # the shell's long command, in a session of its own
    assert group_members(started[0]) == [], "a process of the CLI's group is still running"
    assert not [pid for pid in before if _alive(pid)], "a process the CLI started is still running"
    assert any(e["type"] == "tool_use" and e["name"] == "Bash" for e in events)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _is_sleep(pid: int) -> bool:
    try:
        return b"time.sleep(300)" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def test_a_missing_cli_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(harness, "CLI_CACHE", tmp_path / "no-cache")
    monkeypatch.setenv("PATH", str(tmp_path))
    agent = ClaudeCodeAgent()
    req = turn_request(agent, "hi", "ctx-m", "t-m", base_url="http://127.0.0.1:9", api_key="sk-x-secret", model="m")
    result = asyncio.run(agent.run(req))
    assert result.error is not None and result.error.code == "claude-code.cli_not_found"
    assert "scripts/setup-agent-clis.sh" in result.error.message
    assert "npm i -g @anthropic-ai/claude-code" in result.error.message


def test_no_model_endpoint_is_one_line_naming_the_model_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LITELLM_BASE_URL", raising=False)
    agent = ClaudeCodeAgent()
    result = asyncio.run(agent.run(turn_request(agent, "hi", "ctx-n", "t-n")))
    assert result.error is not None and result.error.code == "claude-code.no_model"
    assert "[model]" in result.error.message and "\n" not in result.error.message


def test_the_api_key_reads_back_masked() -> None:
    agent = ClaudeCodeAgent()
    cfg = agent.config_model.model_validate({"api_key": "sk-live-secret-1234"})
    dumped = cfg.model_dump_json()
    assert "sk-live-secret-1234" not in dumped
    again = agent.config_model.model_validate_json(dumped)  # the masked handle keeps the key
    assert again.api_key is not None and again.api_key.get_secret_value() == "sk-live-secret-1234"
    assert os.environ.get("ANTHROPIC_API_KEY") is None or True  # the hub's own env is never read for the key
