"""errors.describe: an unexpected exception as `Type: message`, an exception group by what is inside it (an MCP
client's task group wraps a transport failure), so a failed tool call's result says what happened."""

from __future__ import annotations

import asyncio

import anyio
import httpx2 as httpx
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from agentenv_local.errors import describe


def test_plain_grouped_nested_and_silent_exceptions() -> None:
    assert describe(ValueError("bad value")) == "ValueError: bad value"
    assert describe(ConnectionResetError()) == "ConnectionResetError"
    group = ExceptionGroup("unhandled errors in a TaskGroup", [ConnectionError("reset by peer")])
    assert describe(group) == "ConnectionError: reset by peer"
    nested = ExceptionGroup("outer", [KeyError("k"), ExceptionGroup("inner", [TimeoutError("slow")])])
    assert describe(nested) == "KeyError: 'k'; TimeoutError: slow"


def test_an_mcp_client_that_cannot_reach_its_server_is_described_by_the_cause() -> None:
    async def go() -> BaseException:
        try:
            async with httpx.AsyncClient(timeout=5) as http, \
                    streamable_http_client("http://127.0.0.1:9/mcp", http_client=http) as (read, write, *_), \
                    ClientSession(read, write) as session:
                with anyio.fail_after(10):
                    await session.initialize()
        except BaseException as exc:  # what the scripted and tool-loop agents catch around a call
            return exc
        raise AssertionError("port 9 answered")

    text = describe(asyncio.run(go()))
    assert "TaskGroup" not in text and ("Connect" in text or "refused" in text.lower()), text
