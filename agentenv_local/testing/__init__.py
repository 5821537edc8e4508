"""Test doubles for agentenv and its plugins: nothing here runs in production.

- `agentenv_local.testing.fake_models`: `FakeModelServer`, a real local HTTP server that speaks the
  OpenAI Chat Completions, Anthropic Messages, OpenAI Responses and Gemini APIs (plain or streamed), checks
  every request as they do and answers from a script (`Reply`) or a `RuleResponder` (`model_script`). See
  docs/models.md. Each wire format lives in its own module (`wire_openai`, `wire_anthropic`,
  `wire_responses`, `wire_gemini`; `sse` for events).
"""
