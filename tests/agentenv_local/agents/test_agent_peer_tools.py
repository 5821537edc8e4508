"""peer-agents/v1's MCP tools over real HTTP: an agent with peers set serves ``peer_agents`` at
/ext/peer-agents/mcp, and its tasks (the scripted agent's here) see that server among their MCP servers."""

from __future__ import annotations

import asyncio
import socket

import pytest
from kits.agents import run, serving_agent
from mcp import Client

from agentenv_local.agents import Agent, TaskRequest, TaskResult
from agentenv_local.agents.client import A2AClient, A2AExtensionError
from agentenv_local.agents.scripted import ScriptedAgent

TOOLS_PATH = "/ext/peer-agents/mcp"
TOOL_NAMES = {"peer_list", "peer_get_card", "peer_send_message", "peer_start_task", "peer_get_task",
              "peer_cancel_task"}


class Helper(Agent):
    """The peer: answers at once, or waits for a gate to open (``wait``), or never (``hang``)."""

    name = "helper"
    description = "Helps with things."

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()

    async def run(self, request: TaskRequest) -> TaskResult:
        if request.text == "hang":
            await asyncio.sleep(3600)
        if request.text == "wait":
            await self.gate.wait()
        if request.text == "open":
            self.gate.set()
        return TaskResult.text(f"helper got: {request.text} (context {request.context_id})")


class Quiet(Agent):
    """The agent whose peer tools are under test; its own tasks are not used."""

    name = "quiet"

    async def run(self, request: TaskRequest) -> TaskResult:
        return TaskResult.text("quiet")


def _closed_port_url() -> str:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now: connection refused
    return f"http://127.0.0.1:{port}"


async def _set_peers(base: str, peers: list[dict]) -> None:
    async with A2AClient(base) as agent:
        await agent.peer_agents_set(peers)


async def _call(tools: Client, tool: str, /, **args) -> tuple[bool, dict | None, str]:
    """(is_error, structured result, text) of one tool call."""
    result = await tools.call_tool(tool, args)
    text = "\n".join(c.text for c in result.content if getattr(c, "type", None) == "text")
    return bool(result.is_error), result.structured_content, text


def test_tools_are_listed_and_the_card_names_the_endpoint():
    async def go(base):
        async with A2AClient(base) as agent:
            card = await agent.card()
        async with Client(base + TOOLS_PATH, mode="legacy") as tools:  # the handshake reports the server's name
            listed = await tools.list_tools()
            return card, listed.tools, tools.server_info

    with serving_agent(Quiet()) as base:
        card, tools, server_info = run(go(base))
    ext = next(e for e in card["capabilities"]["extensions"] if e["uri"] == "urn:agentenv:peer-agents/v1")
    assert ext["params"]["mcp"]["endpoint"] == TOOLS_PATH and ext["params"]["mcp"]["server_name"] == "peer_agents"
    assert set(ext["params"]["mcp"]["tools"]) == TOOL_NAMES
    assert server_info.name == "peer_agents"
    assert {t.name for t in tools} == TOOL_NAMES
    by_name = {t.name: t for t in tools}
    assert by_name["peer_send_message"].input_schema["required"] == ["name", "message"]
    assert "timeout_seconds" in by_name["peer_send_message"].input_schema["properties"]
    assert all(t.description for t in tools)


def test_list_reads_the_current_peer_table():
    async def go(base):
        async with Client(base + TOOLS_PATH) as tools:
            empty = await _call(tools, "peer_list")
            await _set_peers(base, [{"name": "a", "url": "http://a.example", "description": "Agent A"},
                                    {"name": "b", "url": "http://b.example"}])
            two = await _call(tools, "peer_list")
            await _set_peers(base, [{"name": "c", "url": "http://c.example"}])
            one = await _call(tools, "peer_list")
            return empty, two, one

    with serving_agent(Quiet()) as base:
        empty, two, one = run(go(base))
    assert empty[:2] == (False, {"peers": []})
    assert two[:2] == (False, {"peers": [{"name": "a", "description": "Agent A", "url": "http://a.example"},
                                         {"name": "b", "description": "", "url": "http://b.example"}]})
    assert one[1] == {"peers": [{"name": "c", "description": "", "url": "http://c.example"}]}


def test_get_card_given_and_fetched():
    async def go(base, peer_base):
        await _set_peers(base, [{"name": "given", "url": peer_base, "card": {"name": "from-the-table", "x": 1}},
                                {"name": "fetched", "url": peer_base}])
        async with Client(base + TOOLS_PATH) as tools:
            return await _call(tools, "peer_get_card", name="given"), await _call(tools, "peer_get_card",
                                                                                  name="fetched")

    with serving_agent(Helper()) as peer_base, serving_agent(Quiet()) as base:
        given, fetched = run(go(base, peer_base))
    assert given[:2] == (False, {"name": "from-the-table", "x": 1})
    assert not fetched[0]
    assert fetched[1]["name"] == "helper" and fetched[1]["url"] == peer_base + "/a2a"


def test_send_message_answers_the_reply_and_continues_a_context():
    async def go(base, peer_base):
        await _set_peers(base, [{"name": "helper", "url": peer_base}])
        async with Client(base + TOOLS_PATH) as tools:
            first = await _call(tools, "peer_send_message", name="helper", message="hello")
            again = await _call(tools, "peer_send_message", name="helper", message="more",
                                context_id="conv-1", timeout_seconds=30)
            return first, again

    with serving_agent(Helper()) as peer_base, serving_agent(Quiet()) as base:
        (first_error, first, _), (again_error, again, again_text) = run(go(base, peer_base))
    assert not first_error and not again_error
    assert first["state"] == "completed" and first["timed_out"] is False
    assert first["text"] == f"helper got: hello (context {first['context_id']})" and first["task_id"]
    assert again["context_id"] == "conv-1" and again["text"] == "helper got: more (context conv-1)"
    assert "helper got: more" in again_text  # the text content carries the result too, for clients that read text


def test_start_task_then_get_task_until_completed():
    async def go(base, peer_base):
        await _set_peers(base, [{"name": "helper", "url": peer_base}])
        async with Client(base + TOOLS_PATH) as tools:
            started = await _call(tools, "peer_start_task", name="helper", message="wait")
            while_waiting = await _call(tools, "peer_get_task", name="helper", task_id=started[1]["task_id"])
            await _call(tools, "peer_send_message", name="helper", message="open")
            for _ in range(200):
                got = await _call(tools, "peer_get_task", name="helper", task_id=started[1]["task_id"])
                if got[0] or got[1]["state"] == "completed":
                    break
                await asyncio.sleep(0.05)
            return started, while_waiting, got

    with serving_agent(Helper()) as peer_base, serving_agent(Quiet()) as base:
        started, while_waiting, got = run(go(base, peer_base))
    assert not started[0] and set(started[1]) == {"task_id", "context_id", "state"}
    assert started[1]["state"] in ("submitted", "working")       # the gate is shut: it cannot have finished
    assert while_waiting[1]["state"] in ("submitted", "working") and while_waiting[1]["text"] == ""
    assert not got[0] and got[1]["state"] == "completed" and got[1]["task_id"] == started[1]["task_id"]
    assert got[1]["text"] == f"helper got: wait (context {started[1]['context_id']})"


def test_cancel_task_on_a_slow_peer():
    async def go(base, peer_base):
        await _set_peers(base, [{"name": "helper", "url": peer_base}])
        async with Client(base + TOOLS_PATH) as tools:
            started = await _call(tools, "peer_start_task", name="helper", message="hang")
            canceled = await _call(tools, "peer_cancel_task", name="helper", task_id=started[1]["task_id"])
            after = await _call(tools, "peer_get_task", name="helper", task_id=started[1]["task_id"])
            again = await _call(tools, "peer_cancel_task", name="helper", task_id=started[1]["task_id"])
            return started, canceled, after, again

    with serving_agent(Helper()) as peer_base, serving_agent(Quiet()) as base:
        started, canceled, after, again = run(go(base, peer_base))
    assert canceled[:2] == (False, {"task_id": started[1]["task_id"], "state": "canceled"})
    assert after[1]["state"] == "canceled"
    assert again[0] and "helper" in again[2] and "already canceled" in again[2]   # the peer's JSON-RPC error


def test_send_message_timeout_answers_the_task_to_follow():
    async def go(base, peer_base):
        await _set_peers(base, [{"name": "helper", "url": peer_base}])
        async with Client(base + TOOLS_PATH) as tools:
            sent = await _call(tools, "peer_send_message", name="helper", message="hang", timeout_seconds=0.2)
            assert not sent[0], f"peer_send_message failed: {sent[2]}"  # a CI run once failed here unexplained
            followed = await _call(tools, "peer_get_task", name="helper", task_id=sent[1]["task_id"])
            return sent, followed

    with serving_agent(Helper()) as peer_base, serving_agent(Quiet()) as base:
        (is_error, sent, _), followed = run(go(base, peer_base))
    assert not is_error and sent["timed_out"] is True and sent["task_id"]
    assert sent["state"] in ("submitted", "working") and "peer_get_task" in sent["hint"]
    assert followed[1]["task_id"] == sent["task_id"] and followed[1]["state"] in ("submitted", "working")


def test_unknown_peer_names_the_known_ones():
    async def go(base):
        async with Client(base + TOOLS_PATH) as tools:
            none_set = await _call(tools, "peer_send_message", name="ghost", message="hi")
            await _set_peers(base, [{"name": "alpha", "url": "http://a.example"},
                                    {"name": "beta", "url": "http://b.example"}])
            unknown = await _call(tools, "peer_get_card", name="ghost")
            missing_arg = await _call(tools, "peer_get_task", name="alpha")
            return none_set, unknown, missing_arg

    with serving_agent(Quiet()) as base:
        none_set, unknown, missing_arg = run(go(base))
    assert none_set[0] and "ghost" in none_set[2] and "no peers are set" in none_set[2]
    assert unknown[0] and "ghost" in unknown[2] and "alpha, beta" in unknown[2]
    assert missing_arg[0] and "task_id" in missing_arg[2]


def test_unreachable_or_broken_peers_are_tool_errors(echo_url):
    dead_url = _closed_port_url()
    env_base = echo_url.removesuffix("/mcp")  # an HTTP server that is not an A2A agent: no agent card

    async def go(base, peer_base):
        await _set_peers(base, [{"name": "dead", "url": dead_url}, {"name": "not-an-agent", "url": env_base},
                                {"name": "helper", "url": peer_base}])
        async with Client(base + TOOLS_PATH) as tools:
            return {"dead_send": await _call(tools, "peer_send_message", name="dead", message="hi"),
                    "dead_card": await _call(tools, "peer_get_card", name="dead"),
                    "bad_card": await _call(tools, "peer_start_task", name="not-an-agent", message="hi"),
                    "rpc_error": await _call(tools, "peer_get_task", name="helper", task_id="no-such-task")}

    with serving_agent(Helper()) as peer_base, serving_agent(Quiet()) as base:
        r = run(go(base, peer_base))
    for key in ("dead_send", "dead_card"):
        assert r[key][0] and "'dead'" in r[key][2] and dead_url in r[key][2] and "cannot reach" in r[key][2]
    assert r["bad_card"][0] and "not-an-agent" in r["bad_card"][2] and "no agent card" in r["bad_card"][2]
    assert r["rpc_error"][0] and peer_base in r["rpc_error"][2] and "Task not found" in r["rpc_error"][2]


def test_peer_agents_is_a_reserved_mcp_config_name():
    async def go(base):
        async with A2AClient(base) as agent:
            with pytest.raises(A2AExtensionError) as refused:
                await agent.mcp_config_add("http://x.example/mcp", name="peer_agents")
            return refused.value, await agent.mcp_config_list()

    with serving_agent(Quiet()) as base:
        refused, listed = run(go(base))
    assert refused.status == 400 and "reserved" in refused.detail and "peer_agents" in refused.detail
    assert listed == {}


def test_scripted_agent_reaches_its_peer_through_the_peer_tools():
    plan = [{"tool": "peer_send_message", "args": {"name": "helper", "message": "from scripted: {input}"},
             "save_as": "r"},
            {"reply": "peer said: {r.text}"}]

    async def go(base, peer_base):
        async with A2AClient(base) as agent:
            await agent.agent_config_set(plan=plan)
            before = await agent.prompt("too early", timeout=30)   # no peers yet: no peer_agents server
            await agent.peer_agents_set([{"name": "helper", "url": peer_base, "description": "helps"}])
            task = await agent.prompt("hello", context_id="c1", timeout=60)
            trajectory = await agent.trajectory_get(task_id=task.id)
            return before, task, trajectory

    with serving_agent(Helper()) as peer_base, serving_agent(ScriptedAgent()) as base:
        before, task, trajectory = run(go(base, peer_base))
    assert before.state == "failed" and before.error["error_code"] == "scripted.no_mcp_server"
    assert task.state == "completed", task.raw
    assert task.text.startswith("peer said: helper got: from scripted: hello (context ")
    calls = [e for e in trajectory["trajectory"] if e["type"] == "tool_call"]
    assert [(c["server"], c["tool"], c["is_error"]) for c in calls] == [("peer_agents", "peer_send_message", False)]
