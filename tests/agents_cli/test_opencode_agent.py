"""The `opencode` agent (agentenv_local.agents.cli_agents.opencode) driving the real opencode CLI against the fake
model server: a turn's JSON events become trajectory events (the bash call with its output, the final text with
usage), a second turn of the context resumes the CLI's session, cancelling a turn leaves no process it started,
and the reference's `agents` bundle's opencode-smoke task passes under `agentenv run` (a real hub); without a
model it stops with one line naming the model setting."""

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
from agentenv_local.agents.cli_agents.opencode import OpencodeAgent
from agentenv_local.agents.types import TextPart
from agentenv_local.testing.fake_models import FakeModelServer, RecordedRequest, Reply

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kits.reference_bundles import copy_reference_bundle  # noqa: E402 - the tests folder is on the path now


def model_config(server: FakeModelServer, workdir: Path) -> dict[str, Any]:
    return {"base_url": server.root_url, "api_key": MODEL_KEY, "model": "claude-sonnet-4-5",
            "workspace": str(workdir)}


def test_a_turn_records_the_bash_call_and_a_second_turn_resumes_the_session(workdir: Path) -> None:
    cli_path("opencode", "opencode")
    agent = OpencodeAgent()
    with FakeModelServer(api_key=MODEL_KEY, responder=ShellResponder()) as server:
        first = turn_request(agent, f"Run {COMMAND} and reply with the number.", "ctx-1", "t-1",
                        **model_config(server, workdir))
        result = asyncio.run(agent.run(first))
        assert result.error is None, (result, first.trajectory.events())
        answer = result.parts[0]
        assert isinstance(answer, TextPart) and "42" in answer.text
        events = first.trajectory.events()
        calls = [e for e in events if e["type"] == "tool_call"]
        assert [(c["name"], c["args"]) for c in calls] == [("bash", {"command": COMMAND})]
        assert calls[0]["result"].strip() == "42" and calls[0]["is_error"] is False
        assert calls[0]["server"] is None and calls[0]["tool"] == "bash"
        kinds = [e["type"] for e in events]
        assert kinds.index("tool_use") < kinds.index("tool_call") < kinds.index("final")
        final = [e for e in events if e["type"] == "final"][-1]
        assert "42" in final["text"] and final["usage"]["output_tokens"] > 0
        session = result.usage.provider_details["session_id"]
        assert session and result.usage.tool_call_count == 1 and (result.usage.output_tokens or 0) > 0
        assert MODEL_KEY not in json.dumps(events)
        assert all(not r.problems for r in server.requests)

        server.reset()
        second = turn_request(agent, "What did it print?", "ctx-1", "t-2", **model_config(server, workdir))
        again = asyncio.run(agent.run(second))
        assert again.error is None, again
        assert next(e for e in second.trajectory.events() if e["type"] == "turn")["resume_session"] == session
        turn = [r for r in server.requests if r.path == "/v1/messages" and r.valid and r.tools][-1]
        history = json.dumps(turn.messages)
        assert "echo $((6 * 7))" in history and "What did it print?" in history  # the first turn is in the session
        assert again.usage.provider_details["session_id"] == session


LONG_COMMAND = "python3 -c 'import time; time.sleep(300)'"


class SleepResponder:
    """Asks for a shell command that never ends on its own."""

    def __call__(self, req: RecordedRequest) -> Reply:
        if any(t["name"] == "bash" for t in req.tools) and not req.answered_tools:
            return Reply.tool_call("bash", {"command": LONG_COMMAND, "timeout": 600000,
                                            "description": "wait a long time"})
        return Reply(text="ok")


def test_cancelling_a_turn_leaves_no_process_it_started(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cli_path("opencode", "opencode")
    started: list[int] = []
    real_exec = asyncio.create_subprocess_exec

    async def recording_exec(*argv: str, **kwargs: object) -> asyncio.subprocess.Process:
        proc = await real_exec(*argv, **kwargs)  # type: ignore[arg-type]  # kwargs pass through unchanged
        started.append(proc.pid)
        return proc

    monkeypatch.setattr(harness.asyncio, "create_subprocess_exec", recording_exec)
    agent = OpencodeAgent()

    async def scenario(server: FakeModelServer) -> tuple[list[int], list[int]]:
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
        tree = harness.descendants(started[0])
        sleepers = [pid for pid in tree if _is_sleep(pid)]  # read before the cancel ends them
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return sleepers, tree

    with FakeModelServer(api_key=MODEL_KEY, responder=SleepResponder()) as server:
        sleepers, tree = asyncio.run(scenario(server))
    assert sleepers
    assert not _alive(started[0]), "the CLI is still running"
    assert not [pid for pid in tree if _alive(pid)], "a process the CLI started is still running"


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


def test_a_missing_cli_and_a_missing_model_are_one_clear_line(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LITELLM_BASE_URL", raising=False)
    agent = OpencodeAgent()
    result = asyncio.run(agent.run(turn_request(agent, "hi", "ctx-n", "t-n")))
    assert result.error is not None and result.error.code == "opencode.no_model"
    assert "[model]" in result.error.message and "\n" not in result.error.message

    monkeypatch.setattr(harness, "CLI_CACHE", tmp_path / "no-cache")
    monkeypatch.setenv("PATH", str(tmp_path))
    req = turn_request(agent, "hi", "ctx-m", "t-m", base_url="http://127.0.0.1:9", api_key="sk-x-secret", model="m")
    result = asyncio.run(agent.run(req))
    assert result.error is not None and result.error.code == "opencode.cli_not_found"
    assert "scripts/setup-agent-clis.sh" in result.error.message and "opencode-ai" in result.error.message


# --- the reference's opencode-smoke task under `agentenv run` ---------------------------------------------------


def agentenv(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTENV_", "ANTHROPIC_", "LITELLM_"))}
    return subprocess.run([str(Path(sys.executable).parent / "agentenv"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=400, check=False)


@pytest.fixture
def smoke_bundle(tmp_path: Path) -> Path:
    """The reference's `agents` bundle with its opencode task only."""
    bundle = copy_reference_bundle("agents", tmp_path)
    for task in (bundle / "tasks").iterdir():
        if task.name != "opencode-smoke.json":
            task.unlink()
    (tmp_path / "proj").mkdir()
    return bundle


def test_the_smoke_task_passes_with_a_model_and_records_the_bash_call(smoke_bundle: Path) -> None:
    cli_path("opencode", "opencode")
    project = smoke_bundle.parent / "proj"
    with FakeModelServer(api_key=MODEL_KEY, responder=ShellResponder()) as server:
        (project / ".agentenv").mkdir()
        (project / ".agentenv" / "config.toml").write_text(
            f'[model]\napi = "anthropic"\nbase_url = "{server.root_url}"\napi_key = "{MODEL_KEY}"\n'
            'default = "claude-sonnet-4-5"\n')
        out = agentenv(project, "run", str(smoke_bundle), "--task", "opencode-smoke")
        problems = [r.problems for r in server.requests if r.problems]
    assert out.returncode == 0, out.stdout + out.stderr
    assert "passed" in out.stdout, out.stdout
    assert not problems
    runs = json.loads(agentenv(project, "runs", "list", "--json").stdout)
    shown = agentenv(project, "runs", "show", runs[0]["run_id"], "--json").stdout
    run = json.loads(shown)
    [chat] = run["context"]["prompt_responses"]
    calls = [e for e in chat["trajectory"] if e.get("type") == "tool_call"]
    assert [(c["name"], c["args"]["command"], c["result"].strip()) for c in calls] == [("bash", COMMAND, "42")]
    assert "42" in [e for e in chat["trajectory"] if e.get("type") == "final"][-1]["text"]
    assert run["context"]["deployed_agents"][0]["a2a_agent_id"] == "opencode"
    assert MODEL_KEY not in shown  # the key never reaches the store


def test_without_a_model_the_smoke_task_fails_with_one_line(smoke_bundle: Path) -> None:
    project = smoke_bundle.parent / "proj"
    out = agentenv(project, "run", str(smoke_bundle), "--task", "opencode-smoke")
    assert out.returncode != 0
    lines = [line for line in (out.stdout + out.stderr).splitlines() if "opencode agent needs a model" in line]
    assert len(lines) == 1 and "[model] base_url" in lines[0], out.stdout + out.stderr
