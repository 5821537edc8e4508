"""The `gemini` agent (agentenv_local.agents.cli_agents.gemini) driving the real Gemini CLI against the fake model
server's Gemini API: a turn's stream-json events become trajectory events (the shell call, an MCP call of the echo
env), a second turn of the context resumes the CLI's session, cancelling a turn leaves no process, and without
a model the run stops with one line; the reference's `gemini-smoke` task passes under `agentenv run`.

Gemini CLI refuses `$((6 * 7))` (the smoke task's command) as command substitution, so the fake model here
asks for `expr 6 '*' 7`: the agent, the CLI and the verifier's "42" are the same."""

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
from shell_responder import ShellResponder
from test_claude_code_agent import _alive, group_members

from agentenv_local.agents.cli_agents import harness
from agentenv_local.agents.cli_agents.gemini import GeminiAgent
from agentenv_local.agents.types import text_of
from agentenv_local.testing.fake_models import FakeModelServer, RecordedRequest, Reply

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kits.reference_bundles import copy_reference_bundle  # noqa: E402 - the tests folder is on the path now

EXPR = "expr 6 '*' 7"
MODEL = "gemini-2.5-flash"



def model_config(server: FakeModelServer, workdir: Path) -> dict[str, Any]:
    return {"base_url": server.root_url, "api_key": MODEL_KEY, "model": MODEL, "workspace": str(workdir)}


def test_a_turn_records_the_shell_call_live_and_its_output(workdir: Path) -> None:
    cli_path("gemini", "gemini")
    agent = GeminiAgent()
    with FakeModelServer(api_key=MODEL_KEY, responder=ShellResponder(command=EXPR)) as server:
        req = turn_request(agent, "Compute 6 * 7 with your shell tool.", "ctx-1", "t-1",
                           **model_config(server, workdir))
        result = asyncio.run(agent.run(req))
        problems = [r.problems for r in server.requests if r.problems]
    assert result.error is None, (result, req.trajectory.events())
    assert "42" in text_of(result.parts) and not problems
    events = req.trajectory.events()
    kinds = [e["type"] for e in events]
    assert kinds.index("tool_use") < kinds.index("tool_call") < kinds.index("final")  # the call before its result
    [call] = [e for e in events if e["type"] == "tool_call"]
    assert (call["name"], call["args"], call["result"].strip(), call["is_error"], call["server"]) == \
        ("run_shell_command", {"command": EXPR}, "42", False, None)
    final = events[-1]
    assert final["type"] == "final" and "42" in final["text"] and final["usage"]["output_tokens"] > 0
    assert result.usage.tool_call_count == 1 and result.usage.provider_details["session_id"]
    assert result.usage.input_tokens and result.usage.total_tokens
    assert MODEL_KEY not in json.dumps(events)


def test_an_mcp_tool_of_the_env_is_called_and_routed_to_its_server(workdir: Path, echo_mcp_url: str) -> None:
    cli_path("gemini", "gemini")
    agent = GeminiAgent()
    responder = ShellResponder(mcp_tool="echo", mcp_args={"text": "hello from the fake model"})
    with FakeModelServer(api_key=MODEL_KEY, responder=responder) as server:
        req = turn_request(agent, "Say hello with the echo tool.", "ctx-m", "t-m", mcp={"echo": {"url": echo_mcp_url}},
                      **model_config(server, workdir))
        result = asyncio.run(agent.run(req))
    assert result.error is None, (result, req.trajectory.events())
    [call] = [e for e in req.trajectory.events() if e["type"] == "tool_call"]
    assert (call["server"], call["tool"], call["is_error"]) == ("echo", "echo", False), call
    assert "hello from the fake model" in call["result"] and "hello from the fake model" in text_of(result.parts)


def test_a_second_turn_resumes_the_session(workdir: Path) -> None:
    # a first turn without tools: Gemini CLI 0.61.0 resends a tool's function response twice on --resume,
    # which the API (and the fake) refuses (see test_cli_gemini.py)
    cli_path("gemini", "gemini")
    agent = GeminiAgent()
    with FakeModelServer(api_key=MODEL_KEY, script=[Reply(text="Noted: the number is 42.")]) as server:
        first = turn_request(agent, "Remember the number 42.", "ctx-r", "t-1", **model_config(server, workdir))
        result = asyncio.run(agent.run(first))
        assert result.error is None, (result, first.trajectory.events())
        session = result.usage.provider_details["session_id"]
        server.reset([Reply(text="It was 42.")])
        second = turn_request(agent, "What was the number?", "ctx-r", "t-2", **model_config(server, workdir))
        again = asyncio.run(agent.run(second))
        turns = [r for r in server.requests if r.valid and r.tools]
    assert again.error is None, (again, second.trajectory.events())
    assert next(e for e in second.trajectory.events() if e["type"] == "turn")["resume_session"] == session
    history = json.dumps(turns[-1].messages)
    assert "Remember the number 42." in history and "Noted: the number is 42." in history
    assert text_of(again.parts) == "It was 42." and again.usage.provider_details["session_id"] == session


LONG_COMMAND = "python3 -c 'import time; time.sleep(300)'"


class SleepResponder:
    """Asks for a shell command that never ends on its own."""

    def __call__(self, req: RecordedRequest) -> Reply:
        if any(t["name"] == "run_shell_command" for t in req.tools) and not req.answered_tools:
            return Reply.tool_call("run_shell_command", {"command": LONG_COMMAND})
        return Reply(text="ok")


def _is_sleep(pid: int) -> bool:
    try:
        return b"time.sleep(300)" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def test_cancelling_a_turn_leaves_no_process(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cli_path("gemini", "gemini")
    started: list[int] = []
    real_exec = asyncio.create_subprocess_exec

    async def recording_exec(*argv: str, **kwargs: object) -> asyncio.subprocess.Process:
        proc = await real_exec(*argv, **kwargs)  # type: ignore[arg-type]  # kwargs pass through unchanged
        started.append(proc.pid)
        return proc

    monkeypatch.setattr(harness.asyncio, "create_subprocess_exec", recording_exec)
    agent = GeminiAgent()

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
    assert before
    assert group_members(started[0]) == [], "a process of the CLI's group is still running"
    assert not [pid for pid in before if _alive(pid)], "a process the CLI started is still running"
    assert any(e["type"] == "tool_use" and e["name"] == "run_shell_command" for e in events)


def test_no_model_endpoint_is_one_line_naming_the_model_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LITELLM_BASE_URL", raising=False)
    agent = GeminiAgent()
    result = asyncio.run(agent.run(turn_request(agent, "hi", "ctx-n", "t-n")))
    assert result.error is not None and result.error.code == "gemini.no_model"
    assert "[model]" in result.error.message and "\n" not in result.error.message


# --- the reference's gemini-smoke task under `agentenv run` ---------------------------------------------------------

def agentenv(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTENV_", "GEMINI_", "GOOGLE_", "LITELLM_"))}
    return subprocess.run([str(Path(sys.executable).parent / "agentenv"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=400, check=False)


@pytest.fixture
def smoke_bundle(tmp_path: Path) -> Path:
    """The reference's `agents` bundle with its gemini task only, and a project folder next to it."""
    bundle = copy_reference_bundle("agents", tmp_path)
    for task in (bundle / "tasks").iterdir():
        if task.name != "gemini-smoke.json":
            task.unlink()
    (tmp_path / "proj" / ".agentenv").mkdir(parents=True)
    return bundle


def test_the_smoke_task_passes_and_its_trajectory_shows_the_shell_call(smoke_bundle: Path) -> None:
    cli_path("gemini", "gemini")
    project = smoke_bundle.parent / "proj"
    with FakeModelServer(api_key=MODEL_KEY, responder=ShellResponder(command=EXPR)) as server:
        (project / ".agentenv" / "config.toml").write_text(
            f'[model]\nbase_url = "{server.root_url}"\napi_key = "{MODEL_KEY}"\ndefault = "{MODEL}"\n')
        out = agentenv(project, "run", str(smoke_bundle), "--task", "gemini-smoke")
        problems = [r.problems for r in server.requests if r.problems]
    assert out.returncode == 0 and "passed" in out.stdout, out.stdout + out.stderr
    assert not problems
    runs = json.loads(agentenv(project, "runs", "list", "--json").stdout)
    shown = agentenv(project, "runs", "show", runs[0]["run_id"], "--json").stdout
    run = json.loads(shown)
    [chat] = run["context"]["prompt_responses"]
    calls = [e for e in chat["trajectory"] if e.get("type") == "tool_call"]
    assert [(c["name"], c["args"]["command"], c["result"].strip()) for c in calls] == \
        [("run_shell_command", EXPR, "42")]
    assert run["context"]["deployed_agents"][0]["a2a_agent_id"] == "gemini"
    assert MODEL_KEY not in shown  # the key never reaches the store


def test_without_a_model_the_run_stops_with_one_line(smoke_bundle: Path) -> None:
    out = agentenv(smoke_bundle.parent / "proj", "run", str(smoke_bundle), "--task", "gemini-smoke")
    assert out.returncode != 0
    lines = [line for line in (out.stdout + out.stderr).splitlines() if "gemini agent needs a model" in line]
    assert len(lines) == 1 and "[model] base_url" in lines[0], out.stdout + out.stderr
