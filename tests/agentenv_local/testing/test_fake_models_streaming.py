"""The fake model server's streaming answers (Anthropic SSE events, Chat Completions chunks, the Responses
API's events), its Responses API checks, and the side endpoints the coding CLIs call at start."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from agentenv_local.testing.fake_models import FakeModelServer, Reply
from agentenv_local.testing.wire_responses import validate_responses

KEY = "fake-key-stream-1"
OA = {"authorization": f"Bearer {KEY}", "content-type": "application/json"}
AN = {"x-api-key": KEY, "anthropic-version": "2023-06-01", "content-type": "application/json"}
SHELL_OA: dict[str, Any] = {"type": "function", "function": {"name": "shell", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}
SHELL_RESP: dict[str, Any] = {"type": "function", "name": "shell", "parameters": SHELL_OA["function"]["parameters"]}
SHELL_AN = {"name": "shell", "input_schema": SHELL_OA["function"]["parameters"]}


def sse(response: httpx2.Response) -> list[tuple[str | None, Any]]:
    """(event name, data) pairs of a text/event-stream body; `[DONE]` stays a string."""
    assert response.headers["content-type"].startswith("text/event-stream"), response.text
    out = []
    for block in response.text.split("\n\n"):
        if not block.strip():
            continue
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        data = lines["data"]
        out.append((lines.get("event"), data if data == "[DONE]" else json.loads(data)))
    return out


def post(srv: FakeModelServer, path: str, body: dict, headers: dict) -> httpx2.Response:
    return httpx2.post(srv.root_url + path, content=json.dumps(body), headers=headers, timeout=10)


@pytest.fixture
def srv():
    with FakeModelServer(api_key=KEY) as s:
        yield s


def test_anthropic_stream_has_every_event_and_rebuilds_the_message(srv: FakeModelServer) -> None:
    srv.push(Reply.tool_call("shell", {"command": "echo $((6 * 7))"}, text="Running it.", thinking="6 times 7"))
    body = {"model": "c", "max_tokens": 4096, "stream": True, "thinking": {"type": "enabled", "budget_tokens": 1024},
            "tools": [SHELL_AN], "messages": [{"role": "user", "content": "go"}]}
    events = sse(post(srv, "/v1/messages", body, AN))
    names = [name for name, _ in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    assert all(name == data["type"] for name, data in events)
    blocks: dict[int, dict] = {}
    for name, data in events:
        assert isinstance(data, dict)
        if name == "content_block_start":
            blocks[data["index"]] = {**data["content_block"], "json": ""}
        elif name == "content_block_delta":
            block, delta = blocks[data["index"]], data["delta"]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            elif delta["type"] == "thinking_delta":
                block["thinking"] += delta["thinking"]
            elif delta["type"] == "signature_delta":
                block["signature"] = delta["signature"]
            else:
                assert delta["type"] == "input_json_delta"
                block["json"] += delta["partial_json"]
    kinds = [blocks[i]["type"] for i in sorted(blocks)]
    assert kinds == ["thinking", "text", "tool_use"]
    assert blocks[0]["thinking"] == "6 times 7" and blocks[0]["signature"]
    assert blocks[1]["text"] == "Running it."
    assert json.loads(blocks[2]["json"]) == {"command": "echo $((6 * 7))"} and blocks[2]["name"] == "shell"
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"


def test_anthropic_thinking_only_when_the_request_enables_it(srv: FakeModelServer) -> None:
    srv.push(Reply(text="hi", thinking="hidden"))
    r = post(srv, "/v1/messages", {"model": "c", "max_tokens": 50, "messages": [{"role": "user", "content": "x"}]}, AN)
    assert r.json()["content"] == [{"type": "text", "text": "hi"}]


@pytest.mark.parametrize(("body", "problem"), [
    ({"stream": "yes"}, "stream: Input should be a valid boolean"),
    ({"thinking": {"type": "enabled", "budget_tokens": 10}}, "greater than or equal to 1024"),
    ({"thinking": {"type": "enabled", "budget_tokens": 2048}}, "must be greater than `thinking.budget_tokens`"),
    ({"context_management": {"edits": []}}, "context_management: Extra inputs are not permitted"),
])
def test_anthropic_stream_and_thinking_checks(srv: FakeModelServer, body: dict, problem: str) -> None:
    full = {"model": "c", "max_tokens": 1500, "messages": [{"role": "user", "content": "x"}], **body}
    r = post(srv, "/v1/messages", full, AN)
    assert r.status_code == 400 and problem in r.json()["error"]["message"]
    assert srv.remaining == 0 and srv.requests[-1].problems


def test_anthropic_beta_fields_need_the_beta_header(srv: FakeModelServer) -> None:
    body = {"model": "c", "max_tokens": 50, "context_management": {"edits": []},
            "tools": [{**SHELL_AN, "defer_loading": True}], "messages": [{"role": "user", "content": "x"}]}
    assert post(srv, "/v1/messages", body, AN).status_code == 400
    assert post(srv, "/v1/messages", body, {**AN, "anthropic-beta": "context-management-2025-06-27"}).status_code == 200


def test_anthropic_thinking_blocks_come_back_in_assistant_turns(srv: FakeModelServer) -> None:
    body = {"model": "c", "max_tokens": 50, "messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"},
                                          {"type": "text", "text": "y"}]},
        {"role": "user", "content": [{"type": "thinking", "thinking": "t"}]}]}
    r = post(srv, "/v1/messages", body, AN)
    assert r.status_code == 400
    message = r.json()["error"]["message"]
    assert "messages.2.content.0: thinking blocks are only allowed in assistant messages" in message
    assert "messages.2.content.0.signature: Field required" in message


def test_openai_chat_stream_chunks_tool_call_deltas_usage_and_done(srv: FakeModelServer) -> None:
    srv.push(Reply.tool_call("shell", {"command": "echo $((6 * 7))"}, usage=(11, 7)))
    body = {"model": "g", "stream": True, "stream_options": {"include_usage": True}, "tools": [SHELL_OA],
            "messages": [{"role": "user", "content": "go"}]}
    events = sse(post(srv, "/v1/chat/completions", body, OA))
    assert events[-1] == (None, "[DONE]")
    chunks = [data for _, data in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chunks[-1] == {**chunks[-1], "choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 7,
                                                                   "total_tokens": 18}}
    deltas = [c["choices"][0]["delta"] for c in chunks[:-1]]
    calls = [tc for d in deltas for tc in d.get("tool_calls", [])]
    assert calls[0]["id"] and calls[0]["function"]["name"] == "shell"
    assert json.loads("".join(tc["function"]["arguments"] for tc in calls)) == {"command": "echo $((6 * 7))"}
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"


def test_openai_chat_stream_options_need_stream(srv: FakeModelServer) -> None:
    body = {"model": "g", "stream_options": {"include_usage": True}, "messages": [{"role": "user", "content": "x"}]}
    r = post(srv, "/v1/chat/completions", body, OA)
    assert r.status_code == 400 and "only allowed when 'stream' is enabled" in r.json()["error"]["message"]


def test_responses_api_round_trip_with_a_function_call(srv: FakeModelServer) -> None:
    srv.push(Reply.tool_call("shell", {"command": "echo $((6 * 7))"}))
    body: dict[str, Any] = {"model": "codex", "instructions": "be terse", "tools": [SHELL_RESP], "store": False,
            "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}]}
    first = post(srv, "/v1/responses", body, OA).json()
    assert first["object"] == "response" and first["status"] == "completed"
    call = first["output"][0]
    assert call["type"] == "function_call" and json.loads(call["arguments"]) == {"command": "echo $((6 * 7))"}
    body["input"] += [call, {"type": "function_call_output", "call_id": call["call_id"], "output": "42\n"}]
    second = post(srv, "/v1/responses", body, OA).json()  # the default responder answers text after a result
    assert second["output"][0]["type"] == "message" and second["output"][0]["content"][0]["type"] == "output_text"
    rec = srv.requests[-1]
    assert rec.api == "responses" and rec.tool_names == ["shell"] and rec.system == "be terse"
    assert rec.answered_tools and rec.tool_results == [{"tool_call_id": call["call_id"], "content": "42\n",
                                                        "is_error": False}]


def test_responses_stream_events_in_order(srv: FakeModelServer) -> None:
    srv.push(Reply.tool_call("shell", {"command": "ls"}, text="Listing."))
    body = {"model": "codex", "stream": True, "tools": [SHELL_RESP], "input": "go"}
    events = sse(post(srv, "/v1/responses", body, OA))
    names = [name for name, _ in events]
    assert names[:2] == ["response.created", "response.in_progress"] and names[-1] == "response.completed"
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    assert names.count("response.output_item.added") == names.count("response.output_item.done") == 2
    text = "".join(d["delta"] for n, d in events if n == "response.output_text.delta")
    args = "".join(d["delta"] for n, d in events if n == "response.function_call_arguments.delta")
    assert text == "Listing." and json.loads(args) == {"command": "ls"}
    final = events[-1][1]["response"]
    assert [i["type"] for i in final["output"]] == ["message", "function_call"] and final["usage"]["total_tokens"]


@pytest.mark.parametrize(("body", "problem"), [
    ({"input": "x", "temprature": 1}, "Unknown parameter: 'temprature'."),
    ({"input": []}, "input: a string or a non-empty list"),
    ({"input": [{"type": "function_call_output", "call_id": "call_9", "output": "1"}]},
     "No tool call found for function call output with call_id 'call_9'"),
    ({"input": [{"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"},
                {"type": "message", "role": "user", "content": "again"}]}, "No tool output found for function call c1"),
    ({"input": [{"type": "message", "role": "user", "content": [{"type": "output_text", "text": "x"}]}]},
     "'output_text' is not allowed for role 'user'"),
    ({"input": "x", "tools": [{"type": "function", "name": "bad name"}]}, "tools[0].name: must match"),
    ({"input": "x", "tools": [{"type": "namespace", "name": "ns", "tools": [{"type": "web_search"}]}]},
     "a namespace holds function tools only"),
    ({"input": "x", "reasoning": {"effort": "extreme"}}, "reasoning.effort"),
])
def test_responses_checks(body: dict, problem: str) -> None:
    problems = validate_responses({"model": "codex", **body})
    assert any(problem in p for p in problems), problems


def test_responses_error_shape_and_auth(srv: FakeModelServer) -> None:
    r = post(srv, "/v1/responses", {"model": "codex", "input": "x"}, {"content-type": "application/json"})
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    r = post(srv, "/v1/responses", {"model": "codex", "input": []}, OA)
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    assert srv.remaining == 0


def test_side_endpoints_models_and_count_tokens(srv: FakeModelServer) -> None:
    listing = httpx2.get(srv.root_url + "/v1/models", headers=OA, timeout=10).json()
    assert listing["object"] == "list" and listing["data"][0] == {"id": "fake-model", "object": "model",
                                                                  "created": 1735689600, "owned_by": "fake"}
    anthropic = httpx2.get(srv.root_url + "/v1/models", headers=AN, timeout=10).json()
    assert anthropic["data"][0]["type"] == "model" and anthropic["has_more"] is False
    assert httpx2.get(srv.root_url + "/v1/models/gpt-x", headers=OA, timeout=10).json()["id"] == "gpt-x"
    assert httpx2.get(srv.root_url + "/v1/models", timeout=10).status_code == 401
    body = {"model": "c", "messages": [{"role": "user", "content": "count these words please"}]}
    counted = post(srv, "/v1/messages/count_tokens", body, AN)
    assert counted.status_code == 200 and counted.json()["input_tokens"] > 0
    bad = post(srv, "/v1/messages/count_tokens", {**body, "max_tokens": 5}, AN)
    assert bad.status_code == 400 and "max_tokens: Extra inputs are not permitted" in bad.json()["error"]["message"]
    assert srv.remaining == 0


def test_responses_namespaced_tools_are_called_with_namespace_and_name_apart(srv: FakeModelServer) -> None:
    srv.push(Reply.tool_call("mcp__echo.echo", {"text": "hi"}))
    body = {"model": "codex", "input": "go", "tools": [
        {"type": "namespace", "name": "mcp__echo", "description": "echo server", "tools": [
            {"type": "function", "name": "echo", "parameters": {"type": "object", "properties": {}}}]}]}
    call = post(srv, "/v1/responses", body, OA).json()["output"][0]
    assert (call["namespace"], call["name"]) == ("mcp__echo", "echo")
    assert srv.requests[-1].tool_names == ["mcp__echo.echo"]
    body["input"] = [{"type": "message", "role": "user", "content": "go"}, call,
                     {"type": "function_call_output", "call_id": call["call_id"], "output": "hi"}]
    assert post(srv, "/v1/responses", body, OA).status_code == 200
    assert srv.requests[-1].messages[1]["tool_calls"][0]["name"] == "mcp__echo.echo"


def test_chat_fields_litellm_sends_are_taken(srv: FakeModelServer) -> None:
    # OpenHands (through LiteLLM) sends prompt_cache_key and names the tool in its tool messages
    body = {"model": "g", "prompt_cache_key": "k1", "tools": [SHELL_OA], "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "shell", "content": "42"}]}
    assert post(srv, "/v1/chat/completions", body, OA).status_code == 200
