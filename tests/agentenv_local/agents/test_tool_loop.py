"""The tool-loop agent over real HTTP: a FakeModelServer (both APIs), the echo env over MCP, A2AClient."""

from __future__ import annotations

import json

import pytest
from kits.agents import ECHO, run, serving_agent, serving_app

from agentenv_local.agents.client import A2AClient
from agentenv_local.agents.tool_loop import ToolLoopAgent
from agentenv_local.testing.fake_models import FakeModelServer, Reply

KEY = "sk-test-5e5e5e5e-very-secret"
APIS = ["openai", "anthropic"]


def _config(srv: FakeModelServer, api: str, **extra):
    return {"model": "fake-model", "base_url": srv.base_url, "api": api, "api_key": KEY, "max_retries": 0,
            **extra}


async def _events(client: A2AClient, task_id: str) -> list[dict]:
    return (await client.trajectory_get(task_id=task_id))["trajectory"]


@pytest.mark.parametrize("api", APIS)
def test_tool_round_trip_usage_trajectory_and_no_key_anywhere(api, echo_url):
    script = [Reply.tool_call("echo", {"text": "ping"}, usage=(10, 3)),
              Reply.tool_call("whoami", {}, usage=(20, 4)),
              Reply.text("echo said ping", usage=(30, 5))]

    async def go(base):
        async with A2AClient(base) as client:
            await client.mcp_config_add(echo_url, headers={"AgentEnv-Role": "alice"}, name="echo")
            await client.agent_config_set(**_config(srv, api), system_prompt="Use the tools.")
            task = await client.prompt("say ping", context_id="c1", timeout=60)
            events = await _events(client, task.id)
            config = await client.agent_config_get()
            card = await client.card()
            return task, events, config, card

    with FakeModelServer(api_key=KEY, script=script) as srv, serving_agent(ToolLoopAgent()) as base:
        task, events, config, card = run(go(base))
        requests = srv.valid_requests()
    assert task.state == "completed", task.raw
    assert task.text == "echo said ping"
    usage = task.data["usage"]
    assert usage["tool_call_count"] == 2
    assert (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]) == (60, 12, 72)
    assert len(requests) == 3 and all(r.api == api for r in requests)
    assert "Use the tools." in requests[0].system
    assert set(requests[0].tool_names) >= {"echo", "whoami", "fail"}
    results = requests[-1].tool_results
    assert results[0]["content"] == "ping"
    assert json.loads(results[1]["content"])["role"] == "alice"       # the registered headers were sent
    calls = [e for e in events if e["type"] == "tool_call"]
    assert [(c["server"], c["tool"], c["args"], c["is_error"]) for c in calls] == [
        ("echo", "echo", {"text": "ping"}, False), ("echo", "whoami", {}, False)]
    assert calls[0]["result"] == "ping" and calls[0]["duration_ms"] >= 0
    model_calls = [e for e in events if e["type"] == "model_call"]
    assert [m["stop_reason"] for m in model_calls] == ["tool_calls", "tool_calls", "end"]
    assert model_calls[0]["usage"]["input_tokens"] == 10 and model_calls[0]["latency_s"] >= 0
    assert model_calls[0]["model"] == "fake-model"
    # the key: masked on readback, never in the trajectory, the task or the card
    assert config["api_key"].startswith("***") and KEY not in json.dumps(config)
    for blob in (events, task.raw, card):
        assert KEY not in json.dumps(blob)


def test_tool_name_clash_is_prefixed_by_server(echo_url):
    from agentenv_local.env import load_env

    script = [Reply.tool_call("two__echo", {"text": "via two"}), Reply.text("ok")]

    async def go(base, other_url):
        async with A2AClient(base) as client:
            await client.mcp_config_add(echo_url, name="one")
            await client.mcp_config_add(other_url, name="two")
            await client.agent_config_set(**_config(srv, "openai"))
            task = await client.prompt("hi", timeout=60)
            return task, await _events(client, task.id)

    with FakeModelServer(api_key=KEY, script=script) as srv, serving_app(load_env(ECHO).app()) as other, \
            serving_agent(ToolLoopAgent()) as base:
        task, events = run(go(base, other + "/mcp"))
        offered = srv.valid_requests()[0].tool_names
    assert task.state == "completed", task.raw
    assert {"one__echo", "two__echo", "one__whoami", "two__whoami"} <= set(offered)
    assert "echo" not in offered
    call = next(e for e in events if e["type"] == "tool_call")
    assert (call["server"], call["tool"], call["result"], call["is_error"]) == ("two", "echo", "via two", False)


@pytest.mark.parametrize("api", APIS)
def test_unknown_tool_and_tool_error_are_error_results_not_crashes(api, echo_url):
    script = [Reply.calls([("no_such_tool", {"x": 1}), ("fail", {"code": "boom"})]), Reply.text("recovered")]

    async def go(base):
        async with A2AClient(base) as client:
            await client.mcp_config_add(echo_url)
            await client.agent_config_set(**_config(srv, api))
            task = await client.prompt("try", timeout=60)
            return task, await _events(client, task.id)

    with FakeModelServer(api_key=KEY, script=script) as srv, serving_agent(ToolLoopAgent()) as base:
        task, events = run(go(base))
        results = srv.valid_requests()[-1].tool_results
    assert task.state == "completed" and task.text == "recovered"
    assert "unknown tool 'no_such_tool'" in results[0]["content"] and "echo" in results[0]["content"]
    assert "this tool always fails" in results[1]["content"]
    if api == "anthropic":
        assert results[0]["is_error"] and results[1]["is_error"]
    calls = [e for e in events if e["type"] == "tool_call"]
    assert [(c["tool"], c["server"] is None, c["is_error"]) for c in calls] == [
        ("no_such_tool", True, True), ("fail", False, True)]
    assert task.data["usage"]["tool_call_count"] == 2


def test_endpoint_down_fails_fast_with_infra_error():
    async def go(base, url):
        async with A2AClient(base) as client:
            await client.agent_config_set(model="m", base_url=url, api_key=KEY, max_retries=0)
            return await client.prompt("hello", timeout=60)

    from agentenv_local.env.serve import bind_socket

    sock = bind_socket("127.0.0.1", 0)          # a port nobody listens on
    port = sock.getsockname()[1]
    sock.close()
    with serving_agent(ToolLoopAgent()) as base:
        task = run(go(base, f"http://127.0.0.1:{port}/v1"))
    assert not task.timed_out and task.state == "failed"
    assert task.error["error_type"] == "infra_error" and task.error["error_code"] == "tool_loop.model_error"
    assert "could not reach the endpoint" in task.error["error_message"]
    assert KEY not in json.dumps(task.raw)


@pytest.mark.parametrize("api", APIS)
def test_500_after_retries_and_a_key_the_server_echoes_are_masked(api):
    async def go(base, cfg):
        async with A2AClient(base) as client:
            await client.agent_config_set(**cfg)
            task = await client.prompt("hello", timeout=60)
            return task, await _events(client, task.id)

    with FakeModelServer(api_key=KEY, script=[Reply.error(500, "down"), Reply.error(500, "still down")]) as srv, \
            serving_agent(ToolLoopAgent()) as base:
        task, events = run(go(base, _config(srv, api, max_retries=1)))
        assert [r.status for r in srv.requests] == [500, 500]
    assert task.state == "failed" and task.error["error_type"] == "infra_error"
    assert "HTTP 500" in task.error["error_message"] and "after 2 attempts" in task.error["error_message"]

    # a proxy that quotes the (wrong) key back: never reaches the task or the trajectory
    with FakeModelServer(api_key="the-right-key", echo_key_in_errors=True) as srv, \
            serving_agent(ToolLoopAgent()) as base:
        task, events = run(go(base, _config(srv, api)))
    assert task.state == "failed" and "401" in task.error["error_message"]
    assert "***" in task.error["error_message"]
    assert KEY not in json.dumps(task.raw) and KEY not in json.dumps(events)


def test_multi_turn_keeps_history_per_context(echo_url):
    script = [Reply.tool_call("echo", {"text": "first"}), Reply.text("one"), Reply.text("two"),
              Reply.text("other")]

    async def go(base):
        async with A2AClient(base) as client:
            await client.mcp_config_add(echo_url)
            await client.agent_config_set(**_config(srv, "openai"), system_prompt="sys")
            first = await client.prompt("turn one", context_id="conv", timeout=60)
            second = await client.prompt("turn two", context_id="conv", timeout=60)
            other = await client.prompt("fresh", context_id="elsewhere", timeout=60)
            return first, second, other

    with FakeModelServer(api_key=KEY, script=script) as srv, serving_agent(ToolLoopAgent()) as base:
        first, second, other = run(go(base))
        reqs = srv.valid_requests()
    assert (first.text, second.text, other.text) == ("one", "two", "other")
    turn2 = reqs[2].messages
    roles = [m["role"] for m in turn2]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert turn2[1]["content"] == "turn one" and turn2[-1]["content"] == "turn two"
    assert turn2[4]["content"] == "one"
    assert [m["role"] for m in reqs[3].messages] == ["system", "user"]   # another context starts fresh


SCHEMA = {"type": "object", "required": ["answer", "count"], "additionalProperties": False,
          "properties": {"answer": {"type": "string"}, "count": {"type": "integer"}}}


@pytest.mark.parametrize("api", APIS)
def test_structured_output_is_requested_validated_and_repaired_once(api, echo_url):
    script = [Reply.tool_call("echo", {"text": "x"}), Reply.structured({"answer": "x"}),
              Reply.structured({"answer": "x", "count": 1})]

    async def go(base):
        async with A2AClient(base) as client:
            await client.mcp_config_add(echo_url)
            await client.agent_config_set(**_config(srv, api), output_format=SCHEMA)
            ok = await client.prompt("go", timeout=60)
            srv.push(Reply.structured({"count": "no"}), Reply.structured({"count": "still no"}))
            bad = await client.prompt("go", timeout=60)
            return ok, bad, await _events(client, ok.id)

    with FakeModelServer(api_key=KEY, script=script) as srv, serving_agent(ToolLoopAgent()) as base:
        ok, bad, events = run(go(base))
        reqs = srv.valid_requests()
    assert ok.state == "completed", ok.raw
    assert ok.structured_output == {"answer": "x", "count": 1}
    assert reqs[0].response_schema == SCHEMA or reqs[0].response_schema["required"] == ["answer", "count"]
    assert any(e["type"] == "output_format_retry" for e in events)
    assert bad.state == "failed" and bad.error["error_code"] == "tool_loop.output_format"


def test_max_steps_fails_with_a_clear_code(echo_url):
    async def go(base):
        async with A2AClient(base) as client:
            await client.mcp_config_add(echo_url)
            await client.agent_config_set(**_config(srv, "openai"), max_steps=2)
            return await client.prompt("loop", timeout=60)

    script = [Reply.tool_call("echo", {"text": "a"}), Reply.tool_call("echo", {"text": "b"})]
    with FakeModelServer(api_key=KEY, script=script) as srv, serving_agent(ToolLoopAgent()) as base:
        task = run(go(base))
    assert task.state == "failed" and task.error["error_code"] == "tool_loop.max_steps"
    assert "max_steps=2" in task.error["error_message"]


def test_not_configured_and_masked_handle_round_trip():
    from agentenv_local.agents.tool_loop import ToolLoopConfig

    cfg = ToolLoopConfig(api_key=KEY)
    dumped = cfg.model_dump(mode="json")
    assert KEY not in json.dumps(dumped) and KEY not in repr(cfg)
    assert ToolLoopConfig.model_validate(dumped).api_key.get_secret_value() == KEY
    with pytest.raises(ValueError, match="did not issue"):
        ToolLoopConfig(api_key="***0000")
    headers = ToolLoopConfig(model_headers={"X-Team": "team-secret"})  # write-only like the key
    assert "team-secret" not in json.dumps(headers.model_dump(mode="json")) and "team-secret" not in repr(headers)
    again = ToolLoopConfig.model_validate(headers.model_dump(mode="json"))
    assert again.model_headers["X-Team"].get_secret_value() == "team-secret"
    with pytest.raises(ValueError, match="did not issue"):
        ToolLoopConfig(model_headers={"X-Team": "***0000"})

    async def go(base):
        async with A2AClient(base) as client:
            return await client.prompt("hi", timeout=30)

    with serving_agent(ToolLoopAgent()) as base:
        task = run(go(base))
    assert task.state == "failed" and task.error["error_code"] == "tool_loop.not_configured"
