"""The desk's scripted "agent": no model, the same MCP calls on every run, through the env's gateway."""

import json

from mcp import Client


def payload(result):
    if result.is_error:
        raise RuntimeError(f"the tool failed: {result.content[0].text if result.content else '(no text)'}")
    """A tool result's value: the structured content's `result` (or itself), else the text as JSON."""
    if result.structured_content is not None:
        data = result.structured_content
        return data["result"] if isinstance(data, dict) and set(data) == {"result"} else data
    text = result.content[0].text if result.content else ""
    try:
        return json.loads(text)
    except ValueError:
        return text


async def run(input):
    async with Client(input["env"]["mcp_url"]) as client:
        await client.call_tool("increment", {"name": "tickets", "by": 2})
        done = payload(await client.call_tool("increment", {"name": "tickets"}))
        await client.call_tool("put_note", {"key": "standup", "text": "ship the one-process provider"})
    return {"tickets": done}
