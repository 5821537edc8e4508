"""Compatibility with the reference SDK (agentenv-framework-protocol[agent] in .venv-ref): our client against an
agent written with it."""

from __future__ import annotations

import subprocess

import pytest
from kits.agents import REF_PYTHON, run, subprocess_server, wait_healthy

from agentenv_local.agents.client import A2AClient


def _reference_agent_sdk() -> bool:
    if not REF_PYTHON.exists():
        return False
    probe = subprocess.run([str(REF_PYTHON), "-c", "import a2a, agentenv_protocol.a2a_agent"],
                           check=False, capture_output=True, timeout=60)
    return probe.returncode == 0


pytestmark = pytest.mark.skipif(not _reference_agent_sdk(),
                                reason=".venv-ref lacks agentenv-framework-protocol[agent] (the reference's A2A "
                                       "agent SDK); install it with: .venv-ref/bin/pip install "
                                       "'agentenv-framework-protocol[agent]'")


def test_our_client_prompts_a_reference_sdk_agent():
    from agentenv_local.env.serve import bind_socket

    sock = bind_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    sock.close()   # the reference's uvicorn binds it itself

    async def go(base):
        async with A2AClient(base) as client:
            card = await client.card()
            ok = await client.prompt("hello", context_id="c1", timeout=30)
            failed = await client.prompt("fail", context_id="c1", timeout=30)
            page = await client.trajectory_get(context_id="c1", after=0)
            name = await client.mcp_config_add("http://127.0.0.1:9/mcp", headers={"AgentEnv-Role": "r"})
            return card, ok, failed, page, name, client.protocol

    with subprocess_server([str(REF_PYTHON.parent.parent.parent / "tests/agentenv_local/agents/reference_agent.py"),
                            str(port)], python=str(REF_PYTHON)) as (base, _proc):
        wait_healthy(base)
        card, ok, failed, page, name, protocol = run(go(base))
    assert protocol == "0.3" and card["name"] == "ref-echo"
    assert ok.state == "completed" and ok.text == "ref says hello" and ok.structured_output == {"n": 1}
    assert failed.state == "failed" and failed.error["error_code"] == "ref.nope"
    assert failed.error["error_type"] == "agent_error"
    assert [e["saw"] for e in page["events"]] == ["hello", "fail"]
    assert name.startswith("mcp_")


def test_reference_client_prompts_our_scripted_agent():
    import json

    from kits.agents import ROOT, serving_agent

    from agentenv_local.agents.scripted import ScriptedAgent

    agent = ScriptedAgent(plan=[{"reply": "scripted heard: {input}"}])
    with serving_agent(agent) as base:
        out = subprocess.run([str(REF_PYTHON), str(ROOT / "tests/agentenv_local/agents/reference_a2a_client_check.py"),
                              base], check=False, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["card_name"] == "scripted" and seen["card_url"] == base + "/a2a"
    assert "urn:agentenv:trajectory/v1" in seen["extensions"]
    assert seen["state"] == "completed" and seen["texts"] == ["scripted heard: from the reference"]
    assert seen["context"] == "ref-ctx"
