"""The gateway's clients to an HTTP child (its MCP session's httpx client, and the lean tools/call path) do not
lose calls to the child's keep-alive close (issue 16: the race that lost A2A prompts, agents/client.py).

Both kept idle connections as long as uvicorn (a reference env server, a `command` env) keeps them open, 5 s:
a call sent on a connection idle that long could reach the child just as it closed it, and be reset.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2
import uvicorn
from kits.servers import one_request_per_connection_server

from agentenv_local.gateway.children import KEEPALIVE_EXPIRY_S, ExpiringLeanHttp, _LeanSession, child_http_client

# Longer than our expiry, shorter than the 5 s both sides used to keep an idle connection.
IDLE_S = 1.5


def _mcp_ok(body: bytes) -> bytes:
    request_id = json.loads(body or b"{}").get("id", 1)
    return json.dumps({"jsonrpc": "2.0", "id": request_id,
                       "result": {"content": [{"type": "text", "text": "ok"}]}}).encode()


def _one_request_per_connection_server():
    return one_request_per_connection_server(_mcp_ok)


def test_the_sessions_http_client_does_not_reuse_an_idle_connection_past_the_expiry():
    async def main() -> dict[str, Any]:
        server, port, counts = await _one_request_per_connection_server()
        async with server, child_http_client() as http:
            url = f"http://127.0.0.1:{port}/mcp"
            first = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            await asyncio.sleep(IDLE_S)
            second = await http.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "ping"})
        return {"statuses": [first.status_code, second.status_code], **counts}

    seen = asyncio.run(main())
    assert seen == {"statuses": [200, 200], "connections": 2, "answered": 2, "reset": 0}, seen


def test_the_lean_tools_call_path_does_not_reuse_an_idle_connection_past_the_expiry():
    async def main() -> dict[str, Any]:
        server, port, counts = await _one_request_per_connection_server()
        async with server:
            lean = _LeanSession(f"http://127.0.0.1:{port}/mcp")
            assert isinstance(lean.http, ExpiringLeanHttp)
            lean.version = "2025-06-18"  # a handshake-era session, as its Client would have shown it
            results = []
            try:
                results.append(await lean.call_tool("t", {}, {}, lambda message: None))
                await asyncio.sleep(IDLE_S)
                results.append(await lean.call_tool("t", {}, {}, lambda message: None))
            finally:
                lean.close()
        return {"texts": [r["content"][0]["text"] for r in results if r], **counts}

    seen = asyncio.run(main())
    assert seen == {"texts": ["ok", "ok"], "connections": 2, "answered": 2, "reset": 0}, seen


def test_a_connection_idle_less_than_the_expiry_is_still_reused():
    """The fix drops only stale connections: back-to-back calls share one."""
    async def main() -> dict[str, Any]:
        counts = {"connections": 0}

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            counts["connections"] += 1
            try:
                while True:
                    head = await reader.readuntil(b"\r\n\r\n")
                    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                                   if line.lower().startswith(b"content-length:")), 0)
                    request_id = json.loads(await reader.readexactly(length)).get("id")
                    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {"content": []}}).encode()
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                                 b"content-length: %d\r\n\r\n" % len(body) + body)
                    await writer.drain()
            except (asyncio.IncompleteReadError, ConnectionError):
                writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        async with server:
            lean = _LeanSession(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/mcp")
            lean.version = "2025-06-18"
            try:
                for _ in range(5):
                    await lean.call_tool("t", {}, {}, lambda message: None)
            finally:
                lean.close()
        return counts

    assert asyncio.run(main()) == {"connections": 1}


def test_the_expiry_is_below_the_keep_alive_of_the_servers_children_run_on():
    """uvicorn serves reference env servers and `command` envs with its default keep-alive."""
    assert KEEPALIVE_EXPIRY_S < IDLE_S < uvicorn.Config(app="unused:app").timeout_keep_alive
    assert (httpx2.Limits().keepalive_expiry or 0) >= uvicorn.Config(app="unused:app").timeout_keep_alive
