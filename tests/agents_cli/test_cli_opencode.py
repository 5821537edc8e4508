"""opencode (`opencode run --format json`) against the fake model server's Anthropic Messages API with
streaming (its built-in `anthropic` provider, `options.baseURL` pointed at the fake): a bash tool call
whose output 42 comes back in the final text, an MCP tool of the echo env (a `remote` MCP server), and
`--session` continuing a session."""

from __future__ import annotations

import json
from pathlib import Path

from agent_cli_kit import MODEL_KEY, clean_env, cli_path, explain, json_lines, run_cli
from shell_responder import COMMAND, ShellResponder

from agentenv_local.testing.fake_models import FakeModelServer


def opencode_run(home: Path, workdir: Path, server: FakeModelServer, *args: str, mcp_url: str | None = None):
    config: dict = {"$schema": "https://opencode.ai/config.json", "autoupdate": False, "share": "disabled",
                    "model": "anthropic/claude-sonnet-4-5",
                    "provider": {"anthropic": {"options": {"baseURL": server.base_url, "apiKey": MODEL_KEY}}}}
    if mcp_url:
        config["mcp"] = {"echo": {"type": "remote", "url": mcp_url, "enabled": True}}
    # no models.dev fetch, update check, LSP download, sharing or default plugins: no network here
    env = clean_env(home, OPENCODE_CONFIG_CONTENT=json.dumps(config), OPENCODE_DISABLE_AUTOUPDATE="1",
                    OPENCODE_DISABLE_MODELS_FETCH="1", OPENCODE_DISABLE_SHARE="1", OPENCODE_DISABLE_LSP_DOWNLOAD="1",
                    OPENCODE_DISABLE_DEFAULT_PLUGINS="1")
    argv = [cli_path("opencode", "opencode"), "run", "--format", "json", "--auto", *args]
    return run_cli([str(a) for a in argv], env=env, cwd=workdir)


def tool_parts(events: list[dict]) -> list[dict]:
    return [e["part"] for e in events if e.get("type") == "tool_use"]


def final_text(events: list[dict]) -> str:
    return [e["part"]["text"] for e in events if e.get("type") == "text"][-1]


def test_opencode_runs_a_shell_command_through_the_fake_model(home: Path, workdir: Path) -> None:
    with FakeModelServer(api_key=MODEL_KEY, responder=ShellResponder()) as server:
        proc = opencode_run(home, workdir, server, f"Run {COMMAND} with your shell tool")
        events = json_lines(proc.stdout)
        assert proc.returncode == 0, explain(proc, server)
        tools = tool_parts(events)
        assert [t["tool"] for t in tools] == ["bash"], explain(proc, server)
        assert tools[0]["state"]["input"]["command"] == COMMAND and tools[0]["state"]["status"] == "completed"
        assert tools[0]["state"]["output"].strip() == "42"
        assert "42" in final_text(events)
        assert all(not r.problems for r in server.requests), explain(proc, server)
        assert all(r.body.get("stream") is True for r in server.requests if r.path == "/v1/messages")


def test_opencode_calls_an_mcp_tool_over_http(home: Path, workdir: Path, echo_mcp_url: str) -> None:
    responder = ShellResponder(mcp_tool="echo_echo", mcp_args={"text": "hello from the fake model"})
    with FakeModelServer(api_key=MODEL_KEY, responder=responder) as server:
        proc = opencode_run(home, workdir, server, "Say hello with the echo tool", mcp_url=echo_mcp_url)
        events = json_lines(proc.stdout)
        assert proc.returncode == 0, explain(proc, server)
        tools = tool_parts(events)
        assert [t["tool"] for t in tools] == ["echo_echo"], explain(proc, server)
        assert "hello from the fake model" in tools[0]["state"]["output"]
        assert "hello from the fake model" in final_text(events)


def test_opencode_continues_a_session(home: Path, workdir: Path) -> None:
    with FakeModelServer(api_key=MODEL_KEY, responder=ShellResponder()) as server:
        first = opencode_run(home, workdir, server, f"Run {COMMAND}")
        assert first.returncode == 0, explain(first, server)
        session = json_lines(first.stdout)[0]["sessionID"]
        server.reset()
        second = opencode_run(home, workdir, server, "--session", session, "What did it print?")
        assert second.returncode == 0, explain(second, server)
        assert {e["sessionID"] for e in json_lines(second.stdout)} == {session}
        turn = [r for r in server.requests if r.path == "/v1/messages" and r.valid and r.tools][-1]
        history = json.dumps(turn.messages)
        assert "echo $((6 * 7))" in history and "What did it print?" in history
