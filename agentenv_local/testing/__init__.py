"""Test doubles for agentenv and its plugins: nothing here runs in production.

- `agentenv_local.testing.fake_models`: `FakeModelServer`, a real local HTTP server that speaks the
  OpenAI Chat Completions and Anthropic Messages APIs, checks every request as they do and answers
  from a script (`Reply`) or a `RuleResponder`. See docs/models.md.
"""
