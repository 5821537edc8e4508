"""The gateway re-discovers a child's tools when the child says `notifications/tools/list_changed`: a real
`agentenv env dev` subprocess behind a real gateway on a free port, real mcp 2.x clients on the gateway that
stay connected while the env file is rewritten under them."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from kits.gateway import DEV_V1, DEV_V2, DevProcess, gateway_serving, http

ROOT = Path(__file__).resolve().parents[3]

V1, V2 = DEV_V1, DEV_V2

V3 = V2.replace('''
    @tool()
    def echo(self, text: str) -> str:
        "Say it back."
        return text
''', "")


@pytest.fixture()
def dev_env(tmp_path):
    path = tmp_path / "server.py"
    path.write_text(V1)
    dev = DevProcess(path, "--port", "0")
    try:
        base = dev.wait_for(r"serving \S+ on (http://\S+)").group(1)
        yield path, dev, base
    finally:
        dev.stop()


def _state_tools(base: str) -> list[str]:
    with http(base) as h:
        state = h.get("/state").json()
    return [t["name"] for server in state["mcp_servers"] for t in server["tools"]]


def test_a_saved_env_file_reaches_the_gateways_clients_as_tools_list_changed(dev_env):
    from mcp import Client

    path, dev, dev_base = dev_env
    with gateway_serving("hot", [("devecho", dev_base + "/mcp")]) as (base, gw):
        assert _state_tools(base) == ["echo"]

        async def scenario() -> None:
            changed = asyncio.Event()

            async def on_message(message):
                if getattr(message, "method", None) == "notifications/tools/list_changed":
                    changed.set()

            async with Client(base + "/mcp", mode="legacy", message_handler=on_message) as client:
                assert client.server_capabilities.tools.list_changed is True
                assert [t.name for t in (await client.list_tools()).tools] == ["echo"]
                assert (await client.call_tool("echo", {"text": "hi"})).content[0].text == "hi"

                # a tool added: the gateway's own session is told, and re-listing (same session) shows it
                mark = dev.mark()
                path.write_text(V2)
                await asyncio.to_thread(dev.wait_for, r"reloaded devecho: 2 tools \(\+1 -0\)", after=mark)
                await asyncio.wait_for(changed.wait(), 15)
                names = [t.name for t in (await client.list_tools(cache_mode="bypass")).tools]
                assert names == ["echo", "shout"]
                assert (await client.call_tool("shout", {"text": "hi"})).content[0].text == "HI"
                assert _state_tools(base) == ["echo", "shout"]

                # a tool removed: told again; the removed tool is unknown now
                changed.clear()
                mark = dev.mark()
                path.write_text(V3)
                await asyncio.to_thread(dev.wait_for, r"reloaded devecho: 1 tools \(\+0 -1\)", after=mark)
                await asyncio.wait_for(changed.wait(), 15)
                assert [t.name for t in (await client.list_tools(cache_mode="bypass")).tools] == ["shout"]
                gone = await client.call_tool("echo", {"text": "hi"})
                assert gone.is_error and "Unknown tool: echo" in gone.content[0].text

        asyncio.run(scenario())

        assert _state_tools(base) == ["shout"]
        with http(base) as h:
            card = h.get("/.well-known/agent-env.json").json()
            events = [json.loads(line) for line in h.get("/trajectory").text.splitlines() if line.strip()]
        child_tools = [t["name"] for t in card["children_environments"][0]["capabilities"]["tools"]]
        assert child_tools == ["shout"]
        changes = [e for e in events if e["event_type"] == "tools_changed"]
        assert [(e["server"], e["added"], e["removed"]) for e in changes] == [
            ("devecho", ["shout"], []), ("devecho", [], ["echo"])]
        assert gw.events[-1]["event_type"] == "tools_changed"


def test_prefixes_rbac_and_a_2026_listener_survive_a_rediscovery(dev_env):
    from mcp import Client

    path, dev, dev_base = dev_env
    with gateway_serving("hot", [("devecho", dev_base + "/mcp")], prefix_tools=True) as (base, gw):
        with http(base) as h:
            r = h.post("/tools/disable", json={"role": "guest", "tools": ["devecho_echo"]})
            assert r.status_code == 200, r.text

        async def scenario() -> None:
            async with Client(base + "/mcp", mode="auto") as client:
                assert [t.name for t in (await client.list_tools()).tools] == ["devecho_echo"]
                async with client.listen(tools_list_changed=True) as subscription:
                    mark = dev.mark()
                    path.write_text(V2)
                    await asyncio.to_thread(dev.wait_for, r"reloaded devecho: 2 tools", after=mark)
                    await asyncio.wait_for(subscription.__anext__(), 15)
                names = [t.name for t in (await client.list_tools(cache_mode="bypass")).tools]
                assert names == ["devecho_echo", "devecho_shout"]
                assert (await client.call_tool("devecho_shout", {"text": "hi"})).content[0].text == "HI"

        asyncio.run(scenario())

        assert gw.list_tools("guest") and [t["name"] for t in gw.list_tools("guest")] == ["devecho_shout"]
        assert _state_tools(base) == ["devecho_echo", "devecho_shout"]


def test_a_handshake_era_child_session_is_rediscovered_through_its_message_handler(dev_env, monkeypatch):
    """A child that speaks only the older revisions (as servers built on the reference's SDK do) sends
    tools/list_changed on its standalone stream; the gateway's session receives it in its message handler."""
    from mcp import Client

    from agentenv_local.gateway.children import Child

    def legacy_client(self):
        return Client(self.url, mode="legacy", message_handler=self._on_message)

    monkeypatch.setattr(Child, "_client", legacy_client)
    path, dev, dev_base = dev_env
    with gateway_serving("hot", [("devecho", dev_base + "/mcp")]) as (base, gw):
        assert gw.children[0].client.session.protocol_version not in ("2026-07-28",)
        mark = dev.mark()
        path.write_text(V2)
        dev.wait_for(r"reloaded devecho: 2 tools", after=mark)
        deadline = time.monotonic() + 15
        while _state_tools(base) != ["echo", "shout"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _state_tools(base) == ["echo", "shout"]
        with http(base) as h:
            r = h.post("/step", json={"action": "call_tool", "tool_name": "shout", "arguments": {"text": "hi"}})
        assert r.status_code == 200 and r.json()["content"][0]["text"] == "HI"
        assert [e["added"] for e in gw.events if e["event_type"] == "tools_changed"] == [["shout"]]
