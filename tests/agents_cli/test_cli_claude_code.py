"""Claude Code (`claude -p`, stream-json) against the fake model server's Anthropic Messages API with SSE
streaming: a shell tool call whose output 42 comes back in the final text, an MCP tool of the echo env over
streamable HTTP, and a second turn resumed from the first's session."""

from __future__ import annotations

import json
from pathlib import Path

from agent_cli_kit import MODEL_KEY, clean_env, cli_path, explain, json_lines, run_cli
from shell_responder import COMMAND, ShellResponder

from agentenv_local.testing.fake_models import FakeModelServer


def claude_env(home: Path, server: FakeModelServer) -> dict[str, str]:
    # Telemetry, error reports, the auto-updater and other non-essential traffic off: no network here.
    return clean_env(home, ANTHROPIC_BASE_URL=server.root_url, ANTHROPIC_API_KEY=MODEL_KEY,
                     CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_TELEMETRY="1",
                     DISABLE_ERROR_REPORTING="1", DISABLE_AUTOUPDATER="1",
                     # MCP tools offered to the model directly, not deferred behind its ToolSearch tool
                     ENABLE_TOOL_SEARCH="false")


def claude_argv(prompt: str, *extra: str) -> list[str]:
    # --dangerously-skip-permissions refuses to run as root, so the tools the run needs are allowed by name
    return [str(cli_path("claude-code", "claude")), "-p", prompt, "--output-format", "stream-json", "--verbose",
            "--model", "claude-sonnet-4-5", *extra]


def tool_uses(events: list[dict]) -> list[dict]:
    return [b for e in events if e.get("type") == "assistant"
            for b in e["message"]["content"] if b.get("type") == "tool_use"]


def tool_results(events: list[dict]) -> list[dict]:
    return [b for e in events if e.get("type") == "user" and isinstance(e["message"]["content"], list)
            for b in e["message"]["content"] if b.get("type") == "tool_result"]


def test_claude_runs_a_shell_command_through_the_fake_model(home: Path, workdir: Path) -> None:
    with FakeModelServer(api_key=MODEL_KEY, responder=ShellResponder()) as server:
        proc = run_cli(claude_argv(f"Run {COMMAND} with your shell tool", "--allowedTools", "Bash"),
                       env=claude_env(home, server), cwd=workdir)
        events = json_lines(proc.stdout)
        assert proc.returncode == 0, explain(proc, server)
        assert [u["name"] for u in tool_uses(events)] == ["Bash"], explain(proc, server)
        assert tool_uses(events)[0]["input"] == {"command": COMMAND}
        assert tool_results(events)[0]["content"].strip() == "42" and not tool_results(events)[0]["is_error"]
        result = [e for e in events if e.get("type") == "result"][-1]
        assert result["subtype"] == "success" and "42" in result["result"], result
        turns = [r for r in server.requests if r.path == "/v1/messages"]
        assert turns and all(r.body.get("stream") is True for r in turns if r.valid)
        # every request the CLI made was one the real API takes (no 400 it had to retry around)
        assert all(not r.problems for r in server.requests), explain(proc, server)


def test_claude_calls_an_mcp_tool_over_http(home: Path, workdir: Path, echo_mcp_url: str) -> None:
    config = json.dumps({"mcpServers": {"echo": {"type": "http", "url": echo_mcp_url}}})
    responder = ShellResponder(mcp_tool="__echo", mcp_args={"text": "hello from the fake model"})
    with FakeModelServer(api_key=MODEL_KEY, responder=responder) as server:
        proc = run_cli(claude_argv("Say hello with the echo tool", "--mcp-config", config, "--strict-mcp-config",
                                   "--allowedTools", "mcp__echo__echo"), env=claude_env(home, server), cwd=workdir)
        events = json_lines(proc.stdout)
        assert proc.returncode == 0, explain(proc, server)
        init = next(e for e in events if e.get("subtype") == "init")
        assert [(m["name"], m["status"]) for m in init["mcp_servers"]] == [("echo", "connected")]
        assert [u["name"] for u in tool_uses(events)] == ["mcp__echo__echo"]
        assert "hello from the fake model" in json.dumps(tool_results(events)[0]["content"])
        assert "hello from the fake model" in events[-1]["result"]


def test_claude_resumes_a_session_in_a_second_turn(home: Path, workdir: Path) -> None:
    with FakeModelServer(api_key=MODEL_KEY, responder=ShellResponder()) as server:
        env = claude_env(home, server)
        first = run_cli(claude_argv(f"Run {COMMAND}", "--allowedTools", "Bash"), env=env, cwd=workdir)
        assert first.returncode == 0, explain(first, server)
        session = json_lines(first.stdout)[-1]["session_id"]
        server.reset()
        second = run_cli(claude_argv("What did it print?", "--resume", session), env=env, cwd=workdir)
        assert second.returncode == 0, explain(second, server)
        turn = [r for r in server.requests if r.path == "/v1/messages" and r.valid][-1]
        history = json.dumps(turn.messages)
        assert COMMAND in history and "42" in history and "What did it print?" in history
        assert json_lines(second.stdout)[-1]["session_id"] == session


