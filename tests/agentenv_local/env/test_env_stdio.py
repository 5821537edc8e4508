"""An env over stdio: spawned as `python -m agentenv_local.env FILE --stdio` and driven by an mcp 2.x stdio client."""

from __future__ import annotations

import sys

import pytest
from kits.env_sdk import ECHO, NOTES, ROOT, run


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_stdio_list_and_call(mode):
    from mcp import Client, StdioServerParameters

    async def go():
        params = StdioServerParameters(command=sys.executable, args=["-m", "agentenv_local.env", str(ECHO), "--stdio"],
                                       cwd=str(ROOT))
        async with Client(params, mode=mode) as client:
            tools = [t.name for t in (await client.list_tools()).tools]
            echo = await client.call_tool("echo", {"text": "over stdio"})
            who = await client.call_tool("whoami", {}, meta={"agentenv.io/role": "carol",
                                                             "agentenv.io/session": "s9"})
            return client.protocol_version, tools, echo, who

    version, tools, echo, who = run(go())
    assert version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    assert tools == ["echo", "whoami", "fail", "call_count"]
    assert echo.structured_content == {"result": "over stdio"}
    assert who.structured_content["role"] == "carol" and who.structured_content["session"] == "s9"


def test_stdio_env_with_state_and_shutdown_hook(tmp_path):
    from mcp import Client, StdioServerParameters

    db = tmp_path / "notes.db"

    async def go():
        params = StdioServerParameters(command=sys.executable, args=["-m", "agentenv_local.env", str(NOTES), "--stdio"],
                                       cwd=str(ROOT), env={"NOTES_DB": str(db)})
        async with Client(params) as client:
            await client.call_tool("add_note", {"title": "kept"})
        async with Client(params) as client:
            return await client.call_tool("list_notes", {})

    listing = run(go())
    assert [n["title"] for n in listing.structured_content["result"]] == ["kept"]
