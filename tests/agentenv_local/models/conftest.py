"""Model provider tests: both APIs against the fake server over real HTTP, with tiny backoffs."""

from __future__ import annotations

import pytest

from agentenv_local.models import AnthropicMessagesProvider, OpenAIChatProvider
from agentenv_local.testing.fake_models import FakeModelServer, RuleResponder

KEY = "sk-test-9f8e7d6c5b4a-SECRET"
APIS = {"openai": OpenAIChatProvider, "anthropic": AnthropicMessagesProvider}


@pytest.fixture(scope="module")
def _shared_server():
    with FakeModelServer(api_key=KEY) as srv:
        yield srv


@pytest.fixture
def server(_shared_server):
    """The module's fake server, reset: no requests, empty script, default responder, key KEY."""
    srv = _shared_server
    srv.reset()
    srv.api_key = KEY
    srv.responder = RuleResponder()
    srv.echo_key_in_errors = False
    return srv


@pytest.fixture(params=sorted(APIS))
def api(request):
    return request.param


@pytest.fixture
def make(server, api):
    """make(**options) -> a provider of the parametrized API pointed at the fake server."""

    def build(**options):
        options.setdefault("api_key", KEY)
        options.setdefault("backoff_s", 0.01)
        options.setdefault("max_backoff_s", 0.05)
        options.setdefault("timeout_s", 10)
        return APIS[api](options.pop("base_url", server.base_url), **options)

    return build
