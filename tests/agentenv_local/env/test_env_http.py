"""An env served over real HTTP (uvicorn on a free loopback port): the card, /ready, the JSON-RPC data plane,
extensions, and MCP streamable HTTP for mcp 2.x clients in the 2026 revision and the legacy handshake, plus a raw
handshake exchange as mcp 1.x clients (the reference's gateway and ToolSession) make it."""

from __future__ import annotations

import base64
import http.server
import json
import threading

import httpx2
import pytest
from kits.env_sdk import ECHO, ECHO_CARD, env_subprocess, run, serving

from agentenv_local.env import (
    Env,
    EnvError,
    FilePart,
    ToolContext,
    add_data,
    environment_card,
    extension,
    tool,
)


def rpc(base: str, method: str, params=None, rid=1, raw: bytes | None = None) -> dict:
    with httpx2.Client() as h:
        if raw is not None:
            r = h.post(base + "/agentenv", content=raw, headers={"content-type": "application/json"})
        else:
            body = {"jsonrpc": "2.0", "id": rid, "method": method}
            if params is not None:
                body["params"] = params
            r = h.post(base + "/agentenv", json=body)
        assert r.status_code == 200
        return r.json()


def test_card_ready_and_unknown_routes(echo_env):
    with serving(echo_env) as base, httpx2.Client() as h:
        r = h.get(base + "/.well-known/agent-env.json")
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
        assert r.json() == ECHO_CARD
        assert h.get(base + "/ready").json() == {"ok": True}
        assert h.get(base + "/nope").status_code == 404


def test_data_plane_round_trip_and_errors(echo_env, tmp_path):
    payload = tmp_path / "payload.bin"
    payload.write_bytes(b"12345")
    with serving(echo_env) as base:
        assert rpc(base, "data/reset") == {"jsonrpc": "2.0", "id": 1, "result": {}}
        parts = [{"kind": "text", "text": "hello"}, {"kind": "data", "data": {"k": 1}},
                 {"kind": "file", "file": {"bytes": base64.b64encode(b"abc").decode(), "name": "a.txt"}},
                 FilePart.from_path(payload).model_dump(mode="json", exclude_none=True)]
        assert rpc(base, "data/add", {"parts": parts}, rid="x") == {"jsonrpc": "2.0", "id": "x", "result": {}}
        got = rpc(base, "data/get")
        assert got["result"]["parts"] == [
            {"kind": "data", "data": {"loaded": [{"text": "hello"}, {"k": 1}, {"file": "a.txt", "size": 3},
                                                 {"file": "payload.bin", "size": 5}], "calls": 0}},
            {"kind": "text", "text": "0 calls"}]
        bad = rpc(base, "data/add", {"parts": []})
        assert bad["error"]["code"] == -32602 and bad["error"]["message"] == "invalid_request"
        assert "at least 1 item" in bad["error"]["data"]["detail"]
        assert rpc(base, "data/add", {"parts": [{"kind": "video"}]})["error"]["code"] == -32602
        assert rpc(base, "data/add", [1, 2])["error"]["code"] == -32602
        assert rpc(base, "data/nope")["error"] == {"code": -32601, "message": "method not found: data/nope"}
        assert rpc(base, "", raw=b"{not json")["error"] == {"code": -32700, "message": "parse error"}
        assert rpc(base, "", raw=b'{"id": 7, "method": "data/get"}') == {
            "jsonrpc": "2.0", "id": 7, "error": {"code": -32600, "message": "invalid request"}}


def test_an_env_without_data_handlers_answers_method_not_found():
    @environment_card(name="echo")
    class Bare(Env):
        @tool()
        def echo(self, text: str) -> str:
            return text

    with serving(Bare()) as base:
        assert rpc(base, "data/get") == {"jsonrpc": "2.0", "id": 1,
                                         "error": {"code": -32601, "message": "method not found: data/get"}}


class _Files(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"over http"
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_data_add_handler_failures_and_http_file_parts():
    class Loader(Env):
        def __init__(self):
            self.seen = []

        @add_data
        async def load(self, parts):
            for part in parts:
                if part.kind == "text" and part.text == "explode":
                    raise RuntimeError("disk full")
                if part.kind == "text" and part.text == "refuse":
                    raise EnvError("bad_data", "refused", hint="send data parts")
                self.seen.append(await part.aread_bytes() if part.kind == "file" else part.kind)

    files = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Files)
    threading.Thread(target=files.serve_forever, daemon=True).start()
    env = Loader()
    try:
        with serving(env) as base:
            url = f"http://127.0.0.1:{files.server_address[1]}/f"
            assert rpc(base, "data/add", {"parts": [{"kind": "file", "file": {"uri": url}}]})["result"] == {}
            assert env.seen == [b"over http"]
            failed = rpc(base, "data/add", {"parts": [{"kind": "text", "text": "explode"}]})
            assert failed["error"] == {"code": -32000, "message": "disk full", "data": {"code": "add_failed"}}
            refused = rpc(base, "data/add", {"parts": [{"kind": "text", "text": "refuse"}]})
            assert refused["error"] == {"code": -32000, "message": "refused", "data": {
                "code": "bad_data", "message": "refused", "retryable": False, "applied": "no",
                "hint": "send data parts"}}
            assert rpc(base, "data/get")["error"]["code"] == -32601
    finally:
        files.shutdown()


class Stats(Env):
    def __init__(self):
        self.level = 0

    @extension("urn:agentenv:config/v1", description="Configure.")
    def configure(self, ctx: ToolContext, level: int, label: str = "") -> dict:
        if level > 10:
            raise EnvError("too_high", f"level {level} is above 10", hint="use 0-10", status=422)
        self.level = level
        return {"level": level, "label": label, "role": ctx.caller.role}

    @extension("urn:agentenv:stats/v1", op="get", method="GET")
    def stats(self, verbose: bool = False, limit: int = 5) -> dict:
        return {"verbose": verbose, "limit": limit, "level": self.level}

    @extension("urn:agentenv:stats/v1", op="crash")
    def crash(self) -> dict:
        raise ValueError("unexpected")

    @extension("urn:agentenv:void/v1", path="/custom/void", method="PUT")
    async def void(self) -> None:
        return None


def test_extensions_bind_coerce_and_answer_errors_in_the_reference_shape():
    with serving(Stats()) as base, httpx2.Client() as h:
        card = h.get(base + "/.well-known/agent-env.json").json()
        assert [e["uri"] for e in card["capabilities"]["extensions"]] == [
            "urn:agentenv:config/v1", "urn:agentenv:stats/v1", "urn:agentenv:void/v1"]
        r = h.post(base + "/agentenv/ext/configure", json={"level": "3", "label": "x"},
                   headers={"AgentEnv-Role": "ops"})
        assert (r.status_code, r.json()) == (200, {"level": 3, "label": "x", "role": "ops"})
        r = h.post(base + "/agentenv/ext/configure", json={"level": 11})
        assert r.status_code == 422
        assert r.json() == {"ok": False, "error": {"code": "too_high", "message": "level 11 is above 10",
                                                   "retryable": False, "applied": "no", "hint": "use 0-10"}}
        r = h.post(base + "/agentenv/ext/configure", json={"level": "high"})
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_params"
        assert "level" in r.json()["error"]["message"]
        r = h.post(base + "/agentenv/ext/configure", content=b"[1]")
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_params"
        r = h.post(base + "/agentenv/ext/configure", content=b"{oops")
        assert r.status_code == 400 and "not JSON" in r.json()["error"]["message"]
        r = h.get(base + "/agentenv/ext/stats/get", params={"verbose": "true", "limit": "7"})
        assert r.json() == {"verbose": True, "limit": 7, "level": 3}
        r = h.post(base + "/agentenv/ext/stats/crash")
        assert r.status_code == 500
        assert r.json() == {"ok": False, "error": {"code": "extension_failed", "message": "unexpected",
                                                   "retryable": False, "applied": "unknown"}}
        assert h.put(base + "/custom/void").json() == {}
        assert h.get(base + "/agentenv/ext/configure").status_code == 405


@pytest.mark.parametrize("mode", ["auto", "2026-07-28", "legacy"])
def test_mcp_streamable_http_in_both_revisions(echo_env, mode):
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def go(base):
        async with Client(base + "/mcp", mode=mode) as client:
            version = client.protocol_version
            tools = [t.name for t in (await client.list_tools()).tools]
            echo = await client.call_tool("echo", {"text": "hi"})
            fail = await client.call_tool("fail", {"code": "nope"})
            forwarded = await client.call_tool("whoami", {}, meta={"agentenv.io/role": "alice",
                                                                   "agentenv.io/virtual_time": "2025-03-10T09:00:00Z"})
        http_client = httpx2.AsyncClient(headers={"AgentEnv-Role": "bob"})
        async with Client(streamable_http_client(base + "/mcp", http_client=http_client), mode=mode) as client:
            header_role = await client.call_tool("whoami", {})
        return version, tools, echo, fail, forwarded, header_role

    with serving(echo_env) as base:
        version, tools, echo, fail, forwarded, header_role = run(go(base))
    assert version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert tools == ["echo", "whoami", "fail", "call_count"]
    assert echo.structured_content == {"result": "hi"} and echo.content[0].text == "hi" and not echo.is_error
    assert fail.is_error and fail.content[0].text == "nope: this tool always fails"
    assert forwarded.structured_content["role"] == "alice"
    assert forwarded.structured_content["virtual_time"] == "2025-03-10T09:00:00+00:00"
    assert header_role.structured_content["role"] == "bob"
    if mode == "legacy":
        assert header_role.structured_content["session"]   # the Mcp-Session-Id of a stateful session


def _legacy_exchange(base: str, headers: dict) -> list[dict]:
    """The JSON a handshake-era client (mcp 1.x, the reference's ToolSession) sees, message by message."""
    accept = {"Accept": "application/json, text/event-stream", **headers}
    replies = []
    with httpx2.Client(headers=accept) as h:
        r = h.post(base + "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        assert r.status_code == 200
        replies.append(r.json())
        session = {"Mcp-Session-Id": r.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
        r = h.post(base + "/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        assert r.status_code == 202
        for rid, (method, params) in enumerate([("tools/list", {}),
                                                ("tools/call", {"name": "echo", "arguments": {"text": "hi"}}),
                                                ("tools/call", {"name": "whoami", "arguments": {}})], start=2):
            r = h.post(base + "/mcp", json={"jsonrpc": "2.0", "id": rid, "method": method, "params": params},
                       headers=session)
            assert r.status_code == 200
            replies.append(r.json())
        assert h.delete(base + "/mcp", headers=session).status_code == 200
    return replies


@pytest.mark.parametrize("sse", [False, True])
def test_raw_legacy_handshake_matches_the_reference_wire(echo_env, sse):
    with serving(echo_env, json_response=not sse) as base:
        if sse:
            with httpx2.Client() as h:
                r = h.post(base + "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
                    headers={"Accept": "application/json, text/event-stream"})
                assert r.headers["content-type"].startswith("text/event-stream")
                data = next(line[5:].strip() for line in r.text.splitlines() if line.startswith("data:"))
                assert json.loads(data)["result"]["protocolVersion"] == "2025-03-26"
            return
        init, listing, echo, whoami = _legacy_exchange(base, {"AgentEnv-Role": "carol"})
    assert init["result"]["protocolVersion"] == "2025-11-25"
    assert init["result"]["serverInfo"]["name"] == "echo"
    assert init["result"]["capabilities"]["tools"] == {"listChanged": False}
    hidden = [t for t in listing["result"]["tools"] if t["name"] == "call_count"][0]
    assert hidden["_meta"] == {"agentenv.io/hiddenByDefault": True}
    assert hidden["annotations"] == {"readOnlyHint": True}
    assert echo == {"jsonrpc": "2.0", "id": 3, "result": {
        "content": [{"type": "text", "text": "hi"}], "structuredContent": {"result": "hi"}, "isError": False}}
    assert whoami["result"]["structuredContent"]["role"] == "carol"


def test_python_dash_m_serves_a_file_on_an_announced_port():
    with env_subprocess(ECHO, env_vars={"ENVIRONMENT_NAME": "echo-9"}) as (base, _proc), httpx2.Client() as h:
        assert h.get(base + "/ready").json() == {"ok": True}
        card = h.get(base + "/.well-known/agent-env.json").json()
        assert card["name"] == "echo-9"
        r = h.post(base + "/agentenv", json={"jsonrpc": "2.0", "id": 1, "method": "data/get"})
        assert r.json()["result"]["parts"][1] == {"kind": "text", "text": "0 calls"}


def test_serving_a_busy_port_fails_with_a_clear_message():
    import subprocess
    import sys

    from kits.env_sdk import ROOT

    with env_subprocess(ECHO) as (base, _proc):
        port = base.rsplit(":", 1)[1]
        out = subprocess.run([sys.executable, "-m", "agentenv_local.env", str(ECHO), "--port", port],
                             capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in out.stderr and "--port 0" in out.stderr


def test_running_the_example_file_directly_reads_mcp_host_and_port():
    import re
    import subprocess
    import sys

    from kits.env_sdk import ROOT

    proc = subprocess.Popen([sys.executable, str(ECHO)], stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**__import__("os").environ, "MCP_HOST": "127.0.0.1", "MCP_PORT": "0"})
    try:
        line = proc.stderr.readline()
        base = re.search(r"serving on (http://\S+)", line).group(1)
        with httpx2.Client() as h:
            assert h.get(base + "/ready").json() == {"ok": True}
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stderr.close()
