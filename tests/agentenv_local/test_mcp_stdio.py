"""Our stdio MCP servers (agentenv_local/mcp_stdio.py) answer the requests already read when the client closes
stdin: a shell pipe (`printf ... | agentenv docs serve`) gets its answers, and a request never answered does not
hold the server open past the drain timeout."""

from __future__ import annotations

import sys
import textwrap

import anyio
import pytest
from kits.servers import ROOT, agentenv_exe, piped_mcp

SLOW_ENV = textwrap.dedent('''
    import asyncio
    from agentenv_local.env import Env, tool

    class Slow(Env):
        name = "slow"

        @tool()
        async def slow_echo(self, text: str) -> str:
            """Answers after a pause, so the call is still running when stdin has closed."""
            await asyncio.sleep(0.5)
            return text
''')


def test_an_env_over_stdio_answers_a_call_still_running_when_stdin_closes(tmp_path):
    env_file = tmp_path / "slow_env.py"
    env_file.write_text(SLOW_ENV)
    answers = piped_mcp([sys.executable, "-m", "agentenv_local.env", str(env_file), "--stdio"],
                        [("tools/call", {"name": "slow_echo", "arguments": {"text": "late but here"}})], cwd=ROOT)
    assert answers[2]["result"]["structuredContent"] == {"result": "late but here"}


def test_the_docs_server_answers_piped_requests(tmp_path):
    answers = piped_mcp([agentenv_exe(), "docs", "serve"],
                        [("tools/call", {"name": "search_docs", "arguments": {"query": "virtual clock", "limit": 1}}),
                         ("tools/list", {})], cwd=tmp_path)
    assert answers[2]["result"]["structuredContent"]["results"][0]["page"] == "environments/virtual-clock.md"
    assert "search_docs" in [t["name"] for t in answers[3]["result"]["tools"]]


def _request(request_id: int):
    from mcp.shared.message import SessionMessage
    from mcp_types import JSONRPCRequest

    return SessionMessage(JSONRPCRequest(jsonrpc="2.0", id=request_id, method="ping"))


def _response(request_id: int):
    from mcp.shared.message import SessionMessage
    from mcp_types import JSONRPCResponse

    return SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=request_id, result={}))


async def _let_pumps_run() -> None:
    for _ in range(50):
        await anyio.lowlevel.checkpoint()


@pytest.mark.parametrize("answered", [True, False])
def test_the_session_stays_open_until_what_was_read_is_answered(answered):
    from agentenv_local.mcp_stdio import answering_in_flight

    async def go():
        stdin_send, stdin = anyio.create_memory_object_stream(10)
        stdout, stdout_recv = anyio.create_memory_object_stream(10)
        async with answering_in_flight(stdin, stdout, drain_timeout=0.2 if not answered else 60) as (
                to_server, from_server):
            await stdin_send.send(_request(7))
            await stdin_send.aclose()  # the client is gone
            assert (await to_server.receive()).message.id == 7
            await _let_pumps_run()
            with pytest.raises(anyio.WouldBlock):  # not ended: request 7 is still owed an answer
                to_server.receive_nowait()
            if answered:
                await from_server.send(_response(7))
                assert (await stdout_recv.receive()).message.id == 7
            with anyio.fail_after(30):  # then (or after the drain timeout) the server sees stdin's end
                with pytest.raises(anyio.EndOfStream):
                    await to_server.receive()
            await from_server.aclose()
        with anyio.fail_after(30):  # and stdout's stream is closed behind the server
            with pytest.raises(anyio.EndOfStream):
                await stdout_recv.receive()

    anyio.run(go)
