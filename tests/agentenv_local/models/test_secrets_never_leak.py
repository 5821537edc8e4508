"""The API key never shows: not in str/repr of errors, not in logs, not in reprs or results."""

from __future__ import annotations

import asyncio
import logging

import pytest

from agentenv_local.env.serve import bind_socket
from agentenv_local.models import Message, ModelError, ToolSpec
from agentenv_local.testing.fake_models import Reply

SECRET = "sk-live-NEVER-SHOW-THIS-8c1d2e"
HEADER_SECRET = "hdr-value-NEVER-SHOW-77aa"
USERINFO_PW = "pw-NEVER-SHOW-5150"
SEARCH = ToolSpec(name="search", input_schema={"type": "object", "properties": {"q": {"type": "string"}}})


def _assert_clean(text: str) -> None:
    for secret in (SECRET, HEADER_SECRET, USERINFO_PW):
        assert secret not in text


def _error_text(exc: BaseException) -> str:
    parts = [str(exc), repr(exc), repr(exc.args)]
    if isinstance(exc, ModelError):
        parts += [exc.render(), str(exc.to_wire()), str(exc.endpoint), str(exc.provider_message), str(exc.hint)]
    ctx = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    if ctx is not None:
        parts.append(_error_text(ctx))
    return "\n".join(parts)


def _scenarios(server_url: str, refused_url: str):
    # (name, script, provider options, call options)
    return [
        ("500 echoing the key", [Reply.error(500, f"crash near {SECRET} and {HEADER_SECRET}")] * 3, {}, {}),
        ("429 echoing the key", [Reply.error(429, f"rate limited for key {SECRET}", retry_after="0")] * 3, {}, {}),
        ("400", [Reply.error(400, f"bad request from {SECRET}")], {}, {}),
        ("401 wrong key echoed", [], {"api_key": SECRET + "-wrong"}, {}),
        ("timeout", [Reply.delay(5)], {}, {"timeout": 0.2}),
        ("malformed tool args", [Reply.malformed_tool_call("search", '{"q": ')], {}, {"tools": [SEARCH]}),
        ("protocol", [Reply.raw_body({"nothing": SECRET})], {}, {}),
        ("non-json", [Reply.raw_body(f"<html>{SECRET}</html>".encode())], {}, {}),
        ("connection refused", [], {"base_url": refused_url}, {}),
        ("userinfo in base_url refused", [], {"base_url": refused_url.replace("://", f"://me:{USERINFO_PW}@")}, {}),
    ]


def test_no_error_path_leaks_the_key(make, server, caplog):
    server.echo_key_in_errors = True
    sock = bind_socket("127.0.0.1", 0)
    refused = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    sock.close()
    caplog.set_level(logging.DEBUG)  # every logger, httpx2's request lines included
    seen = 0
    for name, script, options, call_options in _scenarios(server.base_url, refused):
        server.reset(script)
        options = {"max_retries": 2, "headers": {"X-Custom-Auth": HEADER_SECRET}, **options}
        if options.get("api_key", "").endswith("-wrong"):
            server.api_key, wrong = SECRET, True
        else:
            server.api_key, wrong = SECRET, False
        provider = make(api_key=options.pop("api_key", SECRET), **options)
        _assert_clean(repr(provider))
        _assert_clean(str(provider))
        with pytest.raises(ModelError) as info:
            asyncio.run(provider.complete([Message.user("hi")], model="m", **call_options))
        text = _error_text(info.value)
        _assert_clean(text)
        if wrong:
            assert "***" in text  # the server echoed the key; we masked it
        seen += 1
    assert seen == 10
    log_text = "\n".join(r.getMessage() for r in caplog.records) + caplog.text
    assert "retrying" in log_text
    _assert_clean(log_text)


def test_successful_results_hold_no_key(make, server):
    server.api_key = SECRET
    server.push(Reply.tool_call("search", {"q": "x"}))
    reply = asyncio.run(make(api_key=SECRET, headers={"X-Custom-Auth": HEADER_SECRET}).complete(
        [Message.user("hi")], tools=[SEARCH], model="m"))
    _assert_clean(reply.model_dump_json())
    _assert_clean(repr(reply))


def test_userinfo_is_sent_as_basic_auth_and_never_shown(server, api):
    from agentenv_local.models import make_provider

    server.api_key = None
    url = server.base_url.replace("://", f"://me:{USERINFO_PW}@")
    provider = make_provider(api, url)
    assert provider.base_url == server.base_url.removesuffix("/v1" if api == "anthropic" else "")
    _assert_clean(repr(provider))
    asyncio.run(provider.complete([Message.user("hi")], model="m"))
    assert server.requests[0].headers["authorization"].startswith("Basic ")


def test_endpoint_repr_masks_the_key(tmp_path):
    from agentenv_local.config import load_config
    from agentenv_local.models import resolve_endpoint

    cfg = load_config(tmp_path, overrides={"model.base_url": "http://127.0.0.1:1/v1", "model.default": "m",
                                           "model.api_key": "secret:K"}, environ={"K": SECRET})
    endpoint = resolve_endpoint(cfg, "agent")
    assert endpoint.api_key == SECRET
    _assert_clean(repr(endpoint))
    _assert_clean(str(endpoint))
    _assert_clean(repr(endpoint.provider()))
