"""OpenHands (`openhands --headless --json`, PyPI, in its own Python 3.12 venv) against the fake model
server's Chat Completions API (LiteLLM, non-streaming; LLM_MODEL=openai/..., LLM_BASE_URL, LLM_API_KEY with
--override-with-envs): its terminal tool runs the command and the output 42 comes back in the final text, and
an MCP tool of the echo env (~/.openhands/mcp.json, as `openhands mcp add --transport http` writes it)."""

from __future__ import annotations

import json
from pathlib import Path

from agent_cli_kit import MODEL_KEY, clean_env, cli_path, explain, run_cli
from shell_responder import COMMAND, ShellResponder

from agentenv_local.testing.fake_models import FakeModelServer


def json_objects(stdout: str) -> list[dict]:
    """OpenHands prints each event as one JSON object among its status lines (some span several lines)."""
    decoder, out, i = json.JSONDecoder(), [], 0
    while (i := stdout.find("{", i)) != -1:
        try:
            obj, end = decoder.raw_decode(stdout, i)
        except ValueError:
            i += 1
            continue
        out.append(obj)
        i = end
    return out


def test_openhands_runs_a_shell_command_through_chat_completions(home: Path, workdir: Path) -> None:
    with FakeModelServer(api_key=MODEL_KEY, responder=ShellResponder()) as server:
        # LITELLM_LOCAL_MODEL_COST_MAP: LiteLLM's price list from the package, not fetched from GitHub
        env = clean_env(home, LLM_MODEL="openai/fake-model", LLM_BASE_URL=server.base_url, LLM_API_KEY=MODEL_KEY,
                        OPENHANDS_SUPPRESS_BANNER="1", LITELLM_LOCAL_MODEL_COST_MAP="True")
        openhands = cli_path("openhands-venv", "openhands", venv=True)
        proc = run_cli([str(openhands), "--headless", "--json", "--override-with-envs", "-t",
                        f"Run {COMMAND} with your shell tool"], env=env, cwd=workdir)
        assert proc.returncode == 0, explain(proc, server)
        events = json_objects(proc.stdout)
        actions = [e for e in events if (e.get("action") or {}).get("kind") == "TerminalAction"]
        observations = [e for e in events if (e.get("observation") or {}).get("kind") == "TerminalObservation"]
        assert [a["action"]["command"] for a in actions] == [COMMAND], explain(proc, server)
        assert "42" in json.dumps(observations[0]["observation"]["content"])
        turns = [r for r in server.requests if r.path == "/v1/chat/completions"]
        assert turns and all(not r.problems for r in turns), explain(proc, server)
        assert "42" in json.dumps(turns[-1].tool_results) and "42" in proc.stdout.split("Agent finished")[-1]


def test_openhands_calls_an_mcp_tool_over_http(home: Path, workdir: Path, echo_mcp_url: str) -> None:
    (home / ".openhands").mkdir()
    # what `openhands mcp add echo --transport http URL` writes
    (home / ".openhands" / "mcp.json").write_text(json.dumps(
        {"mcpServers": {"echo": {"url": echo_mcp_url, "transport": "http", "enabled": True}}}))
    # OpenHands adds a required security_risk argument to every tool, MCP tools included
    responder = ShellResponder(mcp_tool="echo", mcp_args={"text": "hello from the fake model", "security_risk": "LOW"})
    with FakeModelServer(api_key=MODEL_KEY, responder=responder) as server:
        env = clean_env(home, LLM_MODEL="openai/fake-model", LLM_BASE_URL=server.base_url, LLM_API_KEY=MODEL_KEY,
                        OPENHANDS_SUPPRESS_BANNER="1", LITELLM_LOCAL_MODEL_COST_MAP="True")
        openhands = cli_path("openhands-venv", "openhands", venv=True)
        proc = run_cli([str(openhands), "--headless", "--json", "--override-with-envs", "-t", "Say hello with echo"],
                       env=env, cwd=workdir)
        assert proc.returncode == 0, explain(proc, server)
        assert responder.called and responder.called[0].endswith("echo"), explain(proc, server)
        turns = [r for r in server.requests if r.path == "/v1/chat/completions"]
        assert "hello from the fake model" in json.dumps(turns[-1].tool_results), explain(proc, server)
        assert "hello from the fake model" in proc.stdout.split("Agent finished")[-1]
