"""The desk's outcome: both servers' state, read through the gateway's MCP endpoint."""

import json

from mcp import Client


def payload(result):
    if result.is_error:
        raise RuntimeError(f"the tool failed: {result.content[0].text if result.content else '(no text)'}")
    if result.structured_content is not None:
        data = result.structured_content
        return data["result"] if isinstance(data, dict) and set(data) == {"result"} else data
    return json.loads(result.content[0].text)


async def verify(mcp_url, run):
    async with Client(mcp_url) as client:
        counts = payload(await client.call_tool("counts", {}))
        notes = payload(await client.call_tool("list_notes", {}))
        standup = payload(await client.call_tool("get_note", {"key": "standup"})) if "standup" in notes else None
    return [
        {"id": "tally_counted", "result": counts == {"tickets": 3},
         "description": "tally holds tickets = 3 (2, then 1)"},
        {"id": "shelf_noted", "result": notes == ["standup"] and standup == "ship the one-process provider",
         "description": "shelf holds the one standup note"},
    ]
