"""The fake server checks requests the way the real APIs do, records them, and follows its script."""

from __future__ import annotations

import json

import httpx2
import pytest

from agentenv_local.testing.fake_models import (
    FakeModelServer,
    RecordedRequest,
    Reply,
    example_from_schema,
    validate_anthropic,
    validate_openai,
)

KEY = "fake-key-123456"
TOOL_OA = {"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}
TOOL_AN = {"name": "search", "input_schema": {"type": "object"}}


def post(srv, path, body, headers=None):
    return httpx2.post(srv.root_url + path, content=json.dumps(body), headers=headers or {}, timeout=10)


OA = {"authorization": f"Bearer {KEY}", "content-type": "application/json"}
AN = {"x-api-key": KEY, "anthropic-version": "2023-06-01", "content-type": "application/json"}


@pytest.fixture
def srv():
    with FakeModelServer(api_key=KEY, script=[]) as s:
        yield s


def test_openai_auth_and_error_shape(srv):
    r = post(srv, "/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    r = post(srv, "/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
             {"authorization": "Bearer nope"})
    assert r.status_code == 401 and "nope" not in r.text  # not echoed unless asked
    r = post(srv, "/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}]}, OA)
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "done"
    assert [q.status for q in srv.requests] == [401, 401, 200]


def test_anthropic_auth_version_and_error_shape(srv):
    body = {"model": "c", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    r = post(srv, "/v1/messages", body, {"anthropic-version": "2023-06-01"})
    assert r.status_code == 401 and r.json() == {"type": "error", "error": {"type": "authentication_error",
                                                                           "message": "x-api-key header is required"}}
    r = post(srv, "/v1/messages", body, {"x-api-key": KEY})
    assert r.status_code == 400 and "anthropic-version" in r.json()["error"]["message"]
    r = post(srv, "/v1/messages", body, AN)
    assert r.status_code == 200 and r.json()["content"] == [{"type": "text", "text": "done"}]
    assert r.json()["stop_reason"] == "end_turn"


def test_invalid_requests_do_not_consume_the_script(srv):
    srv.push(Reply.text("scripted"))
    r = post(srv, "/v1/messages", {"model": "c", "messages": [{"role": "user", "content": "hi"}]}, AN)
    assert r.status_code == 400 and "max_tokens: Field required" in r.text
    assert srv.remaining == 1
    r = post(srv, "/v1/messages", {"model": "c", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}, AN)
    assert r.json()["content"][0]["text"] == "scripted" and srv.remaining == 0
    assert [q.valid for q in srv.requests] == [False, True]


def test_unknown_path_and_method(srv):
    assert post(srv, "/v1/completions", {}, OA).status_code == 404
    assert httpx2.get(srv.root_url + "/v1/messages", headers=AN).status_code == 405


def _oa(messages, **extra):
    return {"model": "m", "messages": messages, **extra}


@pytest.mark.parametrize("body, expected", [
    (_oa([]), "messages: a non-empty list"),
    ({"messages": [{"role": "user", "content": "x"}]}, "model:"),
    (_oa([{"role": "user", "content": "x"}], frobnicate=1), "Unrecognized request argument supplied: frobnicate"),
    (_oa([{"role": "robot", "content": "x"}]), "role must be one of"),
    (_oa([{"role": "user", "content": "x", "is_error": True}]), "is_error was unexpected"),
    (_oa([{"role": "assistant", "content": None}]), "needs content or tool_calls"),
    (_oa([{"role": "user", "content": "x"},
          {"role": "assistant", "content": None,
           "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "s", "arguments": {}}}]},
          {"role": "tool", "tool_call_id": "c1", "content": "r"}]), "arguments: must be a string"),
    (_oa([{"role": "user", "content": "x"},
          {"role": "assistant", "content": None,
           "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "s", "arguments": "{}"}}]},
          {"role": "user", "content": "y"}]), "Missing: c1"),
    (_oa([{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "zz", "content": "r"}]),
     "must be a response to a preceding message with 'tool_calls'"),
    (_oa([{"role": "user", "content": "x"}], tools=[{"type": "function", "function": {"name": "bad name"}}]),
     "function.name: must match"),
    (_oa([{"role": "user", "content": "x"}],
         tools=[{"type": "function", "function": {"name": "s", "parameters": {"type": "array"}}}]),
     "\"type\": \"object\""),
    (_oa([{"role": "user", "content": "x"}], tools=[TOOL_OA, TOOL_OA]), "names must be unique"),
    (_oa([{"role": "user", "content": "x"}], temperature=3), "temperature"),
    (_oa([{"role": "user", "content": "x"}], max_tokens=0), "max_tokens"),
    (_oa([{"role": "user", "content": "x"}], response_format={"type": "json_schema", "json_schema": {"name": "r"}}),
     "json_schema.schema"),
    (_oa([{"role": "user", "content": "x"}], tool_choice="required"), "only allowed when tools"),
])
def test_openai_validation(body, expected):
    problems = validate_openai(body)
    assert any(expected in p for p in problems), problems


def test_openai_valid_round_trip_passes():
    body = _oa([{"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "x"}]},
                {"role": "assistant", "content": None,
                 "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "r"}],
               tools=[TOOL_OA], tool_choice="auto", temperature=0.5, max_tokens=10,
               response_format={"type": "json_schema", "json_schema": {"name": "r", "schema": {"type": "object"}}})
    assert validate_openai(body) == []


def _an(messages, **extra):
    return {"model": "c", "max_tokens": 10, "messages": messages, **extra}


USE = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "search", "input": {}}]}


@pytest.mark.parametrize("body, expected", [
    ({"model": "c", "messages": [{"role": "user", "content": "x"}]}, "max_tokens: Field required"),
    (_an([{"role": "system", "content": "s"}, {"role": "user", "content": "x"}]), 'Unexpected role "system"'),
    (_an([{"role": "assistant", "content": "x"}]), "first message must use the \"user\" role"),
    (_an([{"role": "user", "content": ""}]), "non-empty content"),
    (_an([{"role": "user", "content": [{"type": "text", "text": ""}]}]), "must be non-empty"),
    (_an([{"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "s", "input": {}}]}]),
     "only allowed in assistant"),
    (_an([{"role": "user", "content": "x"}, USE, {"role": "user", "content": "no result"}]),
     "`tool_use` ids were found without `tool_result` blocks immediately after: t1"),
    (_an([{"role": "user", "content": "x"}, USE,
          {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "other", "content": "r"}]}]),
     "unexpected `tool_use_id` found in `tool_result` blocks: other"),
    (_an([{"role": "user", "content": "x"}, USE,
          {"role": "user", "content": [{"type": "text", "text": "first"},
                                       {"type": "tool_result", "tool_use_id": "t1", "content": "r"}]}]),
     "must come before any other content"),
    (_an([{"role": "user", "content": "x"}, USE]), "without a following user message"),
    (_an([{"role": "user", "content": "x"}], tools=[{"name": "s"}]), "input_schema: Field required"),
    (_an([{"role": "user", "content": "x"}], tools=[{"name": "s", "input_schema": {"type": "string"}}]),
     "\"type\": \"object\""),
    (_an([{"role": "user", "content": "x"}],
         tools=[{"name": "s", "parameters": {}, "input_schema": {"type": "object"}}]),
     "parameters: Extra inputs are not permitted"),
    (_an([{"role": "user", "content": "x"}], tool_choice={"type": "tool", "name": "nope"}, tools=[TOOL_AN]),
     "is not one of the offered tools"),
    (_an([{"role": "user", "content": "x"}], temperature=1.5), "temperature"),
    (_an([{"role": "user", "content": "x"}], response_format={}), "response_format: Extra inputs"),
    (_an([{"role": "user", "content": "x"}], system=[{"type": "text", "text": ""}]), "system:"),
])
def test_anthropic_validation(body, expected):
    problems = validate_anthropic(body, {"anthropic-version": "2023-06-01"})
    assert any(expected in p for p in problems), problems


def test_anthropic_valid_round_trip_passes():
    body = _an([{"role": "user", "content": "x"}, USE,
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "r",
                                              "is_error": True}, {"type": "text", "text": "go on"}]}],
               system="s", tools=[TOOL_AN], tool_choice={"type": "auto"}, temperature=1)
    assert validate_anthropic(body, {"anthropic-version": "2023-06-01"}) == []


def test_callable_script_items_see_the_request(srv):
    seen: list[RecordedRequest] = []

    def answer(req: RecordedRequest) -> Reply:
        seen.append(req)
        # Reply.text is a builder on the class, a field on instances (fake_models.py): mypy sees only the field
        return Reply.text(f"you said {req.last_user_text}")  # type: ignore[operator, misc]

    srv.push(answer)
    r = post(srv, "/v1/chat/completions", _oa([{"role": "user", "content": "ping"}]), OA)
    assert r.json()["choices"][0]["message"]["content"] == "you said ping"
    assert seen[0].model == "m" and seen[0].api == "openai"


def test_error_replies_carry_retry_after(srv):
    srv.push(Reply.error(429, "slow", retry_after=7))
    r = post(srv, "/v1/messages", _an([{"role": "user", "content": "x"}]), AN)
    assert r.status_code == 429 and r.headers["retry-after"] == "7"
    assert r.json()["error"] == {"type": "rate_limit_error", "message": "slow"}


def test_stop_closes_quickly_even_with_a_delayed_reply():
    import threading
    import time

    srv = FakeModelServer(script=[Reply.delay(30)]).start()
    t = threading.Thread(target=lambda: post(srv, "/v1/chat/completions", _oa([{"role": "user", "content": "x"}])),
                         daemon=True)
    t.start()
    while not srv.requests:  # the request is in, its reply waiting
        time.sleep(0.01)
    server_thread = srv._thread
    srv.stop()  # joins the server's thread for at most 5 s: the 30 s wait must end at once for it to be gone
    assert server_thread is not None and not server_thread.is_alive()
    t.join(10)
    assert not t.is_alive()  # the client was let go, not kept for the 30 s


def test_example_from_schema():
    schema = {"type": "object", "properties": {"a": {"type": "integer", "minimum": 2}, "b": {"enum": ["x", "y"]},
                                               "c": {"type": ["null", "string"]}, "d": {"type": "array"}},
              "required": ["a", "b", "c", "d"]}
    assert example_from_schema(schema) == {"a": 2, "b": "x", "c": "example", "d": []}
