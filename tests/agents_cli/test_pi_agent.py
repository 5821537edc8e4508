"""The `pi` agent (agentenv_local.agents.cli_agents.pi) driving the real pi CLI against the fake model server:
a turn's JSON events become trajectory events, a second turn of the context resumes pi's session, cancelling a
turn leaves no process, a missing CLI or model is one clear error; and the reference's `agents` bundle's
pi-smoke task passes under `agentenv run` (a real hub) with the bash call and 42 in the stored trajectory."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from agent_cli_kit import (
    LONG_COMMAND,
    MODEL_KEY,
    LongCommandResponder,
    agent_error,
    agentenv,
    assert_no_model_is_one_line,
    assert_no_process_left,
    cancel_a_running_turn,
    cli_path,
    missing_cli_error,
    record_started,
    run_office_task,
    run_reference_smoke,
    second_turn_resumes,
    sleepers_under,
    smoke_bundle_of,
    smoke_fails_without_model,
    stored_run,
    tool_calls,
    turn_request,
    write_model_config,
)
from kits.reference_bundles import copy_reference_bundle
from shell_responder import COMMAND, ShellResponder

from agentenv_local.agents.cli_agents.pi import PiAgent
from agentenv_local.agents.types import text_of
from agentenv_local.testing.fake_models import FakeModelServer, RecordedRequest, Reply


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

        second_turn_resumes(agent, server, model_config(server, workdir, api), session,
                            lambda r: r.path == wire and r.valid)

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


def test_cancelling_a_turn_leaves_no_process(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cli_path("pi", "pi")
    started = record_started(monkeypatch)
    agent = PiAgent()
    waits = LongCommandResponder("bash", command=LONG_COMMAND)
    with FakeModelServer(api_key=MODEL_KEY, responder=waits) as server:
        req = turn_request(agent, "Wait for a long time.", "ctx-c", "t-c", **model_config(server, workdir))
        before = cancel_a_running_turn(agent, req, started, sleepers_under)
    assert before
    assert_no_process_left(before, group=started[0], who="pi")
    assert any(e["type"] == "tool_use" and e["name"] == "bash" for e in req.trajectory.events())


def test_a_missing_cli_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    message = missing_cli_error(PiAgent(), tmp_path, monkeypatch)
    assert "\n" not in message


def test_no_model_is_one_line_naming_the_model_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    agent = PiAgent()
    assert_no_model_is_one_line(agent, monkeypatch)
    unnamed = turn_request(agent, "hi", "ctx-n", "t-n2", base_url="http://127.0.0.1:9")
    assert "--model" in agent_error(agent, unnamed, "no_model")


# --- the reference's pi-smoke task under `agentenv run` -------------------------------------------------------

DROP = ("ANTHROPIC_",)


@pytest.fixture
def smoke_bundle(tmp_path: Path) -> Path:
    """The reference's `agents` bundle with its pi task only."""
    return smoke_bundle_of(tmp_path, "pi")


def test_the_smoke_task_passes_with_a_model_and_records_the_bash_call(smoke_bundle: Path) -> None:
    cli_path("pi", "pi")
    trajectory = run_reference_smoke(smoke_bundle, "pi", ShellResponder(), lambda server: {
        "api": "openai", "base_url": server.base_url, "default": "fake-model"}, DROP)
    calls = tool_calls(trajectory)
    assert [(c["name"], c["args"]["command"], c["result"].strip()) for c in calls] == [("bash", COMMAND, "42")]
    assert "42" in [e for e in trajectory if e.get("type") == "final"][-1]["text"]


def test_without_a_model_the_run_fails_with_one_line(smoke_bundle: Path) -> None:
    smoke_fails_without_model(smoke_bundle, "pi", DROP, dry_run=True)


def test_the_full_bundle_knows_the_pi_agent(tmp_path: Path) -> None:
    bundle = copy_reference_bundle("agents", tmp_path)
    out = agentenv(tmp_path, "run", str(bundle), "--dry-run", drop=DROP)
    text = out.stdout + out.stderr
    assert "pi-smoke" in text or out.returncode == 0, text
    assert "agent 'pi' not found" not in text


def test_pi_calls_an_office_tool_through_the_gateway_under_a_role(tmp_path: Path) -> None:
    """pi has no MCP client: our extension (pi_mcp.js, loaded with -e) lists the gateway's tools under the role
    and registers each as a pi tool <server>_<tool>, called over MCP streamable HTTP."""
    cli_path("pi", "pi")
    responder = ShellResponder(mcp_tool="_search_emails", mcp_args={"query": "acme pricing"})
    offered = run_office_task(tmp_path, "pi", responder, lambda server: {
        "api": "openai", "base_url": server.base_url, "default": "fake-model"}, DROP, "/v1/chat/completions")
    assert responder.called == ["office_search_emails"]
    assert offered and all("office_purge_mailbox" not in names for names in offered)  # RBAC of the role
    assert all("office_read_email" in names and "office_log_activity" in names for names in offered), offered


def test_the_model_endpoints_headers_reach_the_model_through_the_proxy(smoke_bundle: Path) -> None:
    """[model.headers] of the configured endpoint: deploy_agent hands them to the agent (model_headers), its model
    proxy adds them to every model request; they are in no stored byte."""
    cli_path("pi", "pi")
    project = smoke_bundle.parent / "proj"
    seen: list[str | None] = []

    def responder(request: RecordedRequest) -> Reply:
        seen.append(request.headers.get("x-team-secret"))
        return shell(request)

    shell = ShellResponder()
    with FakeModelServer(api_key=MODEL_KEY, responder=responder) as server:
        write_model_config(project, api="openai", base_url=server.base_url, default="fake-model")
        with (project / ".agentenv" / "config.toml").open("a") as f:
            f.write('[model.headers]\nX-Team-Secret = "team-secret-header-value"\n')
        out = agentenv(project, "run", str(smoke_bundle), "--task", "pi-smoke", drop=DROP)
    assert out.returncode == 0 and "passed" in out.stdout, out.stdout + out.stderr
    assert seen and set(seen) == {"team-secret-header-value"}, seen
    _, shown = stored_run(project, DROP)
    assert "team-secret-header-value" not in shown


def test_our_extension_sends_the_headers_reports_tool_errors_and_skips_a_server_it_cannot_list(
        workdir: Path, echo_mcp_url: str) -> None:
    """pi_mcp.js against the echo env: its tools carry the registration's headers (whoami sees the role), an MCP
    error result is a failed tool call, and an unreachable server is left out without failing the turn."""
    cli_path("pi", "pi")
    agent = PiAgent()
    calls = iter([("echo_whoami", {}), ("echo_fail", {"code": "nope"})])

    def responder(request: RecordedRequest) -> Reply:
        if not any(t["name"] == "echo_whoami" for t in request.tools):
            return Reply(text="ok")  # not a turn offering the extension's tools
        step = next(calls, None)
        return Reply.tool_call(*step) if step else Reply(text="DONE")

    servers = {"echo": {"url": echo_mcp_url, "headers": {"AgentEnv-Role": "tester"}},
               "gone": {"url": "http://127.0.0.1:9/mcp"}}
    with FakeModelServer(api_key=MODEL_KEY, responder=responder) as server:
        req = turn_request(agent, "Who am I? Then fail.", "ctx-x", "t-x", mcp=servers, **model_config(server, workdir))
        result = asyncio.run(agent.run(req))
        offered = [r.tool_names for r in server.requests if r.tools]
    assert result.error is None, (result, req.trajectory.events())
    assert offered and all(not any(n.startswith("gone_") for n in names) for names in offered)
    whoami, fail = [e for e in req.trajectory.events() if e["type"] == "tool_call"]
    assert (whoami["server"], whoami["tool"], whoami["is_error"]) == ("echo", "whoami", False)
    assert json.loads(whoami["result"])["role"] == "tester", whoami["result"]
    assert (fail["server"], fail["tool"], fail["is_error"]) == ("echo", "fail", True)
    assert "this tool always fails" in fail["result"], fail["result"]
