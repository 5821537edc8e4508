"""Codex (`codex exec --json`) against the fake model server's Responses API with streaming (a
`model_provider` with `wire_api = "responses"`): a shell command whose output 42 comes back in the final
message, an MCP tool of the echo env over streamable HTTP, and `codex exec resume` continuing a thread."""

from __future__ import annotations

import json
from pathlib import Path

from agent_cli_kit import MODEL_KEY, clean_env, cli_path, explain, json_lines, run_cli
from shell_responder import COMMAND, ShellResponder

from agentenv_local.testing.fake_models import FakeModelServer


def codex_home(home: Path, server: FakeModelServer, mcp_url: str | None = None) -> Path:
    """CODEX_HOME with a config.toml naming the fake server as the model provider (the key from an env var)."""
    path = home / ".codex"
    path.mkdir(parents=True, exist_ok=True)
    config = f'''model = "gpt-5-codex"
model_provider = "fake"
check_for_update_on_startup = false

[analytics]
enabled = false

[model_providers.fake]
name = "fake"
base_url = "{server.base_url}"
env_key = "FAKE_MODEL_KEY"
wire_api = "responses"
'''
    if mcp_url:
        config += f'\n[mcp_servers.echo]\nurl = "{mcp_url}"\n'
    (path / "config.toml").write_text(config)
    return path


def codex_run(home: Path, workdir: Path, server: FakeModelServer, *args: str, mcp_url: str | None = None):
    env = clean_env(home, CODEX_HOME=str(codex_home(home, server, mcp_url)), FAKE_MODEL_KEY=MODEL_KEY)
    # the sandbox (Landlock/seccomp) and approvals off: the test's tmp dir is the sandbox here
    argv = [cli_path("codex", "codex"), "exec", "--json", "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox", *args]
    return run_cli([str(a) for a in argv], env=env, cwd=workdir)


def items(events: list[dict], kind: str) -> list[dict]:
    return [e["item"] for e in events if e.get("type") == "item.completed" and e["item"].get("type") == kind]


def test_codex_runs_a_shell_command_through_the_responses_api(home: Path, workdir: Path) -> None:
    with FakeModelServer(api_key=MODEL_KEY, responder=ShellResponder()) as server:
        proc = codex_run(home, workdir, server, f"Run {COMMAND} with your shell tool")
        events = json_lines(proc.stdout)
        assert proc.returncode == 0, explain(proc, server)
        commands = items(events, "command_execution")
        assert len(commands) == 1 and COMMAND in commands[0]["command"], explain(proc, server)
        assert commands[0]["aggregated_output"].strip() == "42" and commands[0]["exit_code"] == 0
        assert "42" in items(events, "agent_message")[-1]["text"]
        assert events[-1]["type"] == "turn.completed"
        turns = [r for r in server.requests if r.path == "/v1/responses"]
        assert turns and all(r.body.get("stream") is True and not r.problems for r in turns), explain(proc, server)
        assert json.loads(turns[0].headers["x-codex-turn-metadata"])["analytics_enabled"] is False


def test_codex_calls_an_mcp_tool_over_http(home: Path, workdir: Path, echo_mcp_url: str) -> None:
    responder = ShellResponder(mcp_tool=".echo", mcp_args={"text": "hello from the fake model"})
    with FakeModelServer(api_key=MODEL_KEY, responder=responder) as server:
        proc = codex_run(home, workdir, server, "Say hello with the echo tool", mcp_url=echo_mcp_url)
        events = json_lines(proc.stdout)
        assert proc.returncode == 0, explain(proc, server)
        calls = items(events, "mcp_tool_call")
        assert len(calls) == 1 and calls[0]["server"] == "echo" and calls[0]["tool"] == "echo", events
        assert "hello from the fake model" in json.dumps(calls[0]["result"])
        assert "hello from the fake model" in items(events, "agent_message")[-1]["text"]


def test_codex_resumes_a_thread(home: Path, workdir: Path) -> None:
    with FakeModelServer(api_key=MODEL_KEY, responder=ShellResponder()) as server:
        first = codex_run(home, workdir, server, f"Run {COMMAND}")
        assert first.returncode == 0, explain(first, server)
        thread = json_lines(first.stdout)[0]["thread_id"]
        server.reset()
        second = codex_run(home, workdir, server, "resume", thread, "What did it print?")
        assert second.returncode == 0, explain(second, server)
        assert json_lines(second.stdout)[0] == {"type": "thread.started", "thread_id": thread}
        turn = [r for r in server.requests if r.path == "/v1/responses" and r.valid][-1]
        history = json.dumps(turn.messages)
        assert "echo $((6 * 7))" in history and "What did it print?" in history
