"""The `openhands` agent (agentenv_local.agents.cli_agents.openhands) driving the real OpenHands CLI against the
fake model server: a turn's JSON events become trajectory events (terminal call, its result, final with usage), a
second turn of the context resumes the same conversation, the env's MCP servers reach the CLI, cancelling a turn
leaves no process, and the reference's `openhands-smoke` task passes through `agentenv run` (without a model: one
line naming the model setting)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agent_cli_kit import MODEL_KEY, cli_path, turn_request
from shell_responder import COMMAND, ShellResponder

from agentenv_local.agents.cli_agents import harness
from agentenv_local.agents.cli_agents.openhands import OpenHandsAgent
from agentenv_local.testing.fake_models import FakeModelServer, RecordedRequest, Reply

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kits.reference_bundles import copy_reference_bundle  # noqa: E402 - the tests folder is on the path now


def model_config(server: FakeModelServer, workdir: Path) -> dict[str, Any]:
    return {"base_url": server.base_url, "api": "openai", "api_key": MODEL_KEY, "model": "fake-model",
            "workspace": str(workdir)}


def chat_turns(server: FakeModelServer) -> list[RecordedRequest]:
    return [r for r in server.requests if r.path == "/v1/chat/completions"]


def test_a_turn_records_the_terminal_call_and_a_second_turn_resumes_the_conversation(workdir: Path) -> None:
    cli_path("openhands-venv", "openhands", venv=True)
    agent = OpenHandsAgent()
    with FakeModelServer(api_key=MODEL_KEY, responder=ShellResponder()) as server:
        first = turn_request(agent, f"Run {COMMAND} and reply with the number.", "ctx-1", "t-1",
                        **model_config(server, workdir))
        result = asyncio.run(agent.run(first))
        assert result.error is None, (result, first.trajectory.events())
        assert "42" in result.parts[0].text
        events = first.trajectory.events()
        calls = [e for e in events if e["type"] == "tool_call"]
        assert [(c["name"], c["args"]["command"]) for c in calls] == [("terminal", COMMAND)]
        assert calls[0]["result"].strip() == "42" and calls[0]["is_error"] is False
        kinds = [e["type"] for e in events]
        assert kinds.index("tool_use") < kinds.index("tool_call")  # the call is seen before its result
        final = [e for e in events if e["type"] == "final"][-1]
        assert "42" in final["text"] and final["usage"]["output_tokens"] > 0 and final["usage"]["input_tokens"] > 0
        session = result.usage.provider_details["session_id"]
        assert session and result.usage.tool_call_count == 1
        assert MODEL_KEY not in json.dumps(events)
        assert all({k.lower(): v for k, v in r.headers.items()}.get("authorization") == f"Bearer {MODEL_KEY}"
                   for r in chat_turns(server))

        server.reset()
        second = turn_request(agent, "What did it print?", "ctx-1", "t-2", **model_config(server, workdir))
        again = asyncio.run(agent.run(second))
        assert again.error is None, (again, second.trajectory.events())
        assert next(e for e in second.trajectory.events() if e["type"] == "turn")["resume_session"] == session
        history = json.dumps(chat_turns(server)[-1].messages)
        assert COMMAND in history and "What did it print?" in history  # the first turn is in the conversation
        assert again.usage.provider_details["session_id"] == session

        other = turn_request(agent, "Hello", "ctx-2", "t-3", **model_config(server, workdir))
        assert asyncio.run(agent.run(other)).usage.provider_details["session_id"] != session  # a context each


def test_the_envs_mcp_server_reaches_the_cli(workdir: Path, echo_mcp_url: str) -> None:
    cli_path("openhands-venv", "openhands", venv=True)
    agent = OpenHandsAgent()
    # OpenHands adds a required security_risk argument to every tool, MCP tools included
    responder = ShellResponder(mcp_tool="echo", mcp_args={"text": "hello from the fake model", "security_risk": "LOW"})
    with FakeModelServer(api_key=MODEL_KEY, responder=responder) as server:
        req = turn_request(agent, "Say hello with echo", "ctx-m", "t-m", mcp={"echo": {"url": echo_mcp_url}},
                      **model_config(server, workdir))
        result = asyncio.run(agent.run(req))
    assert result.error is None, (result, req.trajectory.events())
    calls = [e for e in req.trajectory.events() if e["type"] == "tool_call"]
    assert [c["name"] for c in calls] == ["echo"] and "hello from the fake model" in calls[0]["result"]
    assert "hello from the fake model" in result.parts[0].text


LONG_COMMAND = "python3 -c 'import time; time.sleep(300)'"


class SleepResponder:
    """Asks for a terminal command that never ends on its own."""

    def __call__(self, req: RecordedRequest) -> Reply:
        if any(t["name"] == "terminal" for t in req.tools) and not req.answered_tools:
            return Reply.tool_call("terminal", {"command": LONG_COMMAND, "timeout": 600, "security_risk": "LOW"})
        return Reply(text="ok")


def test_cancelling_a_turn_leaves_no_process(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cli_path("openhands-venv", "openhands", venv=True)
    started: list[int] = []
    real_exec = asyncio.create_subprocess_exec

    async def recording_exec(*argv: str, **kwargs: object) -> asyncio.subprocess.Process:
        proc = await real_exec(*argv, **kwargs)  # type: ignore[arg-type]  # kwargs pass through unchanged
        started.append(proc.pid)
        return proc

    monkeypatch.setattr(harness.asyncio, "create_subprocess_exec", recording_exec)
    agent = OpenHandsAgent()

    async def scenario(server: FakeModelServer) -> tuple[list[int], list[int], list[dict]]:
        req = turn_request(agent, "Wait for a long time.", "ctx-c", "t-c", **model_config(server, workdir))
        task = asyncio.ensure_future(agent.run(req))
        for _ in range(1800):  # until the CLI's shell runs the long command
            await asyncio.sleep(0.1)
            if started and sleeping_in(workdir):
                break
            if task.done():
                raise AssertionError(f"the turn ended before the command ran: {req.trajectory.events()}")
        else:
            task.cancel()
            raise AssertionError(f"the long command never started: {req.trajectory.events()}")
        sleeping = sleeping_in(workdir)
        tree = harness.descendants(started[0]) + sleeping
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return sleeping, tree, req.trajectory.events()

    with FakeModelServer(api_key=MODEL_KEY, responder=SleepResponder()) as server:
        sleeping, tree, events = asyncio.run(scenario(server))
    assert sleeping  # the terminal's long command ran
    assert sleeping_in(workdir) == [], "the terminal's long command is still running"
    assert not _alive(started[0]), "the CLI is still running"
    assert not [pid for pid in tree if _alive(pid)], "a process the CLI started is still running"
    assert any(e["type"] == "tool_use" and e["name"] == "terminal" for e in events)


def sleeping_in(workdir: Path) -> list[int]:
    """The long commands running in `workdir`: OpenHands runs them in tmux panes, outside the CLI's own tree."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _is_sleep(int(entry.name)) and _alive(int(entry.name)):
            try:
                if Path(os.readlink(entry / "cwd")) == workdir:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


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


def test_a_missing_cli_and_a_missing_model_are_one_clear_error_each(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(harness, "CLI_CACHE", tmp_path / "no-cache")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("LITELLM_BASE_URL", raising=False)
    agent = OpenHandsAgent()
    req = turn_request(agent, "hi", "ctx-m", "t-m", base_url="http://127.0.0.1:9", api_key="sk-x-secret", model="m")
    result = asyncio.run(agent.run(req))
    assert result.error is not None and result.error.code == "openhands.cli_not_found"
    assert "scripts/setup-agent-clis.sh" in result.error.message
    no_model = asyncio.run(agent.run(turn_request(agent, "hi", "ctx-n", "t-n")))
    assert no_model.error is not None and no_model.error.code == "openhands.no_model"
    assert "[model] base_url" in no_model.error.message


# --- the reference's `agents` bundle through `agentenv run` -------------------------------------------------------


def agentenv(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTENV_", "ANTHROPIC_", "LITELLM_"))}
    return subprocess.run([str(Path(sys.executable).parent / "agentenv"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=400, check=False)


@pytest.fixture
def smoke_bundle(tmp_path: Path) -> Path:
    """The reference's `agents` bundle with its openhands task only."""
    bundle = copy_reference_bundle("agents", tmp_path)
    for task in (bundle / "tasks").iterdir():
        if task.name != "openhands-smoke.json":
            task.unlink()
    (tmp_path / "proj").mkdir()
    return bundle


def test_the_smoke_task_passes_with_a_model_and_records_the_terminal_call(smoke_bundle: Path) -> None:
    cli_path("openhands-venv", "openhands", venv=True)
    project = smoke_bundle.parent / "proj"
    with FakeModelServer(api_key=MODEL_KEY, responder=ShellResponder()) as server:
        (project / ".agentenv").mkdir()
        (project / ".agentenv" / "config.toml").write_text(
            f'[model]\napi = "openai"\nbase_url = "{server.base_url}"\napi_key = "{MODEL_KEY}"\n'
            'default = "fake-model"\n')
        out = agentenv(project, "run", str(smoke_bundle), "--task", "openhands-smoke")
        problems = [r.problems for r in server.requests if r.problems]
    assert out.returncode == 0, out.stdout + out.stderr
    assert "passed" in out.stdout, out.stdout
    assert not problems
    runs = json.loads(agentenv(project, "runs", "list", "--json").stdout)
    shown = agentenv(project, "runs", "show", runs[0]["run_id"], "--json").stdout
    run = json.loads(shown)
    [chat] = run["context"]["prompt_responses"]
    calls = [e for e in chat["trajectory"] if e.get("type") == "tool_call"]
    assert [(c["name"], c["args"]["command"], c["result"].strip()) for c in calls] == [("terminal", COMMAND, "42")]
    assert run["context"]["deployed_agents"][0]["a2a_agent_id"] == "openhands"
    assert MODEL_KEY not in shown  # the key never reaches the store


def test_without_a_model_the_smoke_task_fails_with_one_line(smoke_bundle: Path) -> None:
    project = smoke_bundle.parent / "proj"
    dry = agentenv(project, "run", str(smoke_bundle), "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    out = agentenv(project, "run", str(smoke_bundle), "--task", "openhands-smoke")
    assert out.returncode != 0
    lines = [line for line in (out.stdout + out.stderr).splitlines() if "openhands agent needs a model" in line]
    assert len(lines) == 1 and "[model] base_url" in lines[0], out.stdout + out.stderr


def test_an_anthropic_endpoint_is_spoken_as_the_messages_api(workdir: Path) -> None:
    cli_path("openhands-venv", "openhands", venv=True)
    agent = OpenHandsAgent()
    with FakeModelServer(api_key=MODEL_KEY, responder=ShellResponder()) as server:
        req = turn_request(agent, f"Run {COMMAND} and reply with the number.", "ctx-a", "t-a", base_url=server.root_url,
                      api="anthropic", api_key=MODEL_KEY, model="claude-sonnet-4-5", workspace=str(workdir))
        result = asyncio.run(agent.run(req))
    assert result.error is None, (result, req.trajectory.events())
    assert "42" in result.parts[0].text
    turns = [r for r in server.requests if r.path == "/v1/messages"]
    assert turns and all(r.valid and r.model == "claude-sonnet-4-5" for r in turns)
