"""The `pi` agent (agentenv_local.agents.cli_agents.pi) driving the real pi CLI against the fake model server:
a turn's JSON events become trajectory events, a second turn of the context resumes pi's session, cancelling a
turn leaves no process, a missing CLI or model is one clear error; and the reference's `agents` bundle's
pi-smoke task passes under `agentenv run` (a real hub) with the bash call and 42 in the stored trajectory."""

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
from agentenv_local.agents.cli_agents.pi import PiAgent
from agentenv_local.agents.types import text_of
from agentenv_local.testing.fake_models import FakeModelServer, RecordedRequest, Reply

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kits.reference_bundles import copy_reference_bundle  # noqa: E402 - the tests folder is on the path now


def model_config(server: FakeModelServer, workdir: Path, api: str = "openai") -> dict[str, Any]:
    base_url = server.base_url if api == "openai" else server.root_url
    return {"base_url": base_url, "api": api, "api_key": MODEL_KEY, "model": "fake-model",
            "workspace": str(workdir)}


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_turn_records_the_bash_call_and_a_second_turn_resumes_the_session(workdir: Path, api: str) -> None:
    cli_path("pi", "pi")
    agent = PiAgent()
    wire = "/v1/chat/completions" if api == "openai" else "/v1/messages"
    with FakeModelServer(api_key=MODEL_KEY, responder=ShellResponder()) as server:
        first = turn_request(agent, f"Run {COMMAND} and reply with the number.", "ctx-1", "t-1",
                        **model_config(server, workdir, api))
        result = asyncio.run(agent.run(first))
        assert result.error is None, (result, first.trajectory.events())
        assert "42" in text_of(result.parts)
        assert {r.path for r in server.requests} == {wire} and not [r for r in server.requests if r.problems]
        events = first.trajectory.events()
        calls = [e for e in events if e["type"] == "tool_call"]
        assert [(c["name"], c["args"]) for c in calls] == [("bash", {"command": COMMAND})]
        assert calls[0]["result"].strip() == "42" and calls[0]["is_error"] is False
        kinds = [e["type"] for e in events]
        assert kinds.index("tool_use") < kinds.index("tool_call")  # the call is recorded before its result
        final = [e for e in events if e["type"] == "final"][-1]
        assert "42" in final["text"] and final["usage"]["output_tokens"] > 0
        session = result.usage.provider_details["session_id"]
        assert session and result.usage.tool_call_count == 1
        assert result.usage.output_tokens == final["usage"]["output_tokens"]
        assert MODEL_KEY not in json.dumps(events)
        models_json = (agent.private_home() / ".pi" / "agent" / "models.json").read_text()
        assert MODEL_KEY not in models_json  # the file names the variable holding the key, not the key

        server.reset()
        second = turn_request(agent, "What did it print?", "ctx-1", "t-2", **model_config(server, workdir, api))
        again = asyncio.run(agent.run(second))
        assert again.error is None, again
        assert next(e for e in second.trajectory.events() if e["type"] == "turn")["resume_session"] == session
        turn = [r for r in server.requests if r.path == wire and r.valid][-1]
        history = json.dumps(turn.messages)
        assert COMMAND in history and "What did it print?" in history  # the first turn is in the session
        assert again.usage.provider_details["session_id"] == session

        server.reset()
        other = turn_request(agent, "Hello", "ctx-2", "t-3", **model_config(server, workdir, api))
        fresh = asyncio.run(agent.run(other))
        assert fresh.error is None and fresh.usage.provider_details["session_id"] != session
        history = json.dumps([r.messages for r in server.requests if r.valid])
        assert "reply with the number" not in history and "What did it print?" not in history  # a new context


def test_a_model_error_fails_the_turn_with_the_masked_message(workdir: Path) -> None:
    cli_path("pi", "pi")
    agent = PiAgent()
    with FakeModelServer(api_key="sk-some-other-key", responder=ShellResponder()) as server:
        req = turn_request(agent, "hi", "ctx-e", "t-e", **model_config(server, workdir))
        result = asyncio.run(agent.run(req))
    assert result.error is not None and result.error.code == "pi.failed", result
    assert MODEL_KEY not in result.error.message and MODEL_KEY not in json.dumps(req.trajectory.events())


LONG_COMMAND = "python3 -c 'import time; time.sleep(300)'"


class SleepResponder:
    """Asks for a shell command that never ends on its own."""

    def __call__(self, req: RecordedRequest) -> Reply:
        if any(t["name"] == "bash" for t in req.tools) and not req.answered_tools:
            return Reply.tool_call("bash", {"command": LONG_COMMAND})
        return Reply(text="ok")


def group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                members.append(int(entry.name))
    return members


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


def test_cancelling_a_turn_leaves_no_process(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cli_path("pi", "pi")
    started: list[int] = []
    real_exec = asyncio.create_subprocess_exec

    async def recording_exec(*argv: str, **kwargs: object) -> asyncio.subprocess.Process:
        proc = await real_exec(*argv, **kwargs)  # type: ignore[arg-type]  # kwargs pass through unchanged
        started.append(proc.pid)
        return proc

    monkeypatch.setattr(harness.asyncio, "create_subprocess_exec", recording_exec)
    agent = PiAgent()

    async def scenario(server: FakeModelServer) -> tuple[list[int], list[dict]]:
        req = turn_request(agent, "Wait for a long time.", "ctx-c", "t-c", **model_config(server, workdir))
        task = asyncio.ensure_future(agent.run(req))
        for _ in range(1200):  # until pi's shell runs the long command
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
    assert group_members(started[0]) == [], "a process of pi's group is still running"
    assert not [pid for pid in before if _alive(pid)], "a process pi started is still running"
    assert any(e["type"] == "tool_use" and e["name"] == "bash" for e in events)


def test_a_missing_cli_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(harness, "CLI_CACHE", tmp_path / "no-cache")
    monkeypatch.setenv("PATH", str(tmp_path))
    agent = PiAgent()
    req = turn_request(agent, "hi", "ctx-m", "t-m", base_url="http://127.0.0.1:9", api_key="sk-x-secret", model="m")
    result = asyncio.run(agent.run(req))
    assert result.error is not None and result.error.code == "pi.cli_not_found"
    assert "scripts/setup-agent-clis.sh" in result.error.message and "\n" not in result.error.message


def test_no_model_is_one_line_naming_the_model_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LITELLM_BASE_URL", raising=False)
    agent = PiAgent()
    result = asyncio.run(agent.run(turn_request(agent, "hi", "ctx-n", "t-n")))
    assert result.error is not None and result.error.code == "pi.no_model"
    assert "[model]" in result.error.message and "\n" not in result.error.message
    named = asyncio.run(agent.run(turn_request(agent, "hi", "ctx-n", "t-n2", base_url="http://127.0.0.1:9")))
    assert named.error is not None and named.error.code == "pi.no_model" and "--model" in named.error.message


# --- the reference's pi-smoke task under `agentenv run` -------------------------------------------------------


def agentenv(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTENV_", "ANTHROPIC_", "LITELLM_"))}
    return subprocess.run([str(Path(sys.executable).parent / "agentenv"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=400, check=False)


@pytest.fixture
def smoke_bundle(tmp_path: Path) -> Path:
    """The reference's `agents` bundle with its pi task only."""
    bundle = copy_reference_bundle("agents", tmp_path)
    for task in (bundle / "tasks").iterdir():
        if task.name != "pi-smoke.json":
            task.unlink()
    (tmp_path / "proj").mkdir()
    return bundle


def test_the_smoke_task_passes_with_a_model_and_records_the_bash_call(smoke_bundle: Path) -> None:
    cli_path("pi", "pi")
    project = smoke_bundle.parent / "proj"
    with FakeModelServer(api_key=MODEL_KEY, responder=ShellResponder()) as server:
        (project / ".agentenv").mkdir()
        (project / ".agentenv" / "config.toml").write_text(
            f'[model]\napi = "openai"\nbase_url = "{server.base_url}"\napi_key = "{MODEL_KEY}"\n'
            'default = "fake-model"\n')
        out = agentenv(project, "run", str(smoke_bundle), "--task", "pi-smoke")
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
    assert run["context"]["deployed_agents"][0]["a2a_agent_id"] == "pi"
    assert MODEL_KEY not in shown  # the key never reaches the store


def test_without_a_model_the_run_fails_with_one_line(smoke_bundle: Path) -> None:
    project = smoke_bundle.parent / "proj"
    dry = agentenv(project, "run", str(smoke_bundle), "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    out = agentenv(project, "run", str(smoke_bundle), "--task", "pi-smoke")
    assert out.returncode != 0
    lines = [line for line in (out.stdout + out.stderr).splitlines() if "pi agent needs a model" in line]
    assert len(lines) == 1 and "[model] base_url" in lines[0], out.stdout + out.stderr


def test_the_full_bundle_knows_the_pi_agent(tmp_path: Path) -> None:
    bundle = copy_reference_bundle("agents", tmp_path)
    out = agentenv(tmp_path, "run", str(bundle), "--dry-run")
    text = out.stdout + out.stderr
    assert "pi-smoke" in text or out.returncode == 0, text
    assert "agent 'pi' not found" not in text
