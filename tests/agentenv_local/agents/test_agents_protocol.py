"""The A2A server and client over real HTTP: card, both dialects, blocking and polling, cancel, errors."""

from __future__ import annotations

import asyncio

import httpx2
import pytest
from kits.agents import run, serving_agent, subprocess_server

from agentenv_local.agents import (
    Agent,
    AgentConfig,
    TaskProgress,
    TaskRequest,
    TaskResult,
)
from agentenv_local.agents.client import (
    A2AClient,
    A2AProtocolError,
    A2ARpcError,
    A2ATask,
)


class Echoer(Agent):
    name = "echoer"
    description = "Says back what it is sent."

    async def run(self, request: TaskRequest) -> TaskResult:
        if request.text == "boom":
            raise RuntimeError("secret internal detail")
        if request.text == "hang":
            await asyncio.sleep(3600)
        if request.text == "slow":
            await asyncio.sleep(0.3)
        return TaskResult.builder().succeeded().add_text(f"you said: {request.text}").add_data(
            {"seen": request.data, "context": request.context_id}).build()


class Streamer(Agent):
    name = "streamer"

    async def run(self, request: TaskRequest):
        yield TaskProgress.text("thinking")
        await asyncio.sleep(0.3)
        yield TaskResult.text("done")


class Counter(Agent):
    """Records the order turns run in, per context, and how many run at once."""

    name = "counter"

    def __init__(self) -> None:
        super().__init__()
        self.running = 0
        self.max_running = 0
        self.order: list[str] = []

    async def run(self, request: TaskRequest) -> TaskResult:
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        await asyncio.sleep(0.1)
        self.order.append(request.text)
        self.running -= 1
        return TaskResult.text(request.text)


def test_card_and_health():
    async def go(base):
        async with httpx2.AsyncClient() as h:
            cards = [(await h.get(base + p)).json() for p in ("/.well-known/agent-card.json",
                                                                "/.well-known/agent.json")]
            health = (await h.get(base + "/health")).json()
        return cards, health

    with serving_agent(Echoer()) as base:
        (card, card2), health = run(go(base))
    assert card == card2 and health == {"status": "ok"}
    assert card["name"] == "echoer" and card["url"] == base + "/a2a"
    assert card["protocolVersion"] == "0.3.0" and card["preferredTransport"] == "JSONRPC"
    uris = {e["uri"] for e in card["capabilities"]["extensions"]}
    assert {"urn:agentenv:agent-config/v1", "urn:agentenv:mcp-config/v1", "urn:agentenv:skill-config/v1",
            "urn:agentenv:trajectory/v1", "urn:agentenv:triggers/v1", "urn:agentenv:peer-agents/v1"} <= uris
    config_ext = next(e for e in card["capabilities"]["extensions"] if e["uri"].endswith("agent-config/v1"))
    assert "system_prompt" in config_ext["params"]["methods"]["set"]["request"]["supported"]
    assert {i["protocolVersion"] for i in card["supportedInterfaces"]} == {"0.3", "1.0"}


def _rpc(base, method, params, req_id=1):
    with httpx2.Client() as h:
        return h.post(base + "/a2a", json={"jsonrpc": "2.0", "id": req_id, "method": method, "params": params}).json()


def test_03_wire_shapes_blocking():
    msg = {"kind": "message", "messageId": "m1", "role": "user", "contextId": "ctx-1",
           "parts": [{"kind": "text", "text": "hi"}, {"kind": "data", "data": {"x": 1}}]}
    with serving_agent(Echoer()) as base:
        answer = _rpc(base, "message/send", {"message": msg})
        got = _rpc(base, "tasks/get", {"id": answer["result"]["id"], "historyLength": 1})
        root = httpx2.post(base + "/", json={"jsonrpc": "2.0", "id": 2, "method": "tasks/get",
                                             "params": {"id": answer["result"]["id"]}}).json()
    task = answer["result"]
    assert answer["id"] == 1 and task["kind"] == "task" and task["contextId"] == "ctx-1"
    assert task["status"]["state"] == "completed" and task["status"]["timestamp"]
    parts = task["status"]["message"]["parts"]
    assert parts[0] == {"kind": "text", "text": "you said: hi"}
    assert parts[1] == {"kind": "data", "data": {"seen": {"x": 1}, "context": "ctx-1"}}
    assert task["status"]["message"]["role"] == "agent" and task["status"]["message"]["kind"] == "message"
    assert task["artifacts"][0]["parts"][0]["text"] == "you said: hi" and task["artifacts"][0]["artifactId"]
    assert [m["role"] for m in task["history"]] == ["user", "agent"]
    assert len(got["result"]["history"]) == 1 and got["result"]["history"][0]["role"] == "agent"
    assert root["result"]["status"]["state"] == "completed"


def test_10_wire_shapes_and_polling():
    msg = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "slow"}, {"data": {"y": 2}}]}
    with serving_agent(Echoer()) as base:
        sent = _rpc(base, "SendMessage", {"message": msg, "configuration": {"returnImmediately": True}})
        task = sent["result"]["task"]
        assert task["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
        assert "kind" not in task
        blocking = _rpc(base, "SendMessage", {"message": {**msg, "messageId": "m2", "parts": [{"text": "hi"}]}})
        assert blocking["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        for _ in range(200):
            got = _rpc(base, "GetTask", {"id": task["id"]})["result"]
            if got["status"]["state"] == "TASK_STATE_COMPLETED":
                break
            asyncio.run(asyncio.sleep(0.02))
        cancel = _rpc(base, "CancelTask", {"id": task["id"]})
    assert got["status"]["state"] == "TASK_STATE_COMPLETED"
    parts = got["status"]["message"]["parts"]
    assert parts[0] == {"text": "you said: slow"} and parts[1] == {"data": {"seen": {"y": 2},
                                                                            "context": task["contextId"]}}
    assert got["status"]["message"]["role"] == "ROLE_AGENT"
    assert cancel["error"]["code"] == -32002


def test_client_both_protocols_nonblocking_and_poll():
    async def go(base, protocol):
        async with A2AClient(base, protocol=protocol) as client:
            first = await client.send("slow", context_id="c")
            done = await client.wait(first, timeout=10)
            again = await client.prompt({"k": "v"}, context_id="c")
            return first, done, again, client.protocol

    with serving_agent(Echoer()) as base:
        for protocol in (None, "1.0"):
            first, done, again, spoken = run(go(base, protocol))
            assert spoken == (protocol or "0.3")
            assert first.state in ("submitted", "working") and not first.terminal
            assert done.state == "completed" and done.text == "you said: slow" and not done.timed_out
            assert done.data["context"] == "c" and again.data["seen"] == {"k": "v"}


def test_streaming_progress_is_visible_while_working():
    async def go(base):
        async with A2AClient(base) as client:
            task = await client.send("x")
            seen = []
            for _ in range(100):
                task = await client.get_task(task.id)
                seen.append((task.state, task.text))
                if task.terminal:
                    break
                await asyncio.sleep(0.02)
            return seen

    with serving_agent(Streamer()) as base:
        seen = run(go(base))
    assert ("working", "thinking") in seen and seen[-1] == ("completed", "done")


def test_timeout_returns_last_state_then_cancel():
    async def go(base):
        async with A2AClient(base) as client:
            task = await client.prompt("hang", timeout=0.3)
            canceled = await client.cancel(task.id)
            after = await client.get_task(task.id)
            with pytest.raises(A2ARpcError) as again:
                await client.cancel(task.id)
            with pytest.raises(A2ARpcError) as missing:
                await client.get_task("nope")
            return task, canceled, after, again.value, missing.value

    with serving_agent(Echoer()) as base:
        task, canceled, after, again, missing = run(go(base))
    assert task.timed_out and task.state == "working"
    assert canceled.state == "canceled" and after.state == "canceled"
    assert again.code == -32002 and missing.code == -32001


def test_exception_becomes_infra_error_without_leaking():
    async def go(base):
        async with A2AClient(base) as client:
            return await client.prompt("boom", timeout=10)

    with serving_agent(Echoer()) as base:
        task = run(go(base))
    assert task.state == "failed"
    assert task.error["error_type"] == "infra_error"
    assert task.error["error_code"] == "framework.unhandled_exception"
    assert "secret" not in str(task.raw)


def test_turns_of_a_context_run_serially_contexts_concurrently():
    agent = Counter()

    async def go(base):
        async with A2AClient(base) as client:
            sent = [await client.send(f"a{i}", context_id="A") for i in range(3)]
            sent += [await client.send(f"b{i}", context_id=f"B{i}") for i in range(3)]
            return [await client.wait(t, timeout=10) for t in sent]

    with serving_agent(agent) as base:
        tasks = run(go(base))
    assert all(t.state == "completed" for t in tasks)
    assert [x for x in agent.order if x.startswith("a")] == ["a0", "a1", "a2"]
    assert agent.max_running >= 2


@pytest.mark.parametrize("body, code, field", [
    ("not json", -32700, None),
    ({"jsonrpc": "1.0", "id": 1, "method": "tasks/get", "params": {"id": "x"}}, -32600, "jsonrpc"),
    ({"jsonrpc": "2.0", "id": 1, "params": {}}, -32600, "method"),
    ({"jsonrpc": "2.0", "id": 1, "method": "tasks/explode", "params": {}}, -32601, "method"),
    ({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {}}, -32602, "params.id"),
    ({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {}}, -32602, "params.message"),
    ({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {
        "messageId": "m", "role": "user", "parts": [{"text": "no kind"}]}}}, -32602, "params.message.parts[0].kind"),
    ({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {
        "messageId": "m", "role": "robot", "parts": [{"kind": "text", "text": "x"}]}}}, -32602,
     "params.message.role"),
    ({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
        "messageId": "m", "role": "ROLE_USER", "parts": [{"text": 5}]}}}, -32602, "params.message.parts[0].text"),
    ({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {
        "message": {"messageId": "m", "role": "user", "parts": [{"kind": "text", "text": "x"}]},
        "configuration": {"blocking": "yes"}}}, -32602, "params.configuration.blocking"),
])
def test_malformed_requests_name_the_field(body, code, field):
    with serving_agent(Echoer()) as base, httpx2.Client() as h:
        answer = h.post(base + "/a2a", content=body if isinstance(body, str) else None,
                        json=None if isinstance(body, str) else body).json()
    assert answer["error"]["code"] == code
    if field:
        assert answer["error"]["data"]["field"] == field and field in answer["error"]["message"].lower()


def test_client_rejects_protocol_violations():
    with pytest.raises(A2AProtocolError) as e:
        A2ATask({"id": "t", "status": {}})
    assert e.value.field == "result.status.state"
    with pytest.raises(A2AProtocolError) as e:
        A2ATask({"id": "t", "status": {"state": "done-ish"}})
    assert e.value.field == "result.status.state"
    with pytest.raises(A2AProtocolError) as e:
        A2ATask({"status": {"state": "completed"}})
    assert e.value.field == "result.id"


def test_agent_config_flows_into_requests():
    class Cfg(AgentConfig):
        greeting: str = "hello"

    class Greeter(Agent):
        name = "greeter"
        config_model = Cfg

        async def run(self, request: TaskRequest) -> TaskResult:
            c = request.config
            assert isinstance(c, Cfg)
            return TaskResult.text(f"{c.greeting} from {c.name} as {c.role} ({request.metadata.get('role')})")

    async def go(base):
        async with A2AClient(base) as client:
            await client.agent_config_set(name="g1", role="support", greeting="hi")
            await client.agent_config_set(model="m")  # merges
            config = await client.agent_config_get()
            card = await client.card(refresh=True)
            task = await client.prompt("x", timeout=10)
            from agentenv_local.agents.client import A2AExtensionError
            with pytest.raises(A2AExtensionError) as bad:
                await client.agent_config_set(colour="red")
            with pytest.raises(A2AExtensionError) as blank:
                await client.agent_config_set(name=" ")
            return config, card, task, bad.value, blank.value

    with serving_agent(Greeter()) as base:
        config, card, task, bad, blank = run(go(base))
    assert config["name"] == "g1" and config["greeting"] == "hi" and config["model"] == "m"
    assert card["name"] == "g1"
    assert task.text == "hi from g1 as support (support)"
    assert bad.status == 400 and "colour" in bad.detail
    assert blank.status == 400 and "name" in blank.detail


def test_cli_serves_scripted_agent_in_a_subprocess(tmp_path):
    import json

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps([{"reply": "scripted says {input}"}]))

    async def go(base):
        async with A2AClient(base) as client:
            return await client.card(), await client.prompt("hey", timeout=20)

    with subprocess_server(["-m", "agentenv_local.agents", "scripted", "--plan", str(plan), "--port", "0"]) as (
            base, _proc):
        card, task = run(go(base))
    assert card["name"] == "scripted" and task.text == "scripted says hey"
