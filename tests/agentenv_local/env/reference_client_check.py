"""Run with the REFERENCE's Python (a venv with `agentenv-framework-protocol`, never this project's venv): drive an
env served by this project's SDK with the reference's own clients and print what they saw as one JSON object.

    python reference_client_check.py http://127.0.0.1:PORT

Used by test_env_reference_client.py; see there for how to create the venv.
"""

import asyncio
import json
import sys

from agentenv_protocol import ToolSession
from agentenv_protocol import client as C
from agentenv_protocol.types import DataPart, TextPart


async def main(base: str) -> dict:
    out: dict = {}
    card = await C.get_card(base)
    out["card_name"] = card["name"]
    out["mcp_path"] = C.mcp_path(card)
    out["supports_v1"] = await C.supports_v1(base)
    out["echo_tool"] = C.find_tool(card, "echo") is not None
    await C.reset_data(base)
    await C.add_data(base, [TextPart(text="hello"), DataPart(data={"k": 1})])
    got = await C.get_data(base)
    out["get_data"] = [p.model_dump(mode="json", exclude_none=True) for p in got.parts]
    out["ext_ok"] = await C.invoke_extension(base, card, "urn:agentenv:echo-config/v1", {"calls": 2})
    try:
        await C.invoke_extension(base, card, "urn:agentenv:echo-config/v1", {"calls": -1})
    except C.ExtensionCallError as e:
        out["ext_error"] = {"status": e.response.status_code, "code": e.code, "detail": e.detail,
                            "retryable": e.retryable, "applied": e.applied, "hint": e.hint}
    async with ToolSession(mcp_url=base + C.mcp_path(card), role="alice") as session:
        out["protocol_version"] = session.protocol_version
        out["tools"] = [t.name for t in await session.list_tools()]
        out["echo"] = (await session.call_tool("echo", {"text": "hi"})).model_dump()
        out["whoami"] = json.loads((await session.call_tool("whoami", {})).text)
        fail = await session.call_tool("fail", {})
        out["fail"] = {"isError": fail.isError, "text": fail.text}
    async with ToolSession(mcp_url=base + "/mcp") as session:
        out["whoami_default"] = json.loads((await session.call_tool("whoami", {})).text)
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1]))))
