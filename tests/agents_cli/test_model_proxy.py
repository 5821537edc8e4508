"""The coding-CLI agents' model proxy (agentenv_local.agents.cli_agents.model_proxy) over real HTTP: it forwards
only with the agent's token, puts the real key where the client put the token (x-api-key, Authorization: Bearer,
x-goog-api-key, ?key=) plus the extra headers, keeps method, path, query and body, streams an SSE answer through
as it arrives, and stands behind the HTTP guard."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agentenv_local.agents.cli_agents.model_proxy import ModelProxy
from agentenv_local.testing.fake_models import FakeModelServer

KEY = "sk-real-upstream-key"


@pytest.fixture
def proxy() -> Iterator[ModelProxy]:
    made = ModelProxy()
    yield made
    made.close()


def anthropic_body() -> dict[str, Any]:
    return {"model": "claude-sonnet-4-5", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}


def test_the_token_is_swapped_for_the_key_in_each_place_a_client_sends_it(proxy: ModelProxy) -> None:
    with FakeModelServer(api_key=KEY) as server:
        url, token = proxy.route(server.root_url, KEY, {"x-litellm-tag": "run-1"})
        assert KEY not in url and KEY not in token
        anthropic = httpx.post(f"{url}/v1/messages", json=anthropic_body(),
                               headers={"x-api-key": token, "anthropic-version": "2023-06-01"})
        openai = httpx.post(f"{url}/v1/chat/completions", headers={"authorization": f"Bearer {token}"},
                            json={"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]})
        gemini_body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
        by_header = httpx.post(f"{url}/v1beta/models/fake-model:generateContent", json=gemini_body,
                               headers={"x-goog-api-key": token})
        by_query = httpx.post(f"{url}/v1beta/models/fake-model:generateContent?key={token}&x=1", json=gemini_body)
        assert [r.status_code for r in (anthropic, openai, by_header, by_query)] == [200, 200, 200, 200], \
            [r.text for r in (anthropic, openai, by_header, by_query)]
        seen = server.requests
    assert [(r.method, r.path) for r in seen] == [
        ("POST", "/v1/messages"), ("POST", "/v1/chat/completions"),
        ("POST", "/v1beta/models/fake-model:generateContent"), ("POST", "/v1beta/models/fake-model:generateContent")]
    assert seen[0].headers["x-api-key"] == KEY and seen[0].body == anthropic_body()
    assert seen[1].headers["authorization"] == f"Bearer {KEY}"
    assert seen[2].headers["x-goog-api-key"] == KEY
    assert sorted(seen[3].query.split("&")) == sorted([f"key={KEY}", "x=1"])
    assert all(r.headers["x-litellm-tag"] == "run-1" for r in seen)  # [model.headers] on every call
    assert not any(token in str(r.headers) + r.query for r in seen)  # the token goes no further


def test_without_the_token_nothing_is_forwarded(proxy: ModelProxy) -> None:
    with FakeModelServer(api_key=KEY) as server:
        url, token = proxy.route(server.root_url, KEY)
        answers = [httpx.post(f"{url}/v1/messages", json=anthropic_body(), headers=headers) for headers in
                   ({}, {"x-api-key": KEY}, {"x-api-key": token + "x"}, {"authorization": f"Basic {token}"})]
        assert [r.status_code for r in answers] == [401] * 4
        assert "token" in answers[0].json()["error"]["message"]
        assert server.requests == []
        # a route of another upstream has its own token; the same upstream keeps its token
        other_url, other = proxy.route("http://127.0.0.1:9/v1", "sk-other")
        assert other != token and other_url.endswith("/v1") and proxy.route(server.root_url, KEY)[1] == token


def test_the_guard_stands_in_front(proxy: ModelProxy) -> None:
    with FakeModelServer(api_key=KEY) as server:
        url, token = proxy.route(server.root_url, KEY)
        rebound = httpx.post(f"{url}/v1/messages", json=anthropic_body(), headers={"x-api-key": token,
                                                                                  "host": "evil.example"})
        from_page = httpx.post(f"{url}/v1/messages", json=anthropic_body(),
                               headers={"x-api-key": token, "origin": "https://evil.example"})
        huge = httpx.post(f"{url}/v1/messages", content=b"x" * (5 * 1024 * 1024),
                          headers={"x-api-key": token, "content-type": "application/json"})
        assert (rebound.status_code, from_page.status_code, huge.status_code) == (421, 403, 413)
        assert server.requests == []


def test_a_keyless_endpoint_gets_no_key_and_a_dead_one_is_a_502(proxy: ModelProxy) -> None:
    with FakeModelServer(api_key=None) as server:
        url, token = proxy.route(server.base_url, None)
        answer = httpx.post(f"{url}/chat/completions", headers={"authorization": f"Bearer {token}"},
                            json={"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]})
        assert answer.status_code == 200, answer.text
        assert "authorization" not in server.requests[0].headers
    dead_url, dead_token = proxy.route(server.base_url, None)  # the server is gone now
    dead = httpx.post(f"{dead_url}/chat/completions", headers={"authorization": f"Bearer {dead_token}"}, json={})
    assert dead.status_code == 502 and "could not be reached" in dead.json()["error"]["message"]


class _SlowStream:
    """An upstream answering SSE: one event, then (once the test read it through the proxy, or after a bound) the
    last one. `released_before_end` says whether the client had the first event before the stream ended."""

    def __init__(self) -> None:
        self.client_has_first = threading.Event()
        self.released_before_end: bool | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        import asyncio

        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": b"event: one\ndata: {}\n\n", "more_body": True})
        self.released_before_end = await asyncio.to_thread(self.client_has_first.wait, 20)
        await send({"type": "http.response.body", "body": b"event: two\ndata: {}\n\n", "more_body": False})


def test_an_sse_answer_flows_through_as_it_arrives(proxy: ModelProxy) -> None:
    import uvicorn

    from agentenv_local.env.serve import bind_socket

    upstream = _SlowStream()
    sock = bind_socket("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(upstream, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=lambda: server.run(sockets=[sock]), daemon=True)
    thread.start()
    try:
        while not server.started:
            thread.join(0.05)
        url, token = proxy.route(f"http://127.0.0.1:{sock.getsockname()[1]}", KEY)
        with httpx.stream("POST", f"{url}/v1/messages", headers={"x-api-key": token}, json={}) as answer:
            chunks = answer.iter_raw()
            first = next(chunks)
            upstream.client_has_first.set()
            rest = b"".join(chunks)
        assert first.startswith(b"event: one") and b"event: two" in first + rest
        assert upstream.released_before_end is True  # the first event came through before the stream ended
    finally:
        server.should_exit = True
        thread.join(10)


def test_the_envs_extra_headers_reach_the_route_and_a_bad_value_is_one_clear_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from agentenv_local.agents.cli_agents.claude_code import ClaudeCodeAgent
    from agentenv_local.agents.cli_agents.harness import CliAgentError

    agent = ClaudeCodeAgent()
    from_env = agent.config_model.model_validate({"model": "m"})
    from_config = agent.config_model.model_validate({"model": "m", "base_url": "http://127.0.0.1:9"})
    monkeypatch.setenv("LITELLM_EXTRA_HEADERS", '{"x-litellm-tag": "run-1"}')
    assert agent.model_headers(from_env) == {"x-litellm-tag": "run-1"}
    assert agent.model_headers(from_config) == {}  # the env's headers go to the env's endpoint only
    monkeypatch.setenv("LITELLM_EXTRA_HEADERS", '["not", "an object"]')
    with pytest.raises(CliAgentError) as failed:
        agent.model_headers(from_env)
    assert failed.value.code == "claude-code.bad_model_headers" and "JSON object" in failed.value.message
