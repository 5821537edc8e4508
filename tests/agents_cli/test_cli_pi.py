"""pi (`pi -p --mode json`) against the fake model server's Chat Completions API with streaming (a custom
provider in ~/.pi/agent/models.json, `api: openai-completions`): a bash tool call whose output 42 comes back
in the final text, and `--session ID` continuing a session. pi has no built-in MCP client (its docs say so:
MCP is left to extensions), so there is no MCP run here."""

from __future__ import annotations

import json
from pathlib import Path

from agent_cli_kit import MODEL_KEY, clean_env, cli_path, explain, json_lines, run_cli
from shell_responder import COMMAND, ShellResponder

from agentenv_local.testing.fake_models import FakeModelServer


def pi_run(home: Path, workdir: Path, server: FakeModelServer, *args: str):
    agent_dir = home / ".pi" / "agent"
    agent_dir.mkdir(parents=True, exist_ok=True)
    # apiKey names the env var holding the key (pi resolves it so), never the key itself
    models = {"providers": {"fake": {"baseUrl": server.base_url, "api": "openai-completions",
                                     "apiKey": "FAKE_MODEL_KEY", "models": [{"id": "fake-model"}]}}}
    (agent_dir / "models.json").write_text(json.dumps(models))
    env = clean_env(home, FAKE_MODEL_KEY=MODEL_KEY, PI_OFFLINE="1")  # PI_OFFLINE: no startup network calls
    argv = [cli_path("pi", "pi"), "--provider", "fake", "--model", "fake-model", "--mode", "json", "-p",
            "--session-dir", home / "sessions", *args]
    return run_cli([str(a) for a in argv], env=env, cwd=workdir)


def test_pi_runs_a_shell_command_through_chat_completions_streaming(home: Path, workdir: Path) -> None:
    with FakeModelServer(api_key=MODEL_KEY, responder=ShellResponder()) as server:
        proc = pi_run(home, workdir, server, f"Run {COMMAND} with your shell tool")
        events = json_lines(proc.stdout)
        assert proc.returncode == 0, explain(proc, server)
        starts = [e for e in events if e["type"] == "tool_execution_start"]
        ends = [e for e in events if e["type"] == "tool_execution_end"]
        assert [e["toolName"] for e in starts] == ["bash"] and starts[0]["args"] == {"command": COMMAND}, events
        assert ends[0]["result"]["content"][0]["text"].strip() == "42" and ends[0]["isError"] is False
        final = [e for e in events if e["type"] == "agent_end"][-1]["messages"][-1]
        assert "42" in final["content"][0]["text"]
        turns = [r for r in server.requests if r.path == "/v1/chat/completions"]
        assert turns and all(r.body.get("stream") is True and not r.problems for r in turns), explain(proc, server)


def test_pi_continues_a_session(home: Path, workdir: Path) -> None:
    with FakeModelServer(api_key=MODEL_KEY, responder=ShellResponder()) as server:
        first = pi_run(home, workdir, server, f"Run {COMMAND}")
        assert first.returncode == 0, explain(first, server)
        session = json_lines(first.stdout)[0]
        assert session["type"] == "session"
        server.reset()
        second = pi_run(home, workdir, server, "--session", session["id"], "What did it print?")
        assert second.returncode == 0, explain(second, server)
        history = json.dumps([r.messages for r in server.requests if r.valid][-1])
        assert "echo $((6 * 7))" in history and "What did it print?" in history
