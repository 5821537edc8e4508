"""Run with the REFERENCE's Python (a venv with `agentenv-framework-protocol`, never this project's venv): drive
our gateway with the reference's `ToolSession` and print what it saw as one JSON object.

    python reference_gateway_check.py http://127.0.0.1:PORT
"""

import asyncio
import json
import sys

from agentenv_protocol import ToolSession


async def main(base: str) -> dict:
    out: dict = {}
    async with ToolSession(mcp_url=base + "/mcp", role="agent") as session:
        out["agent_tools"] = [t.name for t in await session.list_tools()]
        refused = await session.call_tool("echo", {"text": "hi"})
        out["agent_echo"] = {"isError": refused.isError, "text": refused.text}
        out["agent_whoami"] = json.loads((await session.call_tool("whoami", {})).text)
        out["get_time"] = json.loads((await session.call_tool("get_time", {"time_zone": "America/New_York"})).text)
    async with ToolSession(mcp_url=base + "/mcp") as session:
        out["default_tools"] = [t.name for t in await session.list_tools()]
        out["default_echo"] = (await session.call_tool("echo", {"text": "hi"})).model_dump()
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1]))))
