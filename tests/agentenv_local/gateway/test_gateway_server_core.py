"""The gateway over real HTTP (Appendix A): composed card, /step, RBAC routes, /state, MCP (2026 and legacy
clients), the env-level data plane, /svc proxying, /changes and /trajectory. Children: the echo example served
by a subprocess over HTTP and the notes example in-process."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from kits.gateway import NOTES, gateway_serving, http, load

from agentenv_local.gateway.children import ChildSpec


@pytest.fixture()
def demo(echo_url):
    with gateway_serving("demo", [ChildSpec("echo", echo_url), ChildSpec("notes", load(NOTES))]) as (base, gw):
        yield base, gw


def names(body):
    return [t["name"] for t in body["tools"]]


ALL = ["echo", "whoami", "fail", "add_note", "list_notes", "get_note", "search_notes", "delete_note"]


def test_card_is_composed_with_gateway_extensions_and_children(demo):
    base, _ = demo
    with http(base) as h:
        card = h.get("/.well-known/agent-env.json").json()
    assert card["name"] == "demo"
    assert card["url"] == "/agentenv" and card["protocolVersion"] == "1.0"
    assert card["additionalInterfaces"] == [{"url": "/mcp", "transport": "mcp"}]
    uris = [e["uri"] for e in card["capabilities"]["extensions"]]
    assert uris == [f"urn:agentenv:{n}/v1" for n in
                    ("disable-tool", "enable-tool", "triggers", "clock", "trajectory", "step", "state")]
    for ext in card["capabilities"]["extensions"]:
        assert ext["params"]["endpoint"].startswith("/") and ext["params"]["methods"]
    children = {c["name"]: c for c in card["children_environments"]}
    assert children["echo"]["url"] == "/svc/mcp-echo/agentenv"
    assert children["notes"]["url"] == "/svc/mcp-notes/agentenv"
    assert children["echo"]["additionalInterfaces"] == []
    echo_ext = children["echo"]["capabilities"]["extensions"][0]
    assert echo_ext["params"]["endpoint"] == "/svc/mcp-echo/agentenv/ext/configure"


def test_step_list_and_call_as_alice(demo):
    base, _ = demo
    with http(base, **{"AgentEnv-Role": "alice"}) as h:
        listed = h.post("/step", json={"action": "list_tools"}).json()
        assert names(listed) == ALL  # call_count is hidden by default
        assert set(listed["tools"][0]) == {"name", "description", "parameters"}
        r = h.post("/step", json={"action": "call_tool", "tool_name": "echo", "arguments": {"text": "hi"}})
    assert r.status_code == 200
    assert r.json() == {"content": [{"type": "text", "text": "hi"}], "structuredContent": {"result": "hi"},
                        "isError": False, "changelog_id": None}


def test_rbac_disable_enable_sequences(demo):
    base, _ = demo
    with http(base) as h:
        r = h.post("/tools/disable", json={"role": "alice", "tools": ["echo"]})
        assert r.status_code == 200 and r.json() == {"role": "alice", "disabled": ["echo"], "allowed": []}
        alice = {"AgentEnv-Role": "alice"}
        assert "echo" not in names(h.post("/step", json={"action": "list_tools"}, headers=alice).json())
        r = h.post("/step", json={"action": "call_tool", "tool_name": "echo", "arguments": {"text": "x"}},
                   headers=alice)
        assert r.status_code == 403 and r.json() == {"error": "Tool 'echo' is disabled for role 'alice'"}
        import json as _json

        denied = [e for e in map(_json.loads, h.get("/trajectory").text.splitlines())
                  if e.get("event_type") == "tool_call_denied"]
        assert [(e["role"], e["tool_call"]["function_name"], e["error"]) for e in denied] == [
            ("alice", "echo", "Tool 'echo' is disabled for role 'alice'")]  # refusals are in the trajectory
        assert h.post("/tools/disable", json={"role": "*", "tools": "*"}).json() == {
            "role": "*", "disabled": ["*"], "allowed": []}
        h.post("/tools/enable", json={"role": "bob", "tools": ["list_notes"]})
        assert names(h.post("/step", json={"action": "list_tools"}, headers={"AgentEnv-Role": "bob"}).json()) == [
            "list_notes"]
        assert names(h.post("/step", json={"action": "list_tools"}).json()) == []
        h.post("/tools/enable", json={"role": "*", "tools": "*"})
        state = h.get("/state").json()
        assert state["roles"] == {"*": {"disabled": [], "allowed": ["*"]}}
        assert names(h.post("/step", json={"action": "list_tools"}).json()) == ALL


def test_rbac_and_step_bad_input(demo):
    base, _ = demo
    with http(base) as h:
        cases = [
            ("/tools/disable", b"{nope", {"error": "Invalid JSON body"}),
            ("/tools/disable", json.dumps({"tools": ["echo"]}).encode(), {"error": "Missing or invalid 'role' field"}),
            ("/tools/enable", json.dumps({"role": "a", "tools": "echo"}).encode(),
             {"error": "'tools' must be a list of strings or the string '*'"}),
            ("/step", b"{nope", {"error": "Invalid JSON body"}),
            ("/step", json.dumps({"action": "dance"}).encode(),
             {"error": "Unknown action: dance. Expected 'list_tools' or 'call_tool'."}),
            ("/step", json.dumps({"action": "call_tool"}).encode(), {"error": "Missing or invalid 'tool_name' field"}),
            ("/step", json.dumps({"action": "call_tool", "tool_name": "echo", "arguments": [1]}).encode(),
             {"error": "'arguments' must be a JSON object"}),
        ]
        for path, body, expected in cases:
            r = h.post(path, content=body, headers={"content-type": "application/json"})
            assert (r.status_code, r.json()) == (400, expected), (path, body)
        r = h.post("/step", json={"action": "call_tool", "tool_name": "nope", "arguments": {}})
        assert (r.status_code, r.json()) == (404, {"error": "Unknown tool: nope"})


def test_state_shape(demo):
    base, _ = demo
    with http(base) as h:
        state = h.get("/state").json()
    assert set(state) == {"mcp_servers", "changelog_id", "roles", "tool_name_clashes"}
    assert [s["name"] for s in state["mcp_servers"]] == ["echo", "notes"]
    assert [t["name"] for t in state["mcp_servers"][0]["tools"]] == ["echo", "whoami", "fail", "call_count"]
    assert state["changelog_id"] is None and state["tool_name_clashes"] == {}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_mcp_clients_list_call_and_rbac(demo, mode):
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    base, _ = demo
    with http(base) as h:
        h.post("/tools/disable", json={"role": "agent", "tools": ["echo"]})

    async def go():
        async with Client(base + "/mcp", mode=mode) as c:
            assert [t.name for t in (await c.list_tools()).tools] == ALL
            r = await c.call_tool("echo", {"text": "hi"})
            assert not r.is_error and r.structured_content == {"result": "hi"}
            who = await c.call_tool("whoami", {})
            assert who.structured_content["session"]  # a per-session key is stamped
            again = await c.call_tool("whoami", {})
            if mode == "legacy":
                assert again.structured_content["session"] == who.structured_content["session"]
            note = await c.call_tool("add_note", {"title": "t", "body": "b"})
            assert not note.is_error and note.structured_content["title"] == "t"
            unknown = await c.call_tool("nope", {})
            assert unknown.is_error and "Unknown tool: nope" in unknown.content[0].text
        client = httpx2.AsyncClient(headers={"AgentEnv-Role": "agent"})
        async with Client(streamable_http_client(base + "/mcp", http_client=client), mode=mode) as c:
            listed = [t.name for t in (await c.list_tools()).tools]
            assert "echo" not in listed and "whoami" in listed
            refused = await c.call_tool("echo", {"text": "hi"})
            assert refused.is_error and refused.content[0].text == "Tool 'echo' is disabled for role 'agent'"
            who = await c.call_tool("whoami", {})
            assert who.structured_content["role"] == "agent"

    asyncio.run(go())


def test_env_level_data_plane_needs_one_child(demo, echo_url):
    base, _ = demo
    with http(base) as h:
        r = h.post("/agentenv", json={"jsonrpc": "2.0", "id": 7, "method": "data/get", "params": {}})
    assert r.json() == {"jsonrpc": "2.0", "id": 7, "error": {
        "code": -32000, "message": "env-level data/get requires exactly one backing server, found 2"}}
    for child in (ChildSpec("echo", echo_url), ChildSpec("notes", load(NOTES))):
        with gateway_serving("one", [child]) as (b, _), http(b) as h:
            r = h.post("/agentenv", json={"jsonrpc": "2.0", "id": 1, "method": "data/get", "params": {}})
            assert r.status_code == 200 and "result" in r.json(), r.text


def test_svc_proxy_reaches_http_and_inprocess_children(demo):
    base, _ = demo
    with http(base) as h:
        assert h.get("/svc/mcp-echo/.well-known/agent-env.json").json()["name"] == "echo"
        assert h.get("/svc/mcp-notes/.well-known/agent-env.json").json()["name"] == "notes"
        r = h.post("/svc/mcp-echo/agentenv/ext/configure", json={"calls": 3})
        assert r.json() == {"ok": True, "calls": 3}
        r = h.post("/svc/mcp-notes/agentenv", json={"jsonrpc": "2.0", "id": 1, "method": "data/get", "params": {}})
        assert "result" in r.json()
        assert h.get("/svc/mcp-nope/x").status_code == 404


def test_changes_404_and_trajectory_events(demo):
    base, gw = demo
    seen = []
    gw.on_event = seen.append
    with http(base, **{"AgentEnv-Role": "alice"}) as h:
        r = h.get("/changes")
        assert (r.status_code, r.json()) == (404, {"ok": False, "error": "this env keeps no changelog"})
        h.post("/step", json={"action": "call_tool", "tool_name": "echo", "arguments": {"text": "t1"}})
        text = h.get("/trajectory").text
    events = [json.loads(line) for line in text.splitlines()]
    call = next(e for e in events if e["event_type"] == "tool_call"
                and e["tool_call"] == {"function_name": "echo", "arguments": {"text": "t1"}})
    assert call["role"] == "alice" and call["source"] == "step_api"
    assert call["event_id"].startswith("event_") and call["timestamp_utc"]
    result = next(e for e in events if e.get("tool_call_event_id") == call["event_id"])
    assert result["event_type"] == "tool_call_result"
    assert result["tool_call_result"]["structuredContent"] == {"result": "t1"}
    assert [e["event_id"] for e in seen] == [call["event_id"], result["event_id"]]


def test_origin_guard_refuses_foreign_browser_origins(demo):
    base, _ = demo
    with http(base) as h:
        assert h.get("/state", headers={"Origin": "https://evil.example"}).status_code == 403
        assert h.get("/state", headers={"Origin": "http://localhost:3000"}).status_code == 200
        assert h.get("/state").status_code == 200


def test_rbac_triggers_and_clock_state_are_reported_and_restore_into_a_new_gateway():
    from agentenv_local.gateway.clock import VirtualClock
    from agentenv_local.gateway.rbac import ToolAccess

    changes = []
    with gateway_serving("s", [ChildSpec("notes", load(NOTES))], on_state_change=changes.append) as (base, gw), \
            http(base) as h:
        h.post("/tools/disable", json={"role": "agent", "tools": ["delete_note"]})
        h.put("/clock/set-time", json={"virtual_time": "2025-03-10T09:00:00Z", "mode": "frozen"})
        h.post("/triggers/register", json={"watch_roles": ["agent"], "triggers": [
            {"id": "t1", "when": {"type": "action", "tool": "add_note"},
             "actions": [{"type": "permission", "action": "disable", "role": "agent", "tools": ["add_note"]}]}]})
        saved = (gw.access.to_dict(), gw.engine.to_dict(), gw.clock.to_dict())
    assert {"rbac", "clock", "triggers"} <= set(changes)
    restored = {"access": ToolAccess.from_dict(saved[0]), "triggers_state": saved[1],
                "clock": VirtualClock.from_dict(saved[2])}
    with gateway_serving("s", [ChildSpec("notes", load(NOTES))], **restored) as (base, _), http(base) as h:
        assert h.get("/state").json()["roles"]["agent"] == {"disabled": ["delete_note"], "allowed": []}
        assert [t["id"] for t in h.get("/triggers/state").json()["triggers"]] == ["t1"]
        assert h.get("/clock/time").json() == {"virtual_time": "2025-03-10T09:00:00Z"}
        h.post("/step", json={"action": "call_tool", "tool_name": "add_note", "arguments": {"title": "x"}},
               headers={"AgentEnv-Role": "agent"})
        for _ in range(100):
            if h.get("/triggers/state").json()["triggers"][0]["status"] == "fired":
                break
            time.sleep(0.05)
        assert h.get("/triggers/state").json()["triggers"][0]["status"] == "fired"
