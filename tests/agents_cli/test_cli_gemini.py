"""Gemini CLI (`gemini -p --output-format stream-json`) against the fake model server's Gemini API
(`streamGenerateContent?alt=sse`, pointed there by GOOGLE_GEMINI_BASE_URL): a shell command whose output 42
comes back in the final text, an MCP tool of the echo env (`httpUrl` in settings.json), and `--resume ID`.

Gemini CLI refuses any command holding `$(` (it takes `$((6 * 7))` for command substitution and answers
"Blocked: command substitution detected"), so its shell run computes 6 * 7 with `expr` instead."""

from __future__ import annotations

import json
from pathlib import Path

from agent_cli_kit import MODEL_KEY, clean_env, cli_path, explain, json_lines, run_cli
from shell_responder import COMMAND, ShellResponder

from agentenv_local.testing.fake_models import FakeModelServer, Reply

EXPR = "expr 6 '*' 7"


def gemini_run(home: Path, workdir: Path, server: FakeModelServer, *args: str, mcp_url: str | None = None):
    settings: dict = {"security": {"auth": {"selectedType": "gemini-api-key"}},
                      "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
                      "general": {"disableAutoUpdate": True, "disableUpdateNag": True}}
    if mcp_url:
        settings["mcpServers"] = {"echo": {"httpUrl": mcp_url, "trust": True}}
    (home / ".gemini").mkdir(exist_ok=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    env = clean_env(home, GOOGLE_GEMINI_BASE_URL=server.root_url, GEMINI_API_KEY=MODEL_KEY)
    # --yolo approves the tools; --skip-trust: the test's work dir is not a trusted folder otherwise
    argv = [cli_path("gemini", "gemini"), "--output-format", "stream-json", "--yolo", "--skip-trust",
            "-m", "gemini-2.5-flash", *args]
    return run_cli([str(a) for a in argv], env=env, cwd=workdir)


def final_text(events: list[dict]) -> str:
    return "".join(e["content"] for e in events if e.get("type") == "message" and e.get("role") == "assistant")


def test_gemini_runs_a_shell_command_through_stream_generate_content(home: Path, workdir: Path) -> None:
    with FakeModelServer(api_key=MODEL_KEY, responder=ShellResponder(command=EXPR)) as server:
        proc = gemini_run(home, workdir, server, "-p", "Compute 6 * 7 with your shell tool")
        events = json_lines(proc.stdout)
        assert proc.returncode == 0, explain(proc, server)
        uses = [e for e in events if e.get("type") == "tool_use"]
        results = [e for e in events if e.get("type") == "tool_result"]
        assert [(u["tool_name"], u["parameters"]["command"]) for u in uses] == [("run_shell_command", EXPR)]
        assert results[0]["status"] == "success" and results[0]["output"].strip() == "42", results
        assert "42" in final_text(events) and events[-1]["status"] == "success"
        turns = [r for r in server.requests if r.api == "gemini"]
        assert turns and all(r.query == "alt=sse" and not r.problems for r in turns), explain(proc, server)


def test_gemini_blocks_arithmetic_expansion_as_command_substitution(home: Path, workdir: Path) -> None:
    # a finding the harness must know: the reference's smoke command cannot run in Gemini CLI as it is
    with FakeModelServer(api_key=MODEL_KEY, responder=ShellResponder()) as server:
        proc = gemini_run(home, workdir, server, "-p", f"Run {COMMAND}")
        results = [e for e in json_lines(proc.stdout) if e.get("type") == "tool_result"]
        assert proc.returncode == 0, explain(proc, server)
        assert results[0]["output"] == "Blocked: command substitution detected in shell command."


def test_gemini_calls_an_mcp_tool_over_http(home: Path, workdir: Path, echo_mcp_url: str) -> None:
    responder = ShellResponder(mcp_tool="echo", mcp_args={"text": "hello from the fake model"})
    with FakeModelServer(api_key=MODEL_KEY, responder=responder) as server:
        proc = gemini_run(home, workdir, server, "-p", "Say hello with the echo tool", mcp_url=echo_mcp_url)
        events = json_lines(proc.stdout)
        assert proc.returncode == 0, explain(proc, server)
        uses = [e for e in events if e.get("type") == "tool_use"]
        results = [e for e in events if e.get("type") == "tool_result"]
        assert len(uses) == 1 and uses[0]["tool_name"].endswith("echo"), events
        assert results[0]["status"] == "success" and "hello from the fake model" in json.dumps(results[0])
        assert "hello from the fake model" in final_text(events)


def test_gemini_resumes_a_session(home: Path, workdir: Path) -> None:
    # a first turn without tools: after a tool call, Gemini CLI 0.61.0 resends the function response twice
    # on --resume (two functionResponse parts for one functionCall), which the API refuses
    with FakeModelServer(api_key=MODEL_KEY, script=[Reply(text="Noted: the number is 42.")]) as server:
        first = gemini_run(home, workdir, server, "-p", "Remember the number 42")
        assert first.returncode == 0, explain(first, server)
        session = json_lines(first.stdout)[0]["session_id"]
        server.reset([Reply(text="It was 42.")])
        second = gemini_run(home, workdir, server, "--resume", session, "-p", "What was the number?")
        assert second.returncode == 0, explain(second, server)
        history = json.dumps([r.messages for r in server.requests if r.valid and r.tools][-1])
        assert "Remember the number 42" in history and "Noted: the number is 42." in history
        assert "What was the number?" in history and "It was 42." in final_text(json_lines(second.stdout))
