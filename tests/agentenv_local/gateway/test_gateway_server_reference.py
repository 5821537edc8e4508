"""The reference's own MCP client (`agentenv_protocol.ToolSession`, mcp 1.x) against our gateway (Appendix A
item 10): tools listed per role, RBAC refusal text, `get_time` while the clock is armed. Needs the reference's
side venv (see tests/agentenv_local/env/test_env_reference_client.py); skipped without it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from kits.gateway import NOTES, gateway_serving, http, load
from kits.servers import REF_PYTHON, REF_VENV, reference_imports

from agentenv_local.gateway.children import ChildSpec

HERE = Path(__file__).resolve().parent

pytestmark = pytest.mark.skipif(not reference_imports("agentenv_protocol"), reason=f"no reference venv at {REF_VENV}")


def test_reference_tool_session_drives_our_gateway(echo_url):

    children = [ChildSpec("echo", echo_url), ChildSpec("notes", load(NOTES))]
    with gateway_serving("demo", children) as (base, _), http(base) as h:
        h.post("/tools/disable", json={"role": "agent", "tools": ["echo"]})
        h.put("/clock/set-time", json={"virtual_time": "2025-03-10T09:00:00Z",
                                       "virtual_seconds_per_real_second": 3600})
        out = subprocess.run([str(REF_PYTHON), str(HERE / "reference_gateway_check.py"), base],
                             check=False, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert "echo" not in seen["agent_tools"] and "get_time" in seen["agent_tools"]
    assert "whoami" in seen["agent_tools"]
    assert seen["agent_echo"] == {"isError": True, "text": "Tool 'echo' is disabled for role 'agent'"}
    assert seen["agent_whoami"]["role"] == "agent" and seen["agent_whoami"]["session"]
    assert seen["get_time"]["local_time"].endswith("-04:00")
    assert "echo" in seen["default_tools"] and "get_time" in seen["default_tools"]
    assert seen["default_echo"]["isError"] is False
    assert seen["default_echo"]["content"][0]["text"] == "hi"




# An env written with the reference's SDK (our own small fixture, tests/fixtures/reference_sdk_env) runs in
# the side venv, which scripts/setup.sh --test gives the reference's SDK and mcp 1.x.
REF_ENV = Path(__file__).resolve().parents[2] / "fixtures" / "reference_sdk_env" / "server.py"


def _reference_server_available() -> bool:
    """The reference's SDK with mcp 1.x in the side venv (test_gateway_fast_path asks too)."""
    return reference_imports("agentenv_protocol, mcp, uvicorn")


@pytest.mark.skipif(not _reference_server_available(), reason=f"no reference SDK with mcp 1.x in {REF_VENV}")
def test_reference_sdk_env_composed_with_ours_behind_our_gateway(tmp_path):
    """The issue's "done when": an env written with the reference's SDK (its own venv, a subprocess) composed with
    our echo env behind our gateway; driven with an mcp 2.x client and with the reference's ToolSession."""
    import asyncio
    import time

    from kits.gateway import ECHO, free_port
    from mcp import Client

    port = free_port()
    proc = subprocess.Popen([str(REF_PYTHON), str(REF_ENV)],
                            env={**os.environ, "MCP_HOST": "127.0.0.1", "MCP_PORT": str(port)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        children = [ChildSpec("helpdesk", f"http://127.0.0.1:{port}/mcp"), ChildSpec("echo", load(ECHO))]
        with gateway_serving("demo", children) as (base, _), http(base) as h:
            card = h.get("/.well-known/agent-env.json").json()
            assert [c["url"] for c in card["children_environments"]] == ["/svc/mcp-helpdesk/agentenv",
                                                                          "/svc/mcp-echo/agentenv"]
            h.put("/clock/set-time", json={"virtual_time": "2025-03-10T09:00:00Z", "mode": "stepped",
                                           "step_seconds": 3600})
            r = h.post("/triggers/register", json={"watch_roles": ["agent"], "triggers": [
                {"id": "mirror", "when": {"type": "action", "tool": "search_tickets"},
                 "actions": [{"type": "tool", "tool": "echo", "args": {"text": "${args.query}"}}]},
                {"id": "late", "when": {"type": "time", "at": "PT2H"},
                 "actions": [{"type": "permission", "action": "disable", "role": "agent", "tools": ["echo"]}]}]})
            assert r.status_code == 200, r.text

            async def drive():
                import httpx2
                from mcp.client.streamable_http import streamable_http_client

                client = httpx2.AsyncClient(headers={"AgentEnv-Role": "agent"})
                async with Client(streamable_http_client(base + "/mcp", http_client=client)) as c:
                    tools = [t.name for t in (await c.list_tools()).tools]
                    assert {"search_tickets", "close_ticket", "echo", "get_time"} <= set(tools)
                    found = await c.call_tool("search_tickets", {"query": "invoice"})  # 10:00
                    assert not found.is_error and "T-7" in found.content[0].text
                    now = await c.call_tool("get_time", {})
                    assert now.structured_content["current_time"] == "2025-03-10T10:00:00Z"
                    await c.call_tool("echo", {"text": "x"})  # 11:00: past t0 + 2h
                    for _ in range(100):
                        if "echo" not in [t.name for t in (await c.list_tools()).tools]:
                            break
                        await asyncio.sleep(0.05)
                    refused = await c.call_tool("echo", {"text": "y"})
                    assert refused.is_error and "disabled for role 'agent'" in refused.content[0].text

            asyncio.run(drive())
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                statuses = {t["id"]: t["status"] for t in h.get("/triggers/state").json()["triggers"]}
                if statuses == {"mirror": "fired", "late": "fired"}:
                    break
                time.sleep(0.05)
            assert statuses == {"mirror": "fired", "late": "fired"}
            if reference_imports("agentenv_protocol"):
                out = subprocess.run([str(REF_PYTHON), str(HERE / "reference_gateway_check.py"), base],
                                     check=False, capture_output=True, text=True, timeout=120)
                assert out.returncode == 0, out.stderr
                seen = json.loads(out.stdout)
                assert "search_tickets" in seen["agent_tools"] and "echo" not in seen["agent_tools"]
            events = [json.loads(x) for x in h.get("/trajectory").text.splitlines()]
            kinds = {e["event_type"] for e in events}
            assert {"tool_call", "tool_call_result", "trigger_fired", "internal_tool_call"} <= kinds
            assert all("virtual_time" in e for e in events)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
