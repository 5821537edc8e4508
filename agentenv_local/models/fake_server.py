"""The fake model server's earlier path (documented before the test doubles moved to
`agentenv_local.testing`); import from `agentenv_local.testing.fake_models` instead."""

from agentenv_local.testing.fake_models import (
    FakeModelServer,
    RecordedRequest,
    Reply,
    RuleResponder,
    example_from_schema,
    validate_anthropic,
    validate_openai,
)

__all__ = ["FakeModelServer", "RecordedRequest", "Reply", "RuleResponder", "example_from_schema",
           "validate_anthropic", "validate_openai"]
