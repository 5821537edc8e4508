"""Retries, backoff, Retry-After, timeouts and unreachable endpoints: always a ModelError, never a hang."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest

from agentenv_local.env.serve import bind_socket
from agentenv_local.errors import AgentenvError
from agentenv_local.models import Message, ModelError
from agentenv_local.testing.fake_models import Reply

HI = [Message.user("hi")]


def call(provider, **kw):
    return asyncio.run(provider.complete(HI, model="m", **kw))


def test_retries_5xx_then_succeeds(make, server):
    server.push(Reply.error(500, "boom"), Reply.error(503, "busy"), Reply.text("finally"))
    assert call(make()).text == "finally"
    assert [r.status for r in server.requests] == [500, 503, 200]


def test_gives_up_after_max_retries(make, server, api):
    server.push(*[Reply.error(502, "upstream exploded")] * 5)
    with pytest.raises(ModelError) as info:
        call(make(max_retries=2))
    err = info.value
    assert isinstance(err, AgentenvError)
    assert len(server.requests) == 3 and err.attempts == 3
    assert err.status == 502 and err.kind == "http"
    assert "upstream exploded" in err.message and "after 3 attempts" in err.message
    assert err.endpoint == server.base_url.removesuffix("/v1" if api == "anthropic" else "") + (
        "/chat/completions" if api == "openai" else "/v1/messages")
    assert err.endpoint in err.message
    assert err.hint and "logs" in err.hint


def test_max_retries_zero_sends_once(make, server):
    server.push(Reply.error(500), Reply.text("never"))
    with pytest.raises(ModelError):
        call(make(max_retries=0))
    assert len(server.requests) == 1


def retry_delays(caplog: pytest.LogCaptureFixture) -> list[float]:
    """The waits the provider announced (and then slept) before each retry, in order."""
    return [cast(tuple, r.args)[1] for r in caplog.records if "retrying" in r.getMessage()]  # the log's %-args


def test_429_honours_retry_after(make, server, caplog):
    server.push(Reply.error(429, "slow down", retry_after="0.6"), Reply.text("ok"))
    with caplog.at_level("WARNING", logger="agentenv_local.models"):
        assert call(make(backoff_s=0.001)).text == "ok"
    assert retry_delays(caplog) == [0.6]  # the endpoint's Retry-After, not the 0.001 s backoff
    assert [r.status for r in server.requests] == [429, 200]


def test_429_with_a_retry_after_too_long_gives_up_at_once(make, server, caplog):
    server.push(Reply.error(429, "quota", retry_after="3600"), Reply.text("never"))
    with caplog.at_level("WARNING", logger="agentenv_local.models"), \
            pytest.raises(ModelError, match="3600 s") as info:
        call(make())
    assert retry_delays(caplog) == []  # no wait at all
    assert info.value.status == 429 and "rate limiting" in info.value.hint
    assert len(server.requests) == 1


def test_429_default_backoff_when_no_retry_after(make, server):
    server.push(Reply.error(429, "slow"), Reply.error(429, "slow"), Reply.text("ok"))
    assert call(make()).text == "ok"
    assert len(server.requests) == 3


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_client_errors_are_not_retried(make, server, status):
    server.push(Reply.error(status, "nope"), Reply.text("never"))
    with pytest.raises(ModelError) as info:
        call(make())
    assert info.value.status == status and len(server.requests) == 1
    assert "nope" in info.value.message


def test_404_hint_mentions_the_base_url(make, server, api):
    server.push(Reply.error(404, "model 'm' not found"))
    with pytest.raises(ModelError) as info:
        call(make())
    assert "base_url" in info.value.hint and "'m'" in info.value.hint


def test_wrong_key_is_401_with_a_key_hint(make, server):
    with pytest.raises(ModelError) as info:
        call(make(api_key="sk-wrong-key-0000"))
    assert info.value.status == 401 and "API key" in info.value.hint
    assert len(server.requests) == 1


def test_timeout_is_a_model_error_not_a_hang(make, server):
    server.push(Reply.delay(5, Reply.text("late")))
    with pytest.raises(ModelError) as info:  # not the "late" answer: the call gave up before it came
        call(make(), timeout=0.3)
    err = info.value
    assert err.kind == "timeout" and "0.3 s" in err.message and "timeout_s" in err.hint
    assert len(server.requests) == 1  # a timed-out attempt is not repeated


def test_provider_timeout_default_applies(make, server):
    server.push(Reply.delay(5))
    with pytest.raises(ModelError, match="no answer within 0.25 s"):
        call(make(timeout_s=0.25))


def test_connection_refused_fails_fast_after_retries(make, caplog):
    sock = bind_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    provider = make(base_url=f"http://127.0.0.1:{port}/v1", max_retries=2)
    with caplog.at_level("WARNING", logger="agentenv_local.models"), pytest.raises(ModelError) as info:
        call(provider)
    assert len(retry_delays(caplog)) == 2 and all(d <= 0.05 for d in retry_delays(caplog))  # backoff, capped
    err = info.value
    assert err.kind == "connection" and err.status is None and err.attempts == 3
    assert f"127.0.0.1:{port}" in err.message and "is the model server running" in err.hint
    assert "after 3 attempts" in err.message
    assert len([r for r in caplog.records if "retrying" in r.getMessage()]) == 2


def test_model_error_wire_form(make, server):
    server.push(Reply.error(400, "bad"))
    with pytest.raises(ModelError) as info:
        call(make())
    wire = info.value.to_wire()
    assert wire["type"] == "ModelError" and wire["status"] == 400 and wire["hint"]
