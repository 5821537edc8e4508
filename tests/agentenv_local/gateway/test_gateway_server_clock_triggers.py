"""The gateway's virtual clock and triggers over real HTTP (Appendix A items 7 and 9): arming, `get_time`,
stepped time stamped on calls and events, action/permission/time triggers, refused trigger specs, and the
trajectory's trigger events."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from kits.gateway import NOTES, gateway_serving, http, load

from agentenv_local.env import Env, environment_card, tool
from agentenv_local.gateway.children import ChildSpec


@pytest.fixture()
def demo(echo_url):
    with gateway_serving("demo", [ChildSpec("echo", echo_url), ChildSpec("notes", load(NOTES))]) as (base, gw):
        yield base, gw


def step_names(h, role="default"):
    return [t["name"] for t in h.post("/step", json={"action": "list_tools"},
                                      headers={"AgentEnv-Role": role}).json()["tools"]]


def call(h, tool, args, role="default"):
    return h.post("/step", json={"action": "call_tool", "tool_name": tool, "arguments": args},
                  headers={"AgentEnv-Role": role})


def test_clock_unarmed_armed_get_time_and_clear(demo):
    from mcp import Client

    base, _ = demo
    with http(base) as h:
        r = h.get("/clock/time")
        assert (r.status_code, r.json()) == (404, {"ok": False, "error": "clock not armed"})
        assert "get_time" not in step_names(h)
        r = h.put("/clock/set-time", json={"virtual_time": "2025-03-10"})
        assert r.status_code == 400 and r.json() == {"ok": False, "error": (
            "invalid RFC3339 virtual_time '2025-03-10': expected YYYY-MM-DDThh:mm:ss[.fff](Z|+hh:mm)")}
        assert h.put("/clock/set-time", content=b"{x").json() == {"ok": False, "error": "Invalid JSON body"}
        r = h.put("/clock/set-time", json={"virtual_time": "2025-03-10T09:00:00Z",
                                           "virtual_seconds_per_real_second": 3600})
        body = r.json()
        assert r.status_code == 200 and body["armed"] is True and body["t0"] == "2025-03-10T09:00:00Z"
        assert body["virtual_seconds_per_real_second"] == 3600
        assert "get_time" in step_names(h)
        assert h.get("/clock/time").json()["virtual_time"] >= "2025-03-10T09:00:00"
        state = h.get("/clock/state").json()
        assert state["armed"] and state["env_get_time_url"].endswith("/clock/time")
        r = call(h, "get_time", {"time_zone": "America/New_York"})
        reading = r.json()["structuredContent"]
        assert reading["current_time"].endswith("Z") and reading["time_zone"] == "America/New_York"
        assert reading["local_time"].endswith("-04:00")
        bad = call(h, "get_time", {"time_zone": "Mars/Olympus"}).json()
        assert bad["isError"] is True

    async def mcp_get_time():
        async with Client(base + "/mcp") as c:
            assert "get_time" in [t.name for t in (await c.list_tools()).tools]
            r = await c.call_tool("get_time", {"time_zone": "America/New_York"})
            assert r.structured_content["local_time"].endswith("-04:00")

    asyncio.run(mcp_get_time())
    with http(base) as h:
        assert h.post("/clock/clear").json() == {"ok": True, "armed": False}
        assert "get_time" not in step_names(h)
        assert h.get("/clock/time").status_code == 404


@environment_card(name="timed")
class OwnClock(Env):
    @tool()
    def get_time(self) -> str:
        """This server keeps its own time."""
        return "noon"


def test_child_with_own_get_time_makes_arming_a_409():
    with gateway_serving("t", [ChildSpec("timed", OwnClock())]) as (base, _), http(base) as h:
        r = h.put("/clock/set-time", json={"virtual_time": "2025-03-10T09:00:00Z"})
        assert (r.status_code, r.json()) == (409, {
            "ok": False, "error": "'get_time' is already registered by a backing server"})
        assert call(h, "get_time", {}).json()["structuredContent"] == {"result": "noon"}


def test_stepped_clock_stamps_calls_and_trajectory(demo):
    base, _ = demo
    with http(base, **{"AgentEnv-Role": "agent"}) as h:
        h.put("/clock/set-time", json={"virtual_time": "2025-03-10T09:00:00Z", "mode": "stepped",
                                       "step_seconds": 60})
        first = call(h, "whoami", {}, role="agent").json()["structuredContent"]
        second = call(h, "whoami", {}, role="agent").json()["structuredContent"]
        assert first["virtual_time"].startswith("2025-03-10T09:01:00")
        assert second["virtual_time"].startswith("2025-03-10T09:02:00")
        events = [json.loads(x) for x in h.get("/trajectory").text.splitlines()]
    stamped = [e for e in events if e["event_type"] in ("tool_call", "tool_call_result")]
    assert stamped and all(e["virtual_time"].startswith("2025-03-10T09:0") for e in stamped)
    assert all(e["role"] == "agent" for e in stamped if e["event_type"] == "tool_call")


def wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_action_and_permission_triggers_fire(demo):
    base, _ = demo
    with http(base) as h:
        h.put("/clock/set-time", json={"virtual_time": "2025-03-10T09:00:00Z", "mode": "frozen"})
        r = h.post("/triggers/register", json={"watch_roles": ["agent"], "triggers": [
            {"id": "mirror", "when": {"type": "action", "tool": "search_notes"},
             "actions": [{"type": "tool", "tool": "echo", "args": {"text": "seen ${args.query}"}}],
             "barrier": {"at": "provoking_call"}},
            {"id": "lock", "when": {"type": "action", "tool": "echo"},
             "actions": [{"type": "permission", "action": "disable", "role": "agent", "tools": ["echo"]}]},
        ]})
        assert r.status_code == 200 and r.json() == {"ok": True, "added": ["mirror", "lock"], "all": ["mirror", "lock"]}
        assert call(h, "search_notes", {"query": "budget"}, role="agent").json()["isError"] is False
        state = h.get("/triggers/state").json()
        mirror = next(t for t in state["triggers"] if t["id"] == "mirror")
        assert mirror["status"] == "fired" and mirror["fire_count"] == 1
        assert all(e.get("virtual_time") == "2025-03-10T09:00:00Z" for e in state["events"])
        assert call(h, "echo", {"text": "one"}, role="agent").status_code == 200
        wait_for(lambda: "echo" not in step_names(h, "agent"))
        r = call(h, "echo", {"text": "two"}, role="agent")
        assert (r.status_code, r.json()) == (403, {"error": "Tool 'echo' is disabled for role 'agent'"})
        events = [json.loads(x) for x in h.get("/trajectory").text.splitlines()]
    fired = [e for e in events if e["event_type"] == "trigger_fired"]
    assert {e["trigger_id"] for e in fired} == {"mirror", "lock"}
    internal = next(e for e in events if e["event_type"] == "internal_tool_call")
    assert internal["trigger_id"] == "mirror" and internal["event_id"] and internal["virtual_time"]
    assert all("timestamp_utc" in e and "event_id" in e for e in events)


def test_time_trigger_fires_after_the_stepped_clock_passes_its_mark(demo):
    base, _ = demo
    with http(base) as h:
        h.put("/clock/set-time", json={"virtual_time": "2025-03-10T09:00:00Z", "mode": "stepped",
                                       "step_seconds": 3600})
        r = h.post("/triggers/register", json={"watch_roles": ["agent"], "triggers": [
            {"id": "late", "when": {"type": "time", "at": "PT2H"},
             "actions": [{"type": "tool", "tool": "add_note", "args": {"title": "two hours in"}}]}]})
        assert r.status_code == 200, r.text
        call(h, "whoami", {}, role="agent")  # 10:00
        assert next(t for t in h.get("/triggers/state").json()["triggers"])["status"] == "armed"
        call(h, "whoami", {}, role="agent")  # 11:00: past t0 + 2h
        wait_for(lambda: h.get("/triggers/state").json()["triggers"][0]["status"] == "fired")
        notes = call(h, "search_notes", {"query": "two hours"}, role="agent").json()
        assert "two hours in" in json.dumps(notes)


def test_bad_trigger_specs_are_refused_with_precise_messages(demo):
    base, _ = demo
    with http(base) as h:
        r = h.post("/triggers/register", json={"triggers": [
            {"id": "ask", "when": {"type": "action", "tool": "echo"},
             "actions": [{"type": "nl", "instruction": "reply"}]}]})
        assert r.status_code == 400 and "actions[0]: nl actions require an executor" in r.json()["error"]
        assert r.json()["ok"] is False
        r = h.post("/triggers/register", content=b"{x")
        assert (r.status_code, r.json()) == (400, {"ok": False, "error": "Invalid JSON body"})
        r = h.post("/triggers/register", json={"triggers": [
            {"id": "x", "when": {"type": "action", "tool": "no_such_tool"}, "actions": [
                {"type": "permission", "action": "disable", "role": "a", "tools": "*"}]}]})
        assert r.status_code == 400 and "no_such_tool" in r.json()["error"]
        assert h.post("/triggers/clear").json()["ok"] is True
        assert h.get("/triggers/state").json()["triggers"] == []


def test_nl_action_reaches_an_a2a_executor(demo):
    """A minimal A2A executor (message/send answering a completed task) gets the instruction."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    got = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            got.append((self.path, body))
            answer = {"jsonrpc": "2.0", "id": body["id"], "result": {
                "kind": "task", "id": "t1", "contextId": body["params"]["message"]["contextId"],
                "status": {"state": "completed"}, "artifacts": [{"parts": [{"kind": "text", "text": "done"}]}]}}
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base, _ = demo
        with http(base) as h:
            r = h.post("/triggers/register", json={
                "watch_roles": ["agent"],
                "executor": {"a2a_url": f"http://127.0.0.1:{server.server_port}", "role": "helper"},
                "triggers": [{"id": "ask", "when": {"type": "action", "tool": "echo"},
                              "actions": [{"type": "nl", "instruction": "reply to the customer"}]}]})
            assert r.status_code == 200, r.text
            call(h, "echo", {"text": "hello"}, role="agent")
            wait_for(lambda: h.get("/triggers/state").json()["triggers"][0]["status"] == "fired")
        path, body = got[0]
        assert path == "/a2a" and body["method"] == "message/send"
        assert body["params"]["message"]["parts"][0]["text"] == "reply to the customer"
        assert body["params"]["message"]["contextId"] == "trigger-ask"
    finally:
        server.shutdown()
