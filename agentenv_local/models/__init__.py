"""Model providers: talk to an LLM over OpenAI-compatible Chat Completions or the Anthropic Messages API.

    from agentenv_local.models import Message, ToolSpec, resolve_model

    provider, model = resolve_model(config, "judge")          # from [model] / [model.endpoints.judge]
    reply = await provider.complete([Message.system("..."), Message.user("...")], model=model,
                                    tools=[ToolSpec(name="search", input_schema={...})])
    reply.stop_reason, reply.message.tool_calls, reply.usage

Every failure is a `ModelError` (retries with backoff on 429/5xx/connection errors first); API keys
never appear in errors, logs or reprs. `agentenv_local.testing.fake_models.FakeModelServer` speaks both
APIs over real HTTP for tests and offline examples. See docs/models.md.
"""

from __future__ import annotations

from agentenv_local.models.anthropic import AnthropicMessagesProvider
from agentenv_local.models.base import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT_S,
    ModelProvider,
)
from agentenv_local.models.config import (
    ROLES,
    ModelEndpoint,
    make_provider,
    resolve_endpoint,
    resolve_model,
)
from agentenv_local.models.errors import ModelError
from agentenv_local.models.openai import OpenAIChatProvider
from agentenv_local.models.types import (
    Message,
    ModelResponse,
    StopReason,
    ToolCall,
    ToolSpec,
    Usage,
)

__all__ = [
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_TIMEOUT_S",
    "ROLES",
    "AnthropicMessagesProvider",
    "Message",
    "ModelEndpoint",
    "ModelError",
    "ModelProvider",
    "ModelResponse",
    "OpenAIChatProvider",
    "StopReason",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "make_provider",
    "resolve_endpoint",
    "resolve_model",
]
