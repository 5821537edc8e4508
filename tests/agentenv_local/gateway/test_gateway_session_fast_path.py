"""The gateway's fast path for handshake-era sessions (agentenv_local/gateway/sessions.py and fastpath.py):
once the mcp stack has opened and initialized a session (protocol 2024-11-05 .. 2025-11-25, Mcp-Session-Id),
its tools/call and tools/list are answered without the stack, exactly as the stack answers them: the same
replies and headers, RBAC and hidden tools, the same trajectory (one stable session key per session), the
same triggers; everything else of the session (initialize, notifications, DELETE, an unknown session, a
cursor, a progress token) stays with the stack. Driven over real HTTP by raw requests, by mcp 2.x's Client in
legacy mode and by the reference's own ToolSession (mcp 1.x's protocol, in the reference's side venv)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from kits.gateway import ECHO, http, load
from kits.servers import REF_PYTHON, REF_VENV, reference_imports, uvicorn_thread

from agentenv_local.gateway.children import ChildSpec
from agentenv_local.gateway.fastpath import protocol_class
from agentenv_local.gateway.server import Gateway

HERE = Path(__file__).resolve().parent
V = "2025-11-25"


def _counting(gw: Gateway) -> dict[str, int]:
    """Counts the requests of handshake-era sessions the fast path answered ("session"), and of those the calls
    it sent without a task ("direct"); "modern" counts the rest of the fast path's answers."""
    counts = {"session": 0, "direct": 0, "modern": 0}
    inner, inner_direct = gw.mcp_fast, gw.mcp_call_direct

    async def counted(message, headers, version, session=None):
        counts["session" if session is not None else "modern"] += 1
        return await inner(message, headers, version, session)

    def counted_direct(message, headers, version, respond, session=None):
        taken = inner_direct(message, headers, version, respond, session)
        if taken:
            counts["session" if session is not None else "modern"] += 1
            counts["direct"] += session is not None
        return taken

    gw.mcp_fast = counted  # type: ignore[method-assign]  # the test's counter around the real method
    gw.mcp_call_direct = counted_direct  # type: ignore[method-assign]  # likewise
    return counts


@contextlib.contextmanager
def _serving(gw: Gateway, transport: str):
    """``gw`` served over real HTTP: by uvicorn with the gateway's own protocol (as Gateway.serve), or by
    uvicorn's default protocol (the fast path's ASGI wrapper). Yields the base URL."""
    import uvicorn

    from agentenv_local.env.serve import bind_socket

    sock = bind_socket("127.0.0.1", 0)
    protocol: Any = protocol_class(gw) if transport == "protocol" else "auto"
    with uvicorn_thread(uvicorn.Config(gw.app(), log_level="warning", lifespan="on", http=protocol), [sock]):
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def _prepare(gw: Gateway) -> None:
    gw.access.apply("disable", "alice", ["echo"])
    gw.access.bind_token("ops", "s3cret")


ON_WHOAMI = {"id": "on-whoami", "when": {"type": "action", "tool": "whoami"},
           "actions": [{"type": "tool", "tool": "call_count", "args": {}}]}


def _call(name, arguments=None, rid=1, meta=None):
    params = {"name": name, **({"arguments": arguments} if arguments is not None else {}),
              **({"_meta": meta} if meta is not None else {})}
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def _cases():
    """(label, extra headers, body, taken): a session's requests after its handshake, and whether the fast path
    answers them (the rest are the stack's)."""
    yield "list", {}, {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}, True
    yield "list without params", {}, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, True
    yield "list as alice", {"AgentEnv-Role": "alice"}, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, True
    yield "echo", {}, _call("echo", {"text": "hi"}, 4), True
    yield "echo again", {}, _call("echo", {"text": "again"}, 5), True
    yield "unknown tool", {}, _call("nope", {}, 6), True
    yield "hidden by default", {}, _call("call_count", {}, 7), True
    yield "tool error", {}, _call("fail", {"code": "x"}, 8), True
    yield "bad arguments", {}, _call("echo", {}, 9), True
    yield "no arguments", {}, _call("echo", None, 10), True
    yield "disabled for alice", {"AgentEnv-Role": "alice"}, _call("echo", {"text": "no"}, 11), True
    yield "whoami as bob", {"AgentEnv-Role": "bob"}, _call("whoami", {}, 12), True
    yield "role in _meta", {}, _call("whoami", {}, 13, meta={"agentenv.io/role": "carol"}), True
    yield "bound role without its token", {"AgentEnv-Role": "ops"}, _call("whoami", {}, 14), True
    yield "bound role with its token", {"AgentEnv-Role": "ops", "Authorization": "Bearer s3cret"}, \
        _call("whoami", {}, 15), True
    yield "string id", {}, _call("echo", {"text": "s"}, "abc"), True
    yield "no version header", {"mcp-protocol-version": None}, _call("echo", {"text": "v"}, 16), True
    # the stack's own
    yield "list with cursor", {}, {"jsonrpc": "2.0", "id": 20, "method": "tools/list",
                                   "params": {"cursor": "x"}}, False
    yield "progress token", {}, _call("echo", {"text": "p"}, 21, meta={"progressToken": 5}), False
    yield "arguments not an object", {}, _call("echo", "text", 22), False
    yield "name not a string", {}, _call(5, {}, 23), False
    yield "another method", {}, {"jsonrpc": "2.0", "id": 24, "method": "ping"}, False
    yield "notification", {}, {"jsonrpc": "2.0", "method": "notifications/cancelled",
                               "params": {"requestId": 99}}, False
    yield "another version than negotiated", {"mcp-protocol-version": "2025-06-18"}, _call("echo", {"text": "o"},
                                                                                          25), False
    yield "accepts only event streams", {"accept": "text/event-stream"}, _call("echo", {"text": "e"}, 26), False
    yield "unknown session", {"mcp-session-id": "0" * 32}, _call("echo", {"text": "u"}, 27), False
    yield "batch", {}, [_call("echo", {"text": "b"}, 28)], False


def _open_session(h) -> str:
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": V, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    r = h.post("/mcp", json=init, headers={"accept": "application/json, text/event-stream"})
    assert r.status_code == 200, r.text
    sid = r.headers["mcp-session-id"]
    r = h.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"},
               headers={"accept": "application/json, text/event-stream", "mcp-session-id": sid,
                        "mcp-protocol-version": V})
    assert r.status_code == 202
    return sid


def _normalized(r) -> tuple:
    body = json.loads(r.text) if r.text else None
    result = body.get("result") if isinstance(body, dict) else None
    if isinstance(result, dict) and isinstance(result.get("structuredContent"), dict):
        result["structuredContent"].pop("now", None)
        result["structuredContent"].pop("session", None)
        result["content"] = "(text)"
    return r.status_code, r.headers.get("content-type"), "mcp-session-id" in r.headers, body


def _session_requests(base: str, gw: Gateway) -> dict:
    """Every case on one session, a call on a second one (its own session key), ended with DELETE, then, with
    a trigger registered, a call on the first that fires it; the normalized answers by case."""
    out = {}
    with http(base) as h:
        sid = _open_session(h)
        for label, extra, body, _taken in _cases():
            headers = {"accept": "application/json, text/event-stream", "mcp-session-id": sid,
                       "mcp-protocol-version": V, "content-type": "application/json", **extra}
            r = h.post("/mcp", content=json.dumps(body), headers={k: v for k, v in headers.items() if v is not None})
            out[label] = _normalized(r)
            if "mcp-session-id" in r.headers:
                assert r.headers["mcp-session-id"] == sid, label
        other = _open_session(h)
        headers = {"accept": "application/json", "mcp-session-id": other, "mcp-protocol-version": V}
        out["second session"] = _normalized(h.post("/mcp", json=_call("echo", {"text": "2"}, 1), headers=headers))
        assert h.delete("/mcp", headers=headers).status_code == 200
        out["after DELETE"] = _normalized(h.post("/mcp", json=_call("echo", {"text": "3"}, 2), headers=headers))
        assert h.post("/triggers/register", json={"triggers": [ON_WHOAMI]}).status_code == 200
        headers = {"accept": "application/json", "mcp-session-id": sid, "mcp-protocol-version": V}
        out["fires a trigger"] = _normalized(h.post("/mcp", json=_call("whoami", {}, 3), headers=headers))
        deadline = time.monotonic() + 10
        while gw.engine.statuses()["on-whoami"] != "fired":
            assert time.monotonic() < deadline, gw.engine.state()
            time.sleep(0.02)
    return out


def _trajectory(base: str) -> list[dict]:
    """The recorded events, without what differs from run to run; each session key replaced by its order."""
    events = [json.loads(x) for x in http(base).get("/trajectory").text.splitlines()]
    keys: dict[str, int] = {}
    for event in events:
        event.pop("timestamp_utc", None)
        if event["event_type"] == "internal_tool_call":  # call_count: the shared echo env's count so far
            event.pop("result_len")
            event.pop("result_sha256")
        if "session" in event:
            event["session"] = keys.setdefault(event["session"], len(keys))
        result = event.get("tool_call_result") or {}
        if isinstance(result.get("structuredContent"), dict):
            result["structuredContent"].pop("session", None)
            result["structuredContent"].pop("now", None)
            result["content"] = "(text)"
    return events


@pytest.mark.parametrize("transport", ["protocol", "asgi"])
def test_session_requests_are_answered_and_recorded_as_the_stack_does(echo_url, transport):
    def run(fast: bool):
        gw = Gateway("sess", [ChildSpec("echo", echo_url)], control_plane_auth=False)
        gw.fast_mcp = fast
        _prepare(gw)
        counts = _counting(gw)
        with _serving(gw, transport) as base:
            return _session_requests(base, gw), _trajectory(base), counts

    fast, fast_events, counts = run(True)
    slow, slow_events, slow_counts = run(False)
    assert slow_counts == {"session": 0, "direct": 0, "modern": 0}
    # the fast path answered every case it takes, the second session's call and the trigger's; the stack the rest
    assert counts["session"] == sum(taken for *_, taken in _cases()) + 2 and counts["modern"] == 0
    if transport == "protocol":
        assert counts["direct"] > 0  # plain calls went to the child without a task (until the trigger came)
    for label in slow:
        assert fast[label] == slow[label], label
    assert fast["echo"][:3] == (200, "application/json", True)
    assert fast["echo"][3]["result"] == {"content": "(text)", "structuredContent": {"result": "hi"},
                                         "isError": False}
    assert "call_count" not in [t["name"] for t in fast["list"][3]["result"]["tools"]]
    assert "echo" not in [t["name"] for t in fast["list as alice"][3]["result"]["tools"]]
    assert fast["disabled for alice"][3]["result"]["content"][0]["text"] == "Tool 'echo' is disabled for role 'alice'"
    assert fast["bound role without its token"][3]["result"]["isError"] is True
    assert fast["unknown session"][0] == 404 and fast["after DELETE"][0] == 404
    assert fast["list with cursor"][0] == 200 and fast["notification"][0] == 202
    # the same events, in the same order, with the same per-session keys (the first session's calls one key)
    assert fast_events == slow_events
    calls = [e for e in fast_events if e["event_type"] == "tool_call" and e.get("source") != "trigger_engine"]
    assert {e["session"] for e in calls} == {0, 1}
    assert [e["event_type"] for e in fast_events][-3:] == ["tool_call_result", "trigger_fired", "internal_tool_call"]


def test_session_shortcuts_agree_with_the_stack_models():
    """The plain params the fast path reads without the models are read as the models read them, and a plain
    call result is what every handshake-era version's sieve answers (all but resultType)."""
    from mcp_types import methods
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    from agentenv_local.gateway.fastpath import plain_call_result, plain_session_params
    from agentenv_local.gateway.sessions import legacy_reply

    gw = Gateway("shapes", [])
    typed = gw.mcp_server().get_request_handler("tools/call").params_type
    params = [{"name": "a"}, {"name": "a", "arguments": {"x": [1, None], "y": {"z": "é"}}},
              {"name": "a", "arguments": None}, {"name": "a", "_meta": {"agentenv.io/role": "r", "k": None}},
              {"name": "a", "_meta": None}, {"name": 5}, {"name": "a", "arguments": [1]},
              {"name": "a", "_meta": {"io.modelcontextprotocol/protocolVersion": 5}}]
    assert [plain_session_params("tools/call", p) for p in params] == [True] * 5 + [False] * 3
    for version in HANDSHAKE_PROTOCOL_VERSIONS:
        for p in params[:5]:
            methods.validate_client_request("tools/call", version, p)
            read = typed.model_validate(p, by_name=False)
            assert (read.name, read.arguments, read.meta) == (p["name"], p.get("arguments"), p.get("_meta")), p
    results = [
        {"content": [{"type": "text", "text": "hi"}], "isError": False, "structuredContent": {"a": None},
         "resultType": "complete"},
        {"content": [], "resultType": "complete"},
        {"content": [{"type": "text", "text": "x"}], "_meta": {"agentenv.io/x": 1, "k": [None]},
         "resultType": "complete"},
        {"content": [{"type": "text", "text": "x"}], "isError": True, "resultType": "complete"},
    ]
    for version in HANDSHAKE_PROTOCOL_VERSIONS:
        for result in results:
            assert plain_call_result(result)
            sieved = methods.serialize_server_result("tools/call", version, dict(result))
            message = {"id": 1, "method": "tools/call"}
            assert legacy_reply(gw, message, version, dict(result)) == (200, {"jsonrpc": "2.0", "id": 1,
                                                                               "result": sieved}), result


@pytest.mark.parametrize("kind", ["http", "inprocess"])
def test_mcp_legacy_client_takes_the_fast_path(echo_url, kind):
    """mcp 2.x's Client in legacy mode (the initialize handshake and a session id): every list and call after
    the handshake is the fast path's; the answers are the ones the stack gives."""
    from mcp import Client

    async def session_calls(url: str) -> list:
        async with Client(url, mode="legacy") as c:
            listed = sorted(t.name for t in (await c.list_tools()).tools)
            out: list = [listed]
            for name, args in [("echo", {"text": "a"}), ("fail", {"code": "x"}), ("nope", {}), ("echo", {})]:
                r = await c.call_tool(name, args)
                out.append((r.is_error, r.structured_content, [getattr(b, "text", None) for b in r.content]))
            return out

    def run(fast: bool):
        child = ChildSpec("echo", echo_url if kind == "http" else load(ECHO))
        gw = Gateway("legacy", [child], control_plane_auth=False)
        gw.fast_mcp = fast
        counts = _counting(gw)
        with _serving(gw, "protocol") as base:
            return asyncio.run(session_calls(base + "/mcp")), counts

    fast, counts = run(True)
    slow, _ = run(False)
    assert fast == slow
    assert counts["session"] == 5 and counts["modern"] == 0
    assert fast[1] == (False, {"result": "a"}, ["a"])


def test_session_fast_path_holds_the_session_open_while_in_flight(echo_url):
    """A session whose calls the fast path answers is not idle: its idle timer stops while a call is in flight
    and restarts when it is answered, as the stack's transport does."""
    gw = Gateway("idle", [ChildSpec("echo", echo_url)], control_plane_auth=False)
    seen: dict = {}
    inner = gw.call

    async def watching(*args, **kwargs):
        sid = next(iter(gw.handshake_sessions._manager._server_instances))
        transport = gw.handshake_sessions._manager._server_instances[sid]
        seen["during"] = (transport._requests_in_flight, transport.idle_scope.deadline)
        return await inner(*args, **kwargs)

    gw.call = watching  # type: ignore[method-assign]  # observe the session while the call is under way
    with _serving(gw, "asgi") as base, http(base) as h:
        sid = _open_session(h)
        headers = {"accept": "application/json", "mcp-session-id": sid, "mcp-protocol-version": V}
        r = h.post("/mcp", json=_call("echo", {"text": "x"}, 1), headers=headers)
        assert r.json()["result"]["structuredContent"] == {"result": "x"}
        transport = gw.handshake_sessions._manager._server_instances[sid]
        assert seen["during"] == (1, float("inf"))
        assert transport._requests_in_flight == 0 and transport.idle_scope.deadline != float("inf")


@pytest.mark.skipif(not reference_imports("agentenv_protocol"), reason=f"no reference venv at {REF_VENV}")
def test_reference_tool_session_takes_the_fast_path(echo_url):
    """The reference's own client (ToolSession: protocol 2025-11-25, a session id, Accept of JSON and event
    streams) gets from the fast path what the stack gives it: RBAC refusals, per-role lists, get_time."""
    from kits.gateway import NOTES

    def run(fast: bool):
        children = [ChildSpec("echo", echo_url), ChildSpec("notes", load(NOTES))]
        gw = Gateway("demo", children, control_plane_auth=False)
        gw.fast_mcp = fast
        counts = _counting(gw)
        with _serving(gw, "protocol") as base, http(base) as h:
            h.post("/tools/disable", json={"role": "agent", "tools": ["echo"]})
            h.put("/clock/set-time", json={"virtual_time": "2025-03-10T09:00:00Z", "mode": "frozen"})  # same reading
            out = subprocess.run([str(REF_PYTHON), str(HERE / "reference_gateway_check.py"), base],
                                 check=False, capture_output=True, text=True, timeout=120)
            assert out.returncode == 0, out.stderr
            events = _trajectory(base)
        seen = json.loads(out.stdout)
        seen["agent_whoami"].pop("session")
        seen["agent_whoami"].pop("now", None)
        return seen, events, counts

    fast, fast_events, counts = run(True)
    slow, slow_events, _ = run(False)
    assert fast == slow
    assert fast_events == slow_events
    # two sessions: each one's tools/list and calls (4 + 2) are the fast path's
    assert counts["session"] == 6 and counts["modern"] == 0
    assert fast["agent_echo"] == {"isError": True, "text": "Tool 'echo' is disabled for role 'agent'"}
    assert "echo" not in fast["agent_tools"] and "get_time" in fast["agent_tools"]
    assert fast["default_echo"]["content"][0]["text"] == "hi"
