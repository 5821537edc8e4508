"""Both providers, end to end against the fake server: text, tools, usage, structured output."""

from __future__ import annotations

import asyncio
import json

import pytest

from agentenv_local.models import Message, ModelError, ToolCall, ToolSpec
from agentenv_local.testing.fake_models import Reply, RuleResponder

SEARCH = ToolSpec(name="search", description="Search the docs.",
                  input_schema={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]})
CLOCK = ToolSpec(name="get_time", description="The time.", input_schema={"type": "object", "properties": {}})


def run(coro):
    return asyncio.run(coro)


def test_text_answer(make, server, api):
    server.push(Reply.text("hello there", usage=(12, 3)))
    reply = run(make().complete([Message.system("Be brief."), Message.user("hi")], model="m-1",
                                max_tokens=50, temperature=0.2))
    assert reply.text == "hello there"
    assert reply.stop_reason == "end"
    assert reply.message.role == "assistant" and reply.tool_calls == []
    assert (reply.usage.input_tokens, reply.usage.output_tokens, reply.usage.total) == (12, 3, 15)
    assert reply.model == "m-1" and reply.latency_s > 0
    [req] = server.requests
    assert req.api == api and req.valid and req.status == 200
    body = req.body
    if api == "openai":
        assert req.path == "/v1/chat/completions"
        assert req.headers["authorization"] == "Bearer " + server.api_key
        assert body["messages"][0] == {"role": "system", "content": "Be brief."}
        assert body["max_tokens"] == 50 and body["temperature"] == 0.2
    else:
        assert req.path == "/v1/messages"
        assert req.headers["x-api-key"] == server.api_key
        assert req.headers["anthropic-version"] == "2023-06-01"
        assert body["system"] == "Be brief."
        assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
        assert body["max_tokens"] == 50


def test_anthropic_max_tokens_defaults_to_4096(server):
    from agentenv_local.models import AnthropicMessagesProvider

    run(AnthropicMessagesProvider(server.base_url, api_key=server.api_key).complete([Message.user("hi")], model="c"))
    assert server.requests[0].body["max_tokens"] == 4096


def test_tool_call_round_trip(make, server, api):
    server.push(Reply.tool_call("search", {"q": "clock"}), Reply.text("It is noon."))
    provider = make()
    convo = [Message.system("Use tools."), Message.user("What time is it?")]
    first = run(provider.complete(convo, tools=[SEARCH, CLOCK], model="m"))
    assert first.stop_reason == "tool_calls"
    [call] = first.tool_calls
    assert call.name == "search" and call.arguments == {"q": "clock"} and call.id
    convo += [first.message, Message.tool_result(call.id, "noon", name="search")]
    final = run(provider.complete(convo, tools=[SEARCH, CLOCK], model="m"))
    assert (final.stop_reason, final.text) == ("end", "It is noon.")
    assert [r.status for r in server.requests] == [200, 200]
    second = server.requests[1]
    assert second.tool_results == [{"tool_call_id": call.id, "content": "noon", "is_error": False}]
    if api == "openai":
        tools = second.body["tools"]
        assert tools[0] == {"type": "function", "function": {"name": "search", "description": "Search the docs.",
                                                             "parameters": SEARCH.input_schema}}
        assistant = second.body["messages"][2]
        assert assistant["tool_calls"][0]["function"] == {"name": "search", "arguments": json.dumps({"q": "clock"})}
        assert second.body["messages"][3] == {"role": "tool", "tool_call_id": call.id, "content": "noon"}
    else:
        assert second.body["tools"][0] == {"name": "search", "description": "Search the docs.",
                                           "input_schema": SEARCH.input_schema}
        assistant = second.body["messages"][1]
        assert assistant["content"] == [{"type": "tool_use", "id": call.id, "name": "search",
                                         "input": {"q": "clock"}}]
        assert second.body["messages"][2]["content"] == [{"type": "tool_result", "tool_use_id": call.id,
                                                           "content": "noon"}]


def test_parallel_tool_calls_and_error_results(make, server, api):
    server.push(Reply.calls([("search", {"q": "a"}), ("get_time", {})], text="Let me look."), Reply.text("ok"))
    provider = make()
    convo = [Message.user("go")]
    first = run(provider.complete(convo, tools=[SEARCH, CLOCK], model="m"))
    assert first.text == "Let me look."
    assert [c.name for c in first.tool_calls] == ["search", "get_time"]
    convo += [first.message,
              Message.tool_result(first.tool_calls[0].id, "found"),
              Message.tool_result(first.tool_calls[1].id, "clock is down", is_error=True),
              Message.user("and then?")]
    assert run(provider.complete(convo, tools=[SEARCH, CLOCK], model="m")).text == "ok"
    results = server.requests[1].tool_results
    if api == "anthropic":
        assert [r["is_error"] for r in results] == [False, True]
        # tool results and the user's text share one user turn, results first
        assert [b["type"] for b in server.requests[1].body["messages"][-1]["content"]] == \
            ["tool_result", "tool_result", "text"]
    else:
        assert results[1]["content"] == "Error: clock is down"


def test_unknown_tool_is_returned_and_can_be_answered_with_an_error(make, server, api):
    """A call to a tool that was not offered comes back as-is; the agent answers it with an error result."""
    server.push(Reply.tool_call("delete_everything", {"really": True}), Reply.text("sorry"))
    provider = make()
    convo = [Message.user("go")]
    first = run(provider.complete(convo, tools=[SEARCH], model="m"))
    [call] = first.tool_calls
    assert call.name == "delete_everything" and call.name not in {"search"}
    convo += [first.message, Message.tool_result(call.id, f"unknown tool {call.name!r}", is_error=True)]
    assert run(provider.complete(convo, tools=[SEARCH], model="m")).text == "sorry"
    assert server.requests[1].valid


def test_malformed_tool_arguments_is_a_model_error_naming_the_tool(make, server, api):
    server.push(Reply.malformed_tool_call("search", '{"q": "unterminated'))
    with pytest.raises(ModelError) as info:
        run(make().complete([Message.user("go")], tools=[SEARCH], model="m"))
    err = info.value
    assert err.kind == "tool_arguments" and err.tool_name == "search"
    assert "'search'" in err.message
    assert len(server.requests) == 1  # not retried: the model answered, badly


def test_tool_arguments_that_are_not_an_object(make, server, api):
    server.push(Reply.tool_call("search", "[1, 2]"))
    with pytest.raises(ModelError, match="not an object|not a JSON object"):
        run(make().complete([Message.user("go")], tools=[SEARCH], model="m"))


def test_structured_output(make, server, api):
    schema = {"type": "object", "properties": {"score": {"type": "integer"}, "why": {"type": "string"}},
              "required": ["score", "why"]}
    server.push(Reply.structured({"score": 3, "why": "good"}))
    reply = run(make().complete([Message.user("grade it")], model="judge", response_format=schema))
    assert reply.stop_reason == "end" and reply.tool_calls == []
    assert reply.json_output() == {"score": 3, "why": "good"}
    body = server.requests[0].body
    if api == "openai":
        assert body["response_format"] == {"type": "json_schema", "json_schema": {"name": "response", "schema": schema}}
    else:
        assert body["tool_choice"] == {"type": "tool", "name": "structured_output"}
        assert body["tools"][-1]["input_schema"] == schema


def test_structured_output_from_the_default_responder(make, server):
    schema = {"type": "object", "properties": {"verdict": {"enum": ["pass", "fail"]}}, "required": ["verdict"]}
    reply = run(make().complete([Message.user("grade")], model="j", response_format=schema))
    assert reply.json_output() == {"verdict": "pass"}


def test_structured_output_with_tools(make, server, api):
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    server.responder = RuleResponder(arguments={"search": {"q": "x"}})
    provider = make()
    convo = [Message.user("find and answer")]
    first = run(provider.complete(convo, tools=[SEARCH], model="m", response_format=schema))
    assert first.tool_calls[0].arguments == {"q": "x"}
    convo += [first.message, Message.tool_result(first.tool_calls[0].id, "42")]
    final = run(provider.complete(convo, tools=[SEARCH], model="m", response_format=schema))
    assert final.stop_reason == "end" and final.json_output() == {"answer": "example"}


def test_json_output_of_plain_text_is_a_model_error(make, server):
    server.push(Reply.text("not json"))
    reply = run(make().complete([Message.user("x")], model="m"))
    with pytest.raises(ModelError, match="not JSON"):
        reply.json_output()


def test_length_stop_reason(make, server):
    server.push(Reply.text("cut o", stop="length"))
    assert run(make().complete([Message.user("x")], model="m", max_tokens=2)).stop_reason == "length"


def test_default_responder_calls_the_first_tool_then_answers(make, server):
    server.responder = RuleResponder(arguments={"search": {"q": "from mapping"}}, text="all done")
    provider = make()
    convo = [Message.user("go")]
    first = run(provider.complete(convo, tools=[SEARCH, CLOCK], model="m"))
    assert first.tool_calls[0].arguments == {"q": "from mapping"}
    convo += [first.message, Message.tool_result(first.tool_calls[0].id, "r")]
    assert run(provider.complete(convo, tools=[SEARCH, CLOCK], model="m")).text == "all done"


def test_messages_accept_plain_dicts(make, server):
    reply = run(make().complete([{"role": "user", "content": "hi"}],
                                tools=[{"name": "search", "input_schema": {"type": "object"}}], model="m"))
    assert reply.tool_calls


def test_a_body_of_the_wrong_api_is_a_protocol_error(make, server, api):
    server.push(Reply.raw_body({"unexpected": True}))
    with pytest.raises(ModelError) as info:
        run(make().complete([Message.user("x")], model="m"))
    assert info.value.kind == "protocol"


def test_a_non_json_body_is_a_protocol_error(make, server):
    server.push(Reply.raw_body(b"<html>proxy page</html>"))
    with pytest.raises(ModelError, match="not JSON") as info:
        run(make().complete([Message.user("x")], model="m"))
    assert info.value.kind == "protocol"


def test_message_shape_is_checked():
    with pytest.raises(ValueError):
        Message(role="tool", content="x")  # no tool_call_id
    with pytest.raises(ValueError):
        Message(role="user", content="x", tool_calls=[ToolCall(id="1", name="a")])
    with pytest.raises(ValueError):
        ToolSpec(name="bad name!", input_schema={"type": "object"})
    with pytest.raises(ValueError):
        ToolSpec(name="ok", input_schema={"type": "string"})


def test_duplicate_tool_names_are_refused_before_sending(make, server):
    with pytest.raises(ModelError, match="offered twice"):
        run(make().complete([Message.user("x")], tools=[SEARCH, SEARCH], model="m"))
    assert server.requests == []
