"""The `codex` agent (agentenv_local.agents.cli_agents.codex) driving the real Codex CLI against the fake model
server's Responses API: a turn's events become trajectory events (the shell call live, then its output 42), a
second turn of the context resumes the CLI's thread, an MCP server registered on the agent is called over
streamable HTTP, cancelling a turn leaves no process, no model is one clear line; and the reference's
codex-smoke task passes under `agentenv run` with the key in no stored byte."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agent_cli_kit import MODEL_KEY, cli_path, turn_request
from shell_responder import COMMAND, ShellResponder

from agentenv_local.agents.cli_agents import harness
from agentenv_local.agents.cli_agents.codex import CodexAgent
from agentenv_local.agents.types import TaskResult, TextPart
from agentenv_local.testing.fake_models import FakeModelServer, RecordedRequest, Reply

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kits.reference_bundles import copy_reference_bundle  # noqa: E402 - the tests folder is on the path now


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

        server.reset()
        second = turn_request(agent, "What did it print?", "ctx-1", "t-2", **model_config(server, workdir))
        again = asyncio.run(agent.run(second))
        assert again.error is None, again
        assert next(e for e in second.trajectory.events() if e["type"] == "turn")["resume_session"] == thread
        turn = [r for r in server.requests if r.path == "/v1/responses" and r.valid][-1]
        history = json.dumps(turn.messages)
        assert COMMAND in history and "What did it print?" in history  # the first turn is in the thread
        assert again.usage.provider_details["session_id"] == thread


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


LONG_COMMAND = "python3 -c 'import time; time.sleep(300)'"


class SleepResponder:
    """Asks Codex's exec_command for a command that never ends on its own, waiting for it all along."""

    def __call__(self, req: RecordedRequest) -> Reply:
        if any(t["name"] == "exec_command" for t in req.tools) and not req.answered_tools:
            return Reply.tool_call("exec_command", {"cmd": LONG_COMMAND, "yield_time_ms": 600000})
        return Reply(text="ok")


def test_cancelling_a_turn_leaves_no_process(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cli_path("codex", "codex")
    started: list[int] = []
    real_exec = asyncio.create_subprocess_exec

    async def recording_exec(*argv: str, **kwargs: object) -> asyncio.subprocess.Process:
        proc = await real_exec(*argv, **kwargs)  # type: ignore[arg-type]  # kwargs pass through unchanged
        started.append(proc.pid)
        return proc

    monkeypatch.setattr(harness.asyncio, "create_subprocess_exec", recording_exec)
    agent = CodexAgent()

    async def scenario(server: FakeModelServer) -> tuple[list[int], list[dict]]:
        req = turn_request(agent, "Wait for a long time.", "ctx-c", "t-c", **model_config(server, workdir))
        task = asyncio.ensure_future(agent.run(req))
        for _ in range(1200):  # until Codex's shell runs the long command
            await asyncio.sleep(0.1)
            seen = any(e["type"] == "tool_use" for e in req.trajectory.events())  # read live, before any result
            if seen and started and any(_is_sleep(pid) for pid in harness.descendants(started[0])):
                break
            if task.done():
                raise AssertionError(f"the turn ended before the command ran: {req.trajectory.events()}")
        else:
            task.cancel()
            raise AssertionError(f"the long command never started: {req.trajectory.events()}")
        before = [started[0], *harness.descendants(started[0])]
        assert any(_is_sleep(pid) for pid in before)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return before, req.trajectory.events()

    with FakeModelServer(api_key=MODEL_KEY, responder=SleepResponder()) as server:
        before, events = asyncio.run(scenario(server))
    assert not [pid for pid in before if _alive(pid)], "a process the CLI started is still running"
    assert any(e["type"] == "tool_use" and LONG_COMMAND in e["args"]["command"] for e in events), events


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


def test_no_model_endpoint_or_name_is_one_line_naming_the_model_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LITELLM_BASE_URL", raising=False)
    agent = CodexAgent()
    result = asyncio.run(agent.run(turn_request(agent, "hi", "ctx-n", "t-n")))
    assert result.error is not None and result.error.code == "codex.no_model"
    assert "[model]" in result.error.message and "\n" not in result.error.message
    unnamed = asyncio.run(agent.run(turn_request(agent, "hi", "ctx-n", "t-o", base_url="http://127.0.0.1:9/v1")))
    assert unnamed.error is not None and unnamed.error.code == "codex.no_model"
    assert "[model] default" in unnamed.error.message and "\n" not in unnamed.error.message


def test_a_missing_cli_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(harness, "CLI_CACHE", tmp_path / "no-cache")
    monkeypatch.setenv("PATH", str(tmp_path))
    agent = CodexAgent()
    req = turn_request(agent, "hi", "ctx-x", "t-x", base_url="http://127.0.0.1:9/v1", api_key="sk-x-secret", model="m")
    result = asyncio.run(agent.run(req))
    assert result.error is not None and result.error.code == "codex.cli_not_found"
    assert "scripts/setup-agent-clis.sh" in result.error.message and "@openai/codex" in result.error.message


# --- the reference's codex-smoke task under `agentenv run` ---------------------------------------------------


def agentenv(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTENV_", "OPENAI_", "LITELLM_"))}
    return subprocess.run([str(Path(sys.executable).parent / "agentenv"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=400, check=False)


@pytest.fixture
def smoke_bundle(tmp_path: Path) -> Path:
    """The reference's `agents` bundle with its codex task only."""
    bundle = copy_reference_bundle("agents", tmp_path)
    for task in (bundle / "tasks").iterdir():
        if task.name != "codex-smoke.json":
            task.unlink()
    (tmp_path / "proj" / ".agentenv").mkdir(parents=True)
    return bundle


def test_the_smoke_task_passes_and_records_the_shell_call(smoke_bundle: Path) -> None:
    cli_path("codex", "codex")
    project = smoke_bundle.parent / "proj"
    with FakeModelServer(api_key=MODEL_KEY, responder=ShellResponder()) as server:
        (project / ".agentenv" / "config.toml").write_text(
            f'[model]\napi = "openai"\nbase_url = "{server.base_url}"\napi_key = "{MODEL_KEY}"\n'
            'default = "gpt-5-codex"\n')
        out = agentenv(project, "run", str(smoke_bundle), "--task", "codex-smoke")
        problems = [r.problems for r in server.requests if r.problems]
    assert out.returncode == 0 and "passed" in out.stdout, out.stdout + out.stderr
    assert not problems
    runs = json.loads(agentenv(project, "runs", "list", "--json").stdout)
    shown = agentenv(project, "runs", "show", runs[0]["run_id"], "--json").stdout
    run = json.loads(shown)
    [chat] = run["context"]["prompt_responses"]
    calls = [e for e in chat["trajectory"] if e.get("type") == "tool_call"]
    assert [(c["name"], c["result"].strip()) for c in calls] == [("command_execution", "42")]
    assert COMMAND in calls[0]["args"]["command"]
    assert run["context"]["deployed_agents"][0]["a2a_agent_id"] == "codex"
    assert MODEL_KEY not in shown  # the key never reaches the store


def test_without_a_model_the_run_fails_with_one_line(smoke_bundle: Path) -> None:
    project = smoke_bundle.parent / "proj"
    out = agentenv(project, "run", str(smoke_bundle), "--task", "codex-smoke")
    assert out.returncode != 0
    lines = [line for line in (out.stdout + out.stderr).splitlines() if "codex agent needs a model" in line]
    assert len(lines) == 1 and "[model] base_url" in lines[0], out.stdout + out.stderr


OFFICE_TASK = {
    "description": "codex reads the office env's mail through the gateway under the role 'agent'",
    "steps": [
        {"id": "deploy", "type": "deploy_env", "env_id": "office"},
        {"id": "seed_mail", "type": "load_artifact", "artifact_id": "mail-seed", "env_id": "office",
         "depends_on": ["deploy"]},
        {"id": "lock_down", "type": "modify_env_tool_access", "env_id": "office", "action": "disable",
         "role": "agent", "tools": ["purge_mailbox"], "depends_on": ["seed_mail"]},
        {"id": "solver", "type": "deploy_agent", "a2a_agent_id": "codex", "agent_name": "solver",
         "env_ids": ["office"], "role": "agent", "depends_on": ["lock_down"]},
        {"id": "ask", "type": "prompt_agent", "agent_name": "solver", "prompt_id": "ask",
         "prompt": "Search the mail for Acme pricing and tell me what you found.", "depends_on": ["solver"]},
        {"id": "check", "type": "agent_prompt_response_verifier", "prompt_id": "ask", "verifier_id": "answer",
         "criteria": [{"type": "response_contains", "needles": ["DONE"]}], "depends_on": ["ask"]},
    ],
}


def test_codex_calls_an_office_tool_through_the_gateway_under_a_role(tmp_path: Path) -> None:
    cli_path("codex", "codex")
    root = Path(__file__).resolve().parents[2]
    bundle = tmp_path / "office-codex"
    shutil.copytree(root / "examples" / "support", bundle)
    for task in (bundle / "tasks").iterdir():
        task.unlink()
    (bundle / "tasks" / "office-codex.json").write_text(json.dumps(OFFICE_TASK))
    project = tmp_path / "proj"
    (project / ".agentenv").mkdir(parents=True)
    responder = ShellResponder(mcp_tool=".search_emails", mcp_args={"query": "acme pricing"})
    with FakeModelServer(api_key=MODEL_KEY, responder=responder) as server:
        (project / ".agentenv" / "config.toml").write_text(
            f'[model]\napi = "openai"\nbase_url = "{server.base_url}"\napi_key = "{MODEL_KEY}"\n'
            'default = "gpt-5-codex"\n')
        out = agentenv(project, "run", str(bundle))
        offered = [r.tool_names for r in server.requests if r.path == "/v1/responses" and r.tools]
    assert out.returncode == 0 and "passed" in out.stdout, out.stdout + out.stderr
    assert len(responder.called) == 1 and responder.called[0].endswith("search_emails"), responder.called
    assert offered and all(not any(n.endswith("purge_mailbox") for n in names) for names in offered)  # RBAC
    runs = json.loads(agentenv(project, "runs", "list", "--json").stdout)
    run = json.loads(agentenv(project, "runs", "show", runs[0]["run_id"], "--json").stdout)
    [chat] = run["context"]["prompt_responses"]
    [call] = [e for e in chat["trajectory"] if e.get("type") == "tool_call"]
    assert (call["server"], call["tool"], call["args"], call["is_error"]) == \
        ("office", "search_emails", {"query": "acme pricing"}, False)
    assert "e-02" in call["result"], call["result"]
