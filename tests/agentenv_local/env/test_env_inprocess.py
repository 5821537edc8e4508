"""An env in-process: an mcp 2.x `Client` on `env.mcp_server()` (the 2026 revision through a direct dispatcher, and
the legacy handshake over in-memory streams), and `env.call_tool` without MCP framing."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Annotated

import pytest
from kits.env_sdk import run
from pydantic import BaseModel, Field

from agentenv_local.env import Env, EnvError, ToolContext, environment_card, tool

MODES = ["auto", "legacy"]


class Point(BaseModel):
    x: int
    y: int


@dataclasses.dataclass
class Pair:
    a: str
    b: str


def helper_role() -> str | None:
    """Deep code reads the caller through the contextvar."""
    return ToolContext.current().caller.role


@environment_card(name="kitchen", description="Every kind of tool.")
class Kitchen(Env):
    def __init__(self) -> None:
        self.events: list[str] = []
        self.refuse: object = None

    def on_startup(self) -> None:
        self.events.append("startup")

    async def on_shutdown(self) -> None:
        self.events.append("shutdown")

    def on_tool_call(self, ctx: ToolContext):
        self.events.append(f"hook:{ctx.tool}:{dict(ctx.arguments)}")
        if ctx.tool == "guarded" and ctx.caller.role != "admin":
            return self.refuse
        return None

    @tool()
    def echo(self, text: Annotated[str, Field(description="What to say back")]) -> str:
        """Return the text it's sent."""
        return text

    @tool()
    async def add(self, a: int, b: int = 2) -> int:
        """Async tool."""
        await asyncio.sleep(0)
        return a + b

    @tool()
    def as_dict(self) -> dict:
        return {"k": [1, 2], "nested": {"ok": True}}

    @tool()
    def as_list(self) -> list:
        return ["a", "b"]

    @tool()
    def as_model(self) -> Point:
        return Point(x=1, y=2)

    @tool()
    def as_dataclass(self) -> Pair:
        return Pair("x", "y")

    @tool()
    def nothing(self) -> None:
        return None

    @tool(structured_output=False)
    def text_only(self) -> dict:
        return {"k": 1}

    @tool()
    def boom(self) -> str:
        raise RuntimeError("the oven exploded")

    @tool()
    def refuse_politely(self) -> str:
        raise EnvError("out_of_stock", "no more eggs", retryable=True, hint="try tomorrow")

    @tool()
    def guarded(self) -> str:
        return "secret"

    @tool()
    def who(self, ctx: ToolContext) -> dict:
        return {"role": ctx.caller.role, "raw_role": ctx.caller.raw_role, "session": ctx.caller.session,
                "virtual_time": ctx.virtual_time.isoformat() if ctx.virtual_time else None,
                "deep_role": helper_role(), "tool": ctx.tool, "transport": ctx.transport}

    @tool(hidden_by_default=True)
    def plumbing(self) -> str:
        return "p"


def dump(result) -> dict:
    return result.model_dump(by_alias=True, exclude_none=True, mode="json", exclude={"meta", "result_type"})


async def with_client(env: Env, mode: str, fn):
    async with env.client(mode=mode) as client:
        return await fn(client)


@pytest.mark.parametrize("mode", MODES)
def test_list_tools_schema_and_meta(mode):
    async def go(client):
        return (await client.list_tools()).tools

    tools = {t.name: t for t in run(with_client(Kitchen(), mode, go))}
    assert "echo" in tools and "who" in tools
    echo = tools["echo"]
    assert echo.description == "Return the text it's sent."
    assert echo.input_schema["properties"]["text"]["description"] == "What to say back"
    assert echo.input_schema["required"] == ["text"]
    assert tools["who"].input_schema["properties"] == {}          # the ToolContext parameter is not advertised
    assert tools["plumbing"].meta == {"agentenv.io/hiddenByDefault": True}
    assert tools["echo"].meta is None


@pytest.mark.parametrize("mode", MODES)
def test_call_results_have_text_and_structured_content(mode):
    async def go(client):
        out = {}
        for name, args in [("echo", {"text": "hi"}), ("add", {"a": 1}), ("as_dict", {}), ("as_list", {}),
                           ("as_model", {}), ("as_dataclass", {}), ("nothing", {}), ("text_only", {})]:
            out[name] = dump(await client.call_tool(name, args))
        return out

    out = run(with_client(Kitchen(), mode, go))
    assert out["echo"] == {"content": [{"type": "text", "text": "hi"}], "structuredContent": {"result": "hi"},
                           "isError": False}
    assert out["add"]["structuredContent"] == {"result": 3} and out["add"]["content"][0]["text"] == "3"
    assert out["as_dict"]["structuredContent"] == {"k": [1, 2], "nested": {"ok": True}}
    assert out["as_list"]["structuredContent"] == {"result": ["a", "b"]}
    assert out["as_model"]["structuredContent"] == {"x": 1, "y": 2}
    assert out["as_dataclass"]["structuredContent"] == {"a": "x", "b": "y"}
    assert out["nothing"] == {"content": [], "isError": False}
    assert out["text_only"] == {"content": [{"type": "text", "text": '{"k": 1}'}], "isError": False}


@pytest.mark.parametrize("mode", MODES)
def test_errors_become_is_error_results(mode):
    async def go(client):
        return {name: dump(await client.call_tool(name, args)) for name, args in [
            ("refuse_politely", {}), ("boom", {}), ("echo", {}), ("add", {"a": "x"}), ("missing", {})]}

    out = run(with_client(Kitchen(), mode, go))
    assert out["refuse_politely"] == {
        "content": [{"type": "text", "text": "out_of_stock: no more eggs"}],
        "structuredContent": {"code": "out_of_stock", "message": "no more eggs", "retryable": True, "applied": "no",
                              "hint": "try tomorrow"},
        "isError": True}
    assert out["boom"] == {"content": [{"type": "text", "text": "Error executing tool boom: the oven exploded"}],
                           "isError": True}
    assert out["echo"]["isError"] and out["echo"]["content"][0]["text"] == \
        "invalid_arguments: echo: text: Field required"
    assert out["add"]["isError"] and out["add"]["content"][0]["text"].startswith("invalid_arguments: add: a:")
    assert out["missing"] == {"content": [{"type": "text", "text": "Unknown tool: missing"}], "isError": True}


@pytest.mark.parametrize("mode", MODES)
def test_role_session_and_virtual_time_come_from_meta(mode):
    async def go(client):
        forwarded = await client.call_tool("who", {}, meta={"agentenv.io/role": "alice", "agentenv.io/session": "s-1",
                                                              "agentenv.io/virtual_time": "2025-03-10T09:00:00Z"})
        default = await client.call_tool("who", {}, meta={"agentenv.io/role": "default"})
        bare = await client.call_tool("who", {})
        return forwarded.structured_content, default.structured_content, bare.structured_content

    forwarded, default, bare = run(with_client(Kitchen(), mode, go))
    assert forwarded == {"role": "alice", "raw_role": "alice", "session": "s-1",
                         "virtual_time": "2025-03-10T09:00:00+00:00", "deep_role": "alice", "tool": "who",
                         "transport": "mcp"}
    assert default["role"] is None and default["raw_role"] == "default" and default["deep_role"] is None
    assert bare["role"] is None and bare["virtual_time"] is None


@pytest.mark.parametrize("mode", MODES)
def test_on_tool_call_can_refuse(mode):
    from mcp.types import CallToolResult, TextContent

    env = Kitchen()

    async def go(client):
        out = []
        for refusal in (EnvError("permission_denied", "admins only"), "not for you",
                        CallToolResult(content=[TextContent(type="text", text="nope")], is_error=True)):
            env.refuse = refusal
            out.append(dump(await client.call_tool("guarded", {})))
        out.append(dump(await client.call_tool("guarded", {}, meta={"agentenv.io/role": "admin"})))
        return out

    envelope, text, model, allowed = run(with_client(env, mode, go))
    assert envelope["isError"] and envelope["content"][0]["text"] == "permission_denied: admins only"
    assert envelope["structuredContent"]["code"] == "permission_denied"
    assert text == {"content": [{"type": "text", "text": "not for you"}], "isError": True}
    assert model == {"content": [{"type": "text", "text": "nope"}], "isError": True}
    assert allowed["structuredContent"] == {"result": "secret"}
    assert "hook:guarded:{}" in env.events


def test_startup_and_shutdown_run_once_around_serving():
    env = Kitchen()

    async def go():
        async with env.client() as a, env.client(mode="legacy") as b:
            await a.call_tool("echo", {"text": "1"})
            await b.call_tool("echo", {"text": "2"})

    run(go())
    assert env.events[0] == "startup" and env.events[-1] == "shutdown"
    assert env.events.count("startup") == 1 and env.events.count("shutdown") == 1


def test_call_tool_in_process_without_mcp():
    env = Kitchen()
    out = run(env.call_tool("who", role="bob", session="s", virtual_time="2025-01-01T00:00:00Z"))
    assert out["isError"] is False
    assert out["structuredContent"]["role"] == "bob" and out["structuredContent"]["transport"] == "inproc"
    assert out["structuredContent"]["virtual_time"] == "2025-01-01T00:00:00+00:00"
    assert run(env.call_tool("echo", {"text": "x"})) == {"content": [{"type": "text", "text": "x"}],
                                                          "structuredContent": {"result": "x"}, "isError": False}


def test_sync_tools_can_run_on_a_thread_and_keep_their_context():
    class Threaded(Kitchen):
        sync_handlers_in_thread = True

    out = run(Threaded().call_tool("who", role="carol"))
    assert out["structuredContent"]["deep_role"] == "carol"


def test_update_tool_changes_the_listing_and_the_card():
    env = Kitchen()
    run(env.update_tool("echo", description="Say it again."))
    assert next(t for t in env.list_tools() if t["name"] == "echo")["description"] == "Say it again."
    assert next(t for t in env.card().capabilities.tools if t.name == "echo").description == "Say it again."
    with pytest.raises(ValueError, match="no served tool"):
        run(env.update_tool("nope", description="x"))


def test_json_encoded_arguments_are_accepted_for_structured_parameters():
    class E(Env):
        @tool()
        def total(self, values: list[int], options: dict | None = None) -> int:
            return sum(values)

    assert run(E().call_tool("total", {"values": "[1, 2, 3]"}))["structuredContent"] == {"result": 6}
