"""The gateway's hot path to an in-process env (agentenv_local/gateway/children.py, ``Child._inproc``): a
tools/call goes straight to the env's runtime instead of through the in-memory mcp Client and server. The tool
must see the same call (its ``_meta`` with the Client's envelope, role, session, virtual time, transport) and
the caller must get the same answer as through the session, for every kind of result and failure."""

from __future__ import annotations

import asyncio
import functools
import textwrap

import pytest
from kits.gateway import load

from agentenv_local.gateway.server import ChildSpec, Gateway

ENV = textwrap.dedent('''
    import asyncio
    from agentenv_local.env import Env, EnvError, ToolContext, tool

    class Lane(Env):
        name = "lane"
        keeps_changelog = True
        cancelled = []

        @tool()
        async def show(self, ctx: ToolContext) -> dict:
            """What the tool is told about its call."""
            return {"meta": dict(ctx.meta), "transport": ctx.transport, "role": ctx.caller.role,
                    "session": ctx.caller.session, "virtual_time": str(ctx.virtual_time),
                    "no_headers": ctx.headers is None}

        @tool()
        def plain(self, text: str) -> str:
            """A string."""
            return text.upper()

        @tool()
        def numbers(self, n: int) -> list:
            """A list."""
            return list(range(n))

        @tool()
        def nothing(self) -> None:
            """No content."""

        @tool()
        def boom(self) -> str:
            """An exception."""
            raise RuntimeError("it broke")

        @tool()
        def refuse(self) -> str:
            """A structured error."""
            raise EnvError("not_allowed", "no way", retryable=True)

        @tool()
        def picture(self) -> dict:
            """A raw result with an image block."""
            return {"content": [{"type": "image", "data": "aGk=", "mimeType": "image/png"}], "isError": False}

        @tool()
        def write(self, ctx: ToolContext, key: str) -> str:
            """Records one change."""
            ctx.record_change("items", "insert", key, after={"key": key})
            return key

        @tool()
        async def slow(self) -> str:
            """Never finishes in time."""
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                Lane.cancelled.append(True)
                raise
            return "late"
''')

CALLS = [("plain", {"text": "hi"}), ("numbers", {"n": 3}), ("nothing", {}), ("boom", {}), ("refuse", {}),
         ("picture", {}), ("plain", {}), ("plain", {"text": 5}), ("write", {"key": "k1"})]


@pytest.fixture
def env(tmp_path):
    path = tmp_path / "lane_env.py"
    path.write_text(ENV)
    return load(path)


def synchronously(test):
    """Run an async test on a fresh loop (the suite has no async test plugin)."""
    @functools.wraps(test)
    def run(*args, **kwargs):
        return asyncio.run(test(*args, **kwargs))
    return run


def _child(gw: Gateway):
    (child,) = gw.children
    return child


async def _both_ways(gw: Gateway, tool: str, arguments: dict, **who) -> tuple[dict, dict]:
    """The answer through the lane, then through the session's Client (the lane switched off for one call)."""
    child = _child(gw)
    assert child._inproc is not None, "the in-process lane is not in use"
    through_lane = await gw.call(tool, dict(arguments), **who)
    lane, child._inproc = child._inproc, None
    try:
        through_client = await gw.call(tool, dict(arguments), **who)
    finally:
        child._inproc = lane
    return through_lane, through_client


@synchronously
async def test_every_kind_of_answer_is_the_one_the_session_gives(env):
    async with Gateway("lane", [ChildSpec("lane", env)]) as gw:
        for tool, arguments in CALLS:
            through_lane, through_client = await _both_ways(gw, tool, arguments, role="alice", session="s1")
            assert through_lane == through_client, tool
        # the changes the write recorded reached the gateway's changelog both times, one actor each
        rows = gw.changes.page(0, 100)["changes"]
        assert [r["key"] for r in rows] == ["k1", "k1"]


@synchronously
async def test_the_tool_is_told_the_same_call(env):
    async with Gateway("lane", [ChildSpec("lane", env)]) as gw:
        gw.arm_clock({"virtual_time": "2026-01-02T03:04:05Z", "mode": "frozen"})
        through_lane, through_client = await _both_ways(gw, "show", {}, role="bob", session="sess-9")
    seen = through_lane["structuredContent"]
    assert seen == through_client["structuredContent"]
    assert seen["role"] == "bob" and seen["session"] == "sess-9" and seen["transport"] == "mcp"
    assert seen["virtual_time"].startswith("2026-01-02 03:04:05")
    assert seen["no_headers"] is True
    assert "io.modelcontextprotocol/protocolVersion" in seen["meta"]  # the Client's envelope, as before


@synchronously
async def test_the_lane_carries_calls_without_the_client(env):
    async with Gateway("lane", [ChildSpec("lane", env)]) as gw:
        child = _child(gw)

        async def no_client(*args, **kwargs):
            raise AssertionError("the in-memory Client was used")

        child.client.call_tool = no_client
        result = await gw.call("plain", {"text": "x"})
        assert result["structuredContent"] == {"result": "X"}
        # a reopened session gets its lane back
        await child.reopen(child.generation)
        assert child._inproc is not None
        assert (await gw.call("plain", {"text": "y"}))["structuredContent"] == {"result": "Y"}
    assert child._inproc is None


@synchronously
async def test_a_call_that_times_out_is_cancelled_and_reported(env):
    async with Gateway("lane", [ChildSpec("lane", env)], tool_timeout=0.3) as gw:
        result = await gw.call("slow", {})
        assert result["isError"] is True
        assert "timed out" in result["content"][0]["text"]
        assert env.cancelled == [True]
        assert (await gw.call("plain", {"text": "after"}))["structuredContent"] == {"result": "AFTER"}
        kinds = [e["event_type"] for e in gw.events]
    assert kinds.count("tool_call") == 2 and kinds.count("tool_call_result") == 1, kinds


@synchronously
async def test_calls_run_concurrently_through_the_lane(env):
    async with Gateway("lane", [ChildSpec("lane", env)]) as gw:
        results = await asyncio.gather(*(gw.call("plain", {"text": f"t{i}"}) for i in range(50)))
    assert [r["structuredContent"]["result"] for r in results] == [f"T{i}" for i in range(50)]
