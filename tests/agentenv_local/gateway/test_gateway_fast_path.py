"""The gateway's hot path (agentenv_local/gateway/fastpath.py and wire.py): 2026-revision tools/call and
tools/list answered without the mcp server stack, and tools/call to a URL child posted without the mcp Client.
Each answer must be the one the stack and the Client give: the same results, errors, RBAC refusals and
rejections, on every transport the gateway serves (an ASGI wrapper, and its own uvicorn protocol)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time

import pytest
from kits.gateway import ECHO, env_subprocess, free_port, gateway_serving, http, load
from kits.servers import uvicorn_thread

from agentenv_local.gateway.children import Child, ChildSpec, wire
from agentenv_local.gateway.fastpath import plain_call_result, protocol_class
from agentenv_local.gateway.server import Gateway

V = "2026-07-28"
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": V,
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}}


def _call(name, arguments=None, rid=1, meta=None, **params):
    body = {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
            "params": {"name": name, **({"arguments": arguments} if arguments is not None else {}),
                       "_meta": {**ENVELOPE, **(meta or {})}, **params}}
    return {"mcp-method": "tools/call", "mcp-name": name}, body


def _list(rid=1, **params):
    return {"mcp-method": "tools/list"}, {"jsonrpc": "2.0", "id": rid, "method": "tools/list",
                                          "params": {"_meta": ENVELOPE, **params}}


def _cases():
    """(label, extra headers, body): the fast path's own requests, and ones it must leave to the stack."""
    yield "echo", *_call("echo", {"text": "hi"})
    yield "unknown tool", *_call("nope", {})
    yield "hidden by default", *_call("call_count", {})
    yield "tool error", *_call("fail", {"code": "x"})
    yield "bad arguments", *_call("echo", {})
    yield "no arguments", *_call("echo")
    h, b = _call("echo", {"text": "hi"})
    yield "disabled for alice", {**h, "AgentEnv-Role": "alice"}, b
    h, b = _call("whoami", {})
    yield "whoami as bob", {**h, "AgentEnv-Role": "bob"}, b
    yield "role in _meta", *_call("whoami", {}, meta={"agentenv.io/role": "carol"})
    h, b = _call("whoami", {})
    yield "bound role without its token", {**h, "AgentEnv-Role": "ops"}, b
    yield "string id", *_call("echo", {"text": "s"}, rid="abc")
    yield "list", *_list()
    h, b = _list()
    yield "list as alice", {**h, "AgentEnv-Role": "alice"}, b
    # the stack's own answers
    h, b = _call("echo", {"text": "hi"})
    yield "name header mismatch", {**h, "mcp-name": "whoami"}, b
    h, b = _call("echo", {"text": "hi"})
    yield "method header mismatch", {**h, "mcp-method": "tools/list"}, b
    h, b = _call("echo", {"text": "hi"})
    del b["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
    yield "no capabilities", h, b
    h, b = _call("echo", {"text": "hi"})
    b["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = {"sampling": 5}
    yield "bad capabilities", h, b
    h, b = _call("echo", {"text": "hi"})
    b["params"]["_meta"]["io.modelcontextprotocol/clientInfo"] = {"name": "t"}
    yield "bad client info", h, b
    h, b = _call("echo", {"text": "hi"})
    b["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = "2099-01-01"
    yield "envelope version differs", h, b
    h, b = _call("echo", "not an object")
    yield "arguments not an object", h, b
    yield "list with cursor", *_list(cursor="x")
    h, b = _call("echo", {"text": "hi"})
    del b["id"]
    yield "notification", h, b
    h, b = _call("echo", {"text": "hi"})
    yield "batch", h, [b]


def _normalized(status, text):
    body = json.loads(text) if text else None
    result = (body or {}).get("result") if isinstance(body, dict) else None
    if isinstance(result, dict) and isinstance(result.get("structuredContent"), dict):
        result["structuredContent"].pop("session", None)  # a fresh key per stateless request
        result["structuredContent"].pop("now", None)
        for item in result.get("content") or []:
            if item.get("type") == "text" and '"session"' in item.get("text", ""):
                item["text"] = "(whoami)"
    return status, body


def _post_all(base, fast):
    out = {}
    with http(base) as h:
        for label, headers, body in _cases():
            r = h.post("/mcp", content=json.dumps(body), headers={
                "content-type": "application/json", "accept": "application/json, text/event-stream",
                "mcp-protocol-version": V, **headers})
            out[label] = _normalized(r.status_code, r.text)
    return out


def _gateway_children(echo_url):
    return [ChildSpec("echo", echo_url)]


def _prepare(gw):
    gw.access.apply("disable", "alice", ["echo"])
    gw.access.bind_token("ops", "s3cret")


def _counting(gw):
    """Counts the requests the fast path answered ("fast"), and of those the tools/calls it answered without a
    task ("direct": Gateway.call_direct)."""
    counts = {"fast": 0, "direct": 0}
    inner, inner_direct = gw.mcp_fast, gw.mcp_call_direct

    async def counted(*args):
        counts["fast"] += 1
        return await inner(*args)

    def counted_direct(*args):
        taken = inner_direct(*args)
        counts["fast"] += taken
        counts["direct"] += taken
        return taken

    gw.mcp_fast = counted
    gw.mcp_call_direct = counted_direct
    return counts


@pytest.mark.parametrize("kind", ["http", "inprocess"])
def test_fast_path_answers_every_request_as_the_stack_does(echo_url, kind):
    child = ChildSpec("echo", echo_url if kind == "http" else load(ECHO))
    with gateway_serving("fast", [child]) as (base, gw):
        _prepare(gw)
        counts = _counting(gw)
        fast = _post_all(base, fast=True)
        taken = counts["fast"]
        gw.fast_mcp = False
        slow = _post_all(base, fast=False)
        assert counts["fast"] == taken
        events = [json.loads(x) for x in http(base).get("/trajectory").text.splitlines()]
    # the fast path answered its own requests (13 of them), the stack everything else
    assert taken == 13
    for label in fast:
        assert fast[label] == slow[label], label
    assert fast["echo"][1]["result"]["structuredContent"] == {"result": "hi"}
    assert fast["echo"][1]["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "fast"
    assert fast["disabled for alice"][1]["result"]["content"][0]["text"] == "Tool 'echo' is disabled for role 'alice'"
    assert fast["whoami as bob"][1]["result"]["structuredContent"]["role"] == "bob"
    assert fast["role in _meta"][1]["result"]["structuredContent"]["role"] == "carol"
    assert fast["bound role without its token"][1]["result"]["isError"] is True
    assert "echo" not in [t["name"] for t in fast["list as alice"][1]["result"]["tools"]]
    assert fast["name header mismatch"][0] == 400 and fast["notification"][0] == 202
    # the trajectory holds the same events either way, each fast call with its own session key
    calls = [e for e in events if e["event_type"] == "tool_call"]
    assert len(calls) == 2 * 7  # refusals (RBAC, unknown tool) are not proxied, so not recorded
    assert calls[:7] == [{**c, "event_id": a["event_id"], "timestamp_utc": a["timestamp_utc"],
                          "session": a["session"]} for a, c in zip(calls[:7], calls[7:], strict=True)]
    assert len({c["session"] for c in calls}) == len(calls)


def test_plain_result_shortcut_agrees_with_the_sieve():
    from mcp_types import methods

    results = [
        {"content": [{"type": "text", "text": "hi"}], "isError": False, "structuredContent": {"a": None},
         "resultType": "complete"},
        {"content": [], "resultType": "complete"},
        {"content": [{"type": "text", "text": "x"}], "_meta": {"agentenv.io/x": 1, "k": [None]},
         "resultType": "complete"},
        {"content": [{"type": "text", "text": "x"}], "_meta": {"k": None}, "resultType": "complete"},
        {"content": [{"type": "text", "text": "x", "annotations": None}], "resultType": "complete"},
        {"content": [{"type": "image", "data": "AA==", "mimeType": "image/png"}], "resultType": "complete"},
        {"content": [{"type": "text", "text": "x"}], "isError": None, "resultType": "complete"},
        {"content": [{"type": "text", "text": "x"}], "extra": 1, "resultType": "complete"},
    ]
    for result in results:
        if plain_call_result(result):
            assert methods.serialize_server_result("tools/call", V, dict(result)) == result, result
    assert [plain_call_result(r) for r in results] == [True, True, True, False, False, False, False, False]


def test_lean_child_call_answers_as_the_client_does(echo_url):
    async def go():
        child = Child(ChildSpec("echo", echo_url))
        await child.start()
        try:
            assert child.lean is not None and child.lean.version == V and child.lean.envelope
            meta = {"agentenv.io/role": "r1", "agentenv.io/session": "s1"}
            for tool, args in [("echo", {"text": "hi"}), ("fail", {}), ("echo", {}), ("whoami", {})]:
                lean = await child.lean.call_tool(tool, args, meta, None)
                client = wire(await child.client.call_tool(tool, args, meta=meta))
                if tool == "whoami":
                    for r in (lean, client):
                        r["structuredContent"].pop("now")
                        r["content"] = []
                assert lean == client, tool
            assert lean["structuredContent"]["role"] == "r1" and lean["structuredContent"]["session"] == "s1"
            assert await child.lean.call_tool("nope", {}, {}, None) == wire(await child.client.call_tool("nope", {}))
        finally:
            await child.aclose()

    asyncio.run(go())


@contextlib.asynccontextmanager
async def _stub_child(answers):
    """A bare HTTP server answering each POST with the next of ``answers`` (raw bytes, ``{id}`` filled in)."""
    seen = []

    async def handle(reader, writer):
        with contextlib.suppress(Exception):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                                  if line.lower().startswith(b"content-length")))
                body = json.loads(await reader.readexactly(length))
                seen.append((head, body))
                writer.write(answers.pop(0).replace(b"{id}", str(body["id"]).encode()))
                await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/mcp", seen
    finally:
        server.close()


def _http(body, content_type=b"application/json", status=b"200 OK", chunked=False):
    if chunked:
        middle = len(body) // 2
        payload = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:middle], body[middle:]))
        return (b"HTTP/1.1 %s\r\ncontent-type: %s\r\ntransfer-encoding: chunked\r\n\r\n%s0\r\n\r\n"
                % (status, content_type, payload))
    return b"HTTP/1.1 %s\r\ncontent-type: %s\r\ncontent-length: %d\r\n\r\n%s" % (
        status, content_type, len(body), body)


def test_lean_session_reads_json_sse_chunked_and_errors_as_the_client_would():
    from mcp.shared.exceptions import MCPError

    from agentenv_local.gateway.children import _LeanSession
    from agentenv_local.gateway.wire import HttpStatusError

    ok = b'{"jsonrpc":"2.0","id":{id},"result":{"content":[{"type":"text","text":"hi","annotations":null}]}}'
    sse = (b'event: message\r\ndata: {"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\r\n\r\n'
           b': ping\r\n\r\nevent: message\r\ndata: {"jsonrpc":"2.0","id":{id},"result":{"content":[],'
           b'"isError":true,"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"c","version":"1"},"k":1}}}\r\n\r\n')
    error = b'{"jsonrpc":"2.0","id":{id},"error":{"code":-32602,"message":"Unknown tool: x"}}'

    async def go():
        answers = [_http(ok), _http(sse, b"text/event-stream", chunked=True), _http(ok, chunked=True),
                   _http(error, status=b"400 Bad Request"), _http(b"gone", b"text/plain", b"404 Not Found")]
        async with _stub_child(answers) as (url, seen):
            lean = _LeanSession(url)
            lean.version, lean.session_id = "2025-06-18", "sid-1"
            assert lean.ready()
            notes = []
            assert await lean.call_tool("t", {"a": 1}, {"agentenv.io/role": "r"}, notes.append) == {
                "content": [{"type": "text", "text": "hi"}], "isError": False}
            assert await lean.call_tool("t", {}, {}, notes.append) == {"content": [], "isError": True,
                                                                       "_meta": {"k": 1}}
            assert notes == [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}]
            assert (await lean.call_tool("t", {}, {}, None))["content"][0]["text"] == "hi"
            with pytest.raises(MCPError) as info:
                await lean.call_tool("x", {}, {}, None)
            assert (info.value.code, str(info.value)) == (-32602, "Unknown tool: x")
            with pytest.raises(HttpStatusError, match="HTTP 404 from the child: gone"):
                await lean.call_tool("t", {}, {}, None)
            lean.close()
            head, body = seen[0]
            assert b"mcp-session-id: sid-1\r\n" in head and b"mcp-protocol-version: 2025-06-18\r\n" in head
            assert b"mcp-method" not in head  # a handshake-era session's requests carry no routing headers
            assert body["params"] == {"name": "t", "arguments": {"a": 1}, "_meta": {"agentenv.io/role": "r"}}
            assert len({b["id"] for _h, b in seen}) == len(seen)


def test_lean_calls_share_pooled_connections_and_survive_a_keepalive_close():
    async def go():
        with env_subprocess(ECHO) as (base, _proc):
            child = Child(ChildSpec("echo", base + "/mcp"))
            await child.start()
            try:
                results = await asyncio.gather(*(child.call("echo", {"text": f"c{i}"}, {}) for i in range(50)))
                assert [r["structuredContent"]["result"] for r in results] == [f"c{i}" for i in range(50)]
                pooled = len(child.lean.http._idle)
                assert 1 <= pooled <= 50
                # the server drops idle connections (uvicorn's keep-alive timeout is 5 s): the next call opens
                # a new one instead of failing
                for conn in child.lean.http._idle:
                    conn.transport.abort()
                await asyncio.sleep(0.05)
                assert (await child.call("echo", {"text": "again"}, {}))["structuredContent"] == {"result": "again"}
            finally:
                await child.aclose()

    asyncio.run(go())


def test_killed_child_is_reopened_on_the_lean_path_too():
    port = free_port()

    @contextlib.contextmanager
    def echo_on(port):
        import subprocess
        import sys

        from kits.gateway import ROOT

        proc = subprocess.Popen([sys.executable, "-m", "agentenv_local.env", str(ECHO), "--port", str(port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        proc.stderr.readline()
        threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True,
                         name=f"drain stderr of echo pid {proc.pid}").start()
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()

    async def go():
        gw = Gateway("k", [ChildSpec("echo", f"http://127.0.0.1:{port}/mcp")])
        with echo_on(port) as proc:
            await gw.start()
            child = gw.children[0]
            first = child.lean
            assert first is not None
            assert (await gw.call("echo", {"text": "a"}))["structuredContent"] == {"result": "a"}
            proc.kill()
            proc.wait()
            dead = await gw.call("echo", {"text": "b"})
            assert dead["isError"] and "server 'echo' did not answer" in dead["content"][0]["text"]
        with echo_on(port):
            again = await gw.call("echo", {"text": "c"})
            assert again.get("structuredContent") == {"result": "c"}, again
            assert child.lean is not None and child.lean is not first
        await gw.aclose()
        kinds = [e["event_type"] for e in gw.events]
        assert kinds.count("tool_call_failed") == 1

    asyncio.run(go())


# --- the gateway's own uvicorn protocol (Gateway.serve) -------------------------------------------------------

@contextlib.contextmanager
def _serving_with_protocol(gw):
    import uvicorn

    from agentenv_local.env.serve import bind_socket

    sock = bind_socket("127.0.0.1", 0)
    with uvicorn_thread(uvicorn.Config(gw.app(), log_level="warning", lifespan="on", http=protocol_class(gw)),
                        [sock]):
        yield sock.getsockname()[1]


def _request(body, headers=None, path="/mcp", method="POST"):
    data = json.dumps(body).encode() if body is not None else b""
    lines = [f"{method} {path} HTTP/1.1", "host: 127.0.0.1", "content-type: application/json",
             "accept: application/json, text/event-stream", f"mcp-protocol-version: {V}",
             *(f"{k}: {v}" for k, v in (headers or {}).items()), f"content-length: {len(data)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


def _read(f):
    status = int(f.readline().split()[1])
    headers = {}
    while (line := f.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding") == "chunked":
        body = b""
        while (size := int(f.readline().strip(), 16)):
            body += f.read(size)
            f.readline()
        f.readline()
    else:
        body = f.read(int(headers.get("content-length", 0)))
    return status, headers, body


def test_gateway_protocol_hands_over_to_h11_and_back_on_one_connection(echo_url):
    gw = Gateway("proto", [ChildSpec("echo", echo_url)])
    counts = _counting(gw)
    with _serving_with_protocol(gw) as port, socket.create_connection(("127.0.0.1", port)) as s:
        f = s.makefile("rb")

        def call(text, rid):
            h, b = _call("echo", {"text": text}, rid=rid)
            return _request(b, h)

        s.sendall(call("one", 1))
        status, headers, body = _read(f)
        assert status == 200 and json.loads(body)["result"]["structuredContent"] == {"result": "one"}
        assert headers["content-type"] == "application/json" and "date" in headers
        # the stack's requests on the same connection: h11 serves them, then the fast path again
        h, b = _call("echo", {"text": "hi"})
        s.sendall(_request(b, {**h, "mcp-name": "whoami"}))
        assert _read(f)[0] == 400
        s.sendall(_request(None, method="GET", path="/state"))
        assert json.loads(_read(f)[2])["mcp_servers"][0]["name"] == "echo"
        s.sendall(call("two", 2))
        assert json.loads(_read(f)[2])["result"]["structuredContent"] == {"result": "two"}
        # pipelined: a fast request, a stack one and a fast one in one write, answered in order
        h, b = _list(rid=9)
        s.sendall(call("p1", 3) + _request(b, {**h, "mcp-method": "tools/call"}) + call("p3", 4))
        assert json.loads(_read(f)[2])["result"]["structuredContent"] == {"result": "p1"}
        assert _read(f)[0] == 400
        assert json.loads(_read(f)[2])["result"]["structuredContent"] == {"result": "p3"}
        # a request that arrives in pieces
        whole = call("pieces", 5)
        for cut in (7, 60, len(whole) - 3):
            s.sendall(whole[:cut])
            time.sleep(0.05)
            whole = whole[cut:]
        s.sendall(whole)
        assert json.loads(_read(f)[2])["result"]["structuredContent"] == {"result": "pieces"}
        # a browser's request (Origin) always goes to the stack, which applies the origin guard
        h, b = _call("echo", {"text": "o"})
        s.sendall(_request(b, {**h, "origin": "http://evil.example"}))
        assert _read(f)[0] == 403
        taken = counts["fast"]
        # connection: close is honoured
        h, b = _call("echo", {"text": "bye"}, rid=6)
        s.sendall(_request(b, {**h, "connection": "close"}))
        status, headers, body = _read(f)
        assert status == 200 and headers.get("connection") == "close"
        assert f.read() == b""
    assert taken == 5


def test_gateway_protocol_serves_handshake_era_and_modern_clients(echo_url):
    from mcp import Client

    gw = Gateway("proto", [ChildSpec("echo", echo_url)])
    counts = _counting(gw)
    with _serving_with_protocol(gw) as port:
        async def go():
            url = f"http://127.0.0.1:{port}/mcp"
            for mode in ("auto", "legacy"):
                async with Client(url, mode=mode) as c:
                    assert "echo" in [t.name for t in (await c.list_tools()).tools]
                    r = await c.call_tool("echo", {"text": mode})
                    assert r.structured_content == {"result": mode}

            async def one(i):
                async with Client(url, mode="legacy" if i % 3 == 0 else "auto") as c:
                    return (await c.call_tool("echo", {"text": f"s{i}"})).structured_content

            answers = await asyncio.gather(*(one(i) for i in range(60)))
            assert answers == [{"result": f"s{i}"} for i in range(60)]

        asyncio.run(go())
    assert counts["fast"] >= 40  # the modern clients' calls and lists (and, since issue 16, the legacy sessions')


def test_lean_path_on_a_handshake_era_child_answers_as_the_client_does():
    """An env on the reference's SDK (mcp 1.x: the initialize handshake, a session id, SSE answers)."""
    import os
    import subprocess
    from pathlib import Path

    from test_gateway_server_reference import (
        REF_ENV,
        REF_PYTHON,
        _reference_server_available,
    )

    if not _reference_server_available():
        pytest.skip(f"no reference SDK with mcp 1.x at {REF_PYTHON}")
    port = free_port()
    proc = subprocess.Popen([str(REF_PYTHON), str(Path(REF_ENV))],
                            env={**os.environ, "MCP_HOST": "127.0.0.1", "MCP_PORT": str(port)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    async def go():
        child = Child(ChildSpec("helpdesk", f"http://127.0.0.1:{port}/mcp"))
        await child.start()
        try:
            lean = child.lean
            assert lean.ready() and not lean.modern and lean.session_id and lean.version < V
            for tool, args in [("search_tickets", {"query": "invoice"}), ("close_ticket", {"ticket_id": "T-404"}),
                               ("search_tickets", {})]:
                fast = await lean.call_tool(tool, args, {"agentenv.io/role": "agent"}, None)
                assert fast == wire(await child.client.call_tool(tool, args, meta={"agentenv.io/role": "agent"}))
            assert "T-7" in (await child.call("search_tickets", {"query": "invoice"}, {}))["content"][0]["text"]
        finally:
            await child.aclose()

    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.1)
        asyncio.run(go())
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# --- tools/call without a task (Gateway.call_direct) ----------------------------------------------------------

def _exchange(s, f, name, arguments, rid, **headers):
    h, b = _call(name, arguments, rid=rid)
    s.sendall(_request(b, {**h, **headers}))
    status, _headers, body = _read(f)
    return _normalized(status, body.decode())


def _trajectory(port):
    lines = http(f"http://127.0.0.1:{port}").get("/trajectory").text.splitlines()
    events = [json.loads(x) for x in lines]
    for event in events:  # what differs from run to run
        for key in ("timestamp_utc", "session"):
            event.pop(key, None)
        result = event.get("tool_call_result") or {}
        if isinstance(result.get("structuredContent"), dict):
            result["structuredContent"].pop("session", None)
            result["structuredContent"].pop("now", None)
            result["content"] = "(text)"
    return events


def test_direct_path_answers_and_records_as_the_task_path_does(echo_url):
    """A plain tools/call goes to its child straight from the request's bytes and is answered from the child's
    answer (no task, no future); every reply and trajectory event is what the task path gives."""
    cases = [("echo", {"text": "hi"}, {}), ("whoami", {}, {"AgentEnv-Role": "bob"}), ("fail", {"code": "x"}, {}),
             ("echo", {"text": "no"}, {"AgentEnv-Role": "alice"}), ("nope", {}, {}),
             ("whoami", {}, {"AgentEnv-Role": "ops"}), ("echo", {"text": "again"}, {})]

    def run(direct):
        gw = Gateway("direct", [ChildSpec("echo", echo_url)])
        _prepare(gw)
        if not direct:
            gw.mcp_call_direct = lambda *args: False
        counts = _counting(gw)
        with _serving_with_protocol(gw) as port, socket.create_connection(("127.0.0.1", port)) as s:
            f = s.makefile("rb")
            replies = [_exchange(s, f, name, args, i, **headers) for i, (name, args, headers) in enumerate(cases)]
            return replies, _trajectory(port), counts

    direct, direct_events, counts = run(True)
    tasked, tasked_events, task_counts = run(False)
    assert direct == tasked
    assert direct_events == tasked_events
    # whoami as bob, fail and echo again went direct (the first echo opened the pooled connection to the child);
    # RBAC refusals and the unknown tool took the task path
    assert counts["direct"] == 3 and task_counts["direct"] == 0
    assert direct[0][1]["result"]["structuredContent"] == {"result": "hi"}
    assert direct[2][1]["result"]["isError"] is True
    assert [e["event_type"] for e in direct_events].count("tool_call_result") == 4


_FRAGILE_ENV = '''
import asyncio, os
from agentenv_local.env import Env, environment_card, tool

@environment_card(name="fragile")
class Fragile(Env):
    @tool()
    def echo(self, text: str) -> str:
        return text

    @tool()
    async def slow(self, seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "late"

    @tool()
    def die(self) -> str:
        os._exit(3)
'''


def test_direct_path_reports_a_child_dying_mid_call_and_a_timeout(tmp_path):
    """The failures of a call already sent on the direct path are reported as the task path reports them: a
    child that dies mid-call is a tool error and its session is reopened; a call past tool_timeout times out."""
    server = tmp_path / "fragile.py"
    server.write_text(_FRAGILE_ENV)
    port = free_port()
    with contextlib.ExitStack() as stack:
        base, _proc = stack.enter_context(env_subprocess(server, "--port", str(port)))
        gw = Gateway("fragile", [ChildSpec("fragile", base + "/mcp")], tool_timeout=1.0)
        counts = _counting(gw)
        gport = stack.enter_context(_serving_with_protocol(gw))
        s = stack.enter_context(socket.create_connection(("127.0.0.1", gport)))
        f = s.makefile("rb")
        assert _exchange(s, f, "echo", {"text": "a"}, 1)[1]["result"]["structuredContent"] == {"result": "a"}
        late = _exchange(s, f, "slow", {"seconds": 5}, 2)[1]["result"]
        assert late["isError"] and late["content"][0]["text"] == "Tool 'slow' timed out after 1s"
        assert _exchange(s, f, "echo", {"text": "b"}, 3)[1]["result"]["structuredContent"] == {"result": "b"}
        direct_before = counts["direct"]
        dead = _exchange(s, f, "die", {}, 4)[1]["result"]
        assert counts["direct"] == direct_before + 1  # it went direct, and died there
        assert dead["isError"] and "server 'fragile' did not answer" in dead["content"][0]["text"]
        stack.enter_context(env_subprocess(server, "--port", str(port)))  # the env comes back on its port
        again = _exchange(s, f, "echo", {"text": "c"}, 5)[1]["result"]
        assert again.get("structuredContent") == {"result": "c"}, again
        kinds = [e["event_type"] for e in _trajectory(gport)]
    assert kinds.count("tool_call_failed") == 2 and kinds.count("tool_call_result") == 3


def test_a_registered_trigger_sends_calls_the_task_path(echo_url):
    """With a trigger registered, a call's answer waits for its evaluation (barriers), so it takes the task
    path; the trigger fires."""
    gw = Gateway("trig", [ChildSpec("echo", echo_url)])
    counts = _counting(gw)
    with _serving_with_protocol(gw) as port, socket.create_connection(("127.0.0.1", port)) as s:
        f = s.makefile("rb")
        _exchange(s, f, "echo", {"text": "warm"}, 1)  # opens the pooled connection to the child
        _exchange(s, f, "echo", {"text": "warm"}, 1)
        assert counts["direct"] == 1
        rest = http(f"http://127.0.0.1:{port}", Authorization=f"Bearer {gw.admin_token}")
        spec = {"id": "on-echo", "when": {"type": "action", "tool": "echo"},
                "actions": [{"type": "tool", "tool": "call_count", "args": {}}]}
        assert rest.post("/triggers/register", json={"triggers": [spec]}).status_code == 200
        _exchange(s, f, "echo", {"text": "go"}, 2)
        assert counts["direct"] == 1 and counts["fast"] == 3
        deadline = time.monotonic() + 10
        while rest.get("/triggers/state").json()["triggers"][0]["status"] != "fired":
            assert time.monotonic() < deadline, rest.get("/triggers/state").json()
            time.sleep(0.05)
