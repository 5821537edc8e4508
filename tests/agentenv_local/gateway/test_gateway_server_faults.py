"""Composition faults and modes: tool-name clashes (refused, and served under prefixes), consistent mode never
interleaving calls, a child killed mid-run, children that never get ready, and 200 concurrent MCP sessions."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest
from kits.gateway import ECHO, ROOT, free_port, gateway_serving, http, load

from agentenv_local.env import Env, environment_card, tool
from agentenv_local.gateway.children import ChildError, ChildSpec
from agentenv_local.gateway.server import Gateway


def test_tool_name_clash_is_refused_naming_both_servers_and_the_fix():
    with gateway_serving("clash", [ChildSpec("a", load(ECHO)), ChildSpec("b", load(ECHO))]) as (base, _), \
            http(base) as h:
        state = h.get("/state").json()
        assert state["tool_name_clashes"]["echo"] == ["a", "b"]
        assert state["mcp_servers"] == []
        r = h.post("/step", json={"action": "list_tools"})
        assert r.status_code == 503
        error = r.json()["error"]
        assert error.startswith("Duplicate tool names 'echo' from 'a' and 'b'")
        assert error.endswith(", so the env serves none of its servers' tools.")
        assert "prefix" in r.json()["hint"]


def test_prefix_tools_serves_both_servers():
    children = [ChildSpec("a", load(ECHO)), ChildSpec("b", load(ECHO))]
    with gateway_serving("pre", children, prefix_tools=True) as (base, _), http(base) as h:
        listed = [t["name"] for t in h.post("/step", json={"action": "list_tools"}).json()["tools"]]
        assert listed == ["a_echo", "a_whoami", "a_fail", "b_echo", "b_whoami", "b_fail"]
        for name in ("a_echo", "b_echo"):
            r = h.post("/step", json={"action": "call_tool", "tool_name": name, "arguments": {"text": name}})
            assert r.json()["structuredContent"] == {"result": name}
        assert h.get("/state").json()["tool_name_clashes"] == {}
    per_child = [ChildSpec("a", load(ECHO)), ChildSpec("b", load(ECHO), prefix="other")]
    with gateway_serving("pre2", per_child) as (base, _), http(base) as h:
        listed = [t["name"] for t in h.post("/step", json={"action": "list_tools"}).json()["tools"]]
        assert listed == ["echo", "whoami", "fail", "other_echo", "other_whoami", "other_fail"]


@environment_card(name="slow")
class Slow(Env):
    def __init__(self) -> None:
        self.active = 0
        self.peak = 0
        self.log: list[tuple[str, int]] = []

    @tool()
    async def work(self, n: int) -> int:
        """Take a little while."""
        self.active += 1
        self.peak = max(self.peak, self.active)
        self.log.append(("in", n))
        await asyncio.sleep(0.02)
        self.log.append(("out", n))
        self.active -= 1
        return n


def _run_concurrent_calls(base: str, count: int = 12) -> None:
    from mcp import Client

    async def go():
        async def one(i):
            async with Client(base + "/mcp") as c:
                r = await c.call_tool("work", {"n": i})
                assert not r.is_error

        await asyncio.gather(*(one(i) for i in range(count)))

    asyncio.run(go())


def test_consistent_mode_never_interleaves_calls():
    slow = Slow()
    with gateway_serving("c", [ChildSpec("slow", slow)], mode="consistent") as (base, _):
        _run_concurrent_calls(base)
    assert slow.peak == 1
    assert all(slow.log[i][0] == "in" and slow.log[i + 1] == ("out", slow.log[i][1])
               for i in range(0, len(slow.log), 2))
    fast = Slow()
    with gateway_serving("p", [ChildSpec("slow", fast)], mode="performance") as (base, _):
        _run_concurrent_calls(base)
    assert fast.peak > 1  # performance mode lets calls overlap


def _spawn_echo(port: int) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "agentenv_local.env", str(ECHO), "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    line = proc.stderr.readline()
    assert "serving on" in line, line
    return proc


async def _mcp_echo(base: str, text: str):
    from mcp import Client

    async with Client(base + "/mcp") as c:
        return await c.call_tool("echo", {"text": text})


@environment_card(name="sleepy")
class Sleepy(Env):
    @tool()
    async def nap(self, seconds: float) -> str:
        """Sleep a while."""
        await asyncio.sleep(seconds)
        return "rested"


def test_a_call_past_the_tool_timeout_is_a_504_on_step_and_a_tool_error_over_mcp():
    with gateway_serving("z", [ChildSpec("sleepy", Sleepy())], tool_timeout=0.2) as (base, _), http(base) as h:
        r = h.post("/step", json={"action": "call_tool", "tool_name": "nap", "arguments": {"seconds": 2}})
        assert (r.status_code, r.json()) == (504, {"error": "Tool 'nap' timed out after 0.2s"})
        r = h.post("/step", json={"action": "call_tool", "tool_name": "nap", "arguments": {"seconds": 0}})
        assert r.json()["structuredContent"] == {"result": "rested"}

        async def over_mcp():
            from mcp import Client

            async with Client(base + "/mcp") as c:
                late = await c.call_tool("nap", {"seconds": 2})
                assert late.is_error and late.content[0].text == "Tool 'nap' timed out after 0.2s"

        asyncio.run(over_mcp())


def test_child_killed_mid_run_is_a_tool_error_and_the_restarted_child_serves_again():
    port = free_port()
    proc = _spawn_echo(port)
    try:
        with gateway_serving("k", [ChildSpec("echo", f"http://127.0.0.1:{port}/mcp")]) as (base, _), \
                http(base) as h:
            def echo(text):
                return h.post("/step", json={"action": "call_tool", "tool_name": "echo",
                                             "arguments": {"text": text}}).json()

            assert echo("before")["structuredContent"] == {"result": "before"}
            proc.kill()
            proc.wait()
            dead = asyncio.run(_mcp_echo(base, "during"))  # over MCP: a tool error
            assert dead.is_error and "server 'echo' did not answer" in dead.content[0].text
            r = h.post("/step", json={"action": "call_tool", "tool_name": "echo", "arguments": {"text": "x"}})
            assert r.status_code == 500 and r.json()["error"].startswith("Tool execution failed (")  # /step: 500
            # Both failed on the lost connection at once, not after waiting out the tool timeout (a 504).
            assert "timed out" not in dead.content[0].text and "timed out" not in r.json()["error"]
            proc = _spawn_echo(port)
            after = echo("after")
            assert after.get("structuredContent") == {"result": "after"}, after
            events = [json.loads(x) for x in h.get("/trajectory").text.splitlines()]
            assert any(e["event_type"] == "tool_call_failed" for e in events)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_child_that_never_gets_ready_fails_start_with_its_last_output(tmp_path):
    broken = tmp_path / "server.py"
    broken.write_text("print('warming up')\nraise SystemExit('the database is not there')\n")

    async def go(spec, timeout=30.0):
        gw = Gateway("g", [spec], ready_timeout=timeout)
        with pytest.raises(ChildError) as info:
            await gw.start()
        return str(info.value)

    message = asyncio.run(go(ChildSpec("broken", str(broken))))
    assert "child 'broken'" in message and "the database is not there" in message
    message = asyncio.run(go(ChildSpec("gone", f"http://127.0.0.1:{free_port()}/mcp"), timeout=1.0))
    assert "child 'gone'" in message and "did not become ready" in message and "Connect" in message


def test_200_concurrent_mcp_sessions(echo_url):
    from mcp import Client

    with gateway_serving("many", [ChildSpec("echo", echo_url)]) as (base, _):
        async def go():
            async def one(i):
                async with Client(base + "/mcp", mode="legacy" if i % 2 else "auto") as c:
                    r = await c.call_tool("echo", {"text": f"s{i}"})
                    assert r.structured_content == {"result": f"s{i}"}
                    return True

            results = await asyncio.gather(*(one(i) for i in range(200)), return_exceptions=True)
            errors = [r for r in results if r is not True]
            assert not errors, errors[:3]

        asyncio.run(go())


def test_a_child_the_gateway_starts_gets_none_of_our_secrets(tmp_path, monkeypatch):
    # The child's stderr tail is shown on failure: a child that prints its environment must print no secret.
    monkeypatch.setenv("AGENTENV_TEST_SECRET_KEY", "sk-should-never-leak")
    spy = tmp_path / "server.py"
    spy.write_text("import os, sys\n"
                   "print('secret:', os.environ.get('AGENTENV_TEST_SECRET_KEY'), file=sys.stderr)\n"
                   "raise SystemExit('stop here')\n")

    async def go():
        gw = Gateway("g", [ChildSpec("spy", str(spy))], ready_timeout=30.0)
        with pytest.raises(ChildError) as info:
            await gw.start()
        return str(info.value)

    message = asyncio.run(go())
    assert "secret: None" in message and "sk-should-never-leak" not in message
