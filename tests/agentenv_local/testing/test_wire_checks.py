"""The request checks the three model wire formats share (testing/wire_checks.py), through each format."""

from __future__ import annotations

import pytest

from agentenv_local.testing.wire_anthropic import validate_anthropic
from agentenv_local.testing.wire_openai import validate_openai
from agentenv_local.testing.wire_responses import validate_responses

_HEADERS = {"anthropic-version": "2023-06-01"}
_AN_TOOL = {"name": "look", "input_schema": {"type": "object"}}
_OA_TOOL = {"type": "function", "function": {"name": "look"}}
_RS_TOOL = {"type": "function", "name": "look"}


def _an(**extra: object) -> list[str]:
    return validate_anthropic({"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "x"}],
                               **extra}, _HEADERS)


def _oa(**extra: object) -> list[str]:
    return validate_openai({"model": "m", "messages": [{"role": "user", "content": "x"}], **extra})


def _rs(**extra: object) -> list[str]:
    return validate_responses({"model": "m", "input": "x", **extra})


@pytest.mark.parametrize("validate", [_an, _oa, _rs])
def test_tools_that_are_not_a_list_are_refused(validate) -> None:
    assert validate(tools={"name": "look"}) == ["tools: must be a list"]


@pytest.mark.parametrize(("validate", "tool", "problem"), [
    (_an, _AN_TOOL, "tools: Tool names must be unique."),
    (_oa, _OA_TOOL, "tools: function names must be unique"),
    (_rs, _RS_TOOL, "tools: tool names must be unique"),
])
def test_a_tool_name_given_twice_is_refused_and_one_bad_tool_is_named_by_place(validate, tool, problem) -> None:
    assert validate(tools=[tool]) == []
    problems = validate(tools=[tool, 7, tool])
    assert problem in problems
    assert any(p.startswith(("tools.1", "tools[1]")) for p in problems)


@pytest.mark.parametrize(("validate", "key", "minimum"), [
    (_an, "max_tokens", 1), (_oa, "max_tokens", 1), (_oa, "max_completion_tokens", 1),
    (_rs, "max_output_tokens", 16),
])
def test_token_limits_are_whole_numbers_of_at_least_the_minimum(validate, key, minimum) -> None:
    assert validate(**{key: minimum}) == []
    for bad in (minimum - 1, True, 2.5, "9"):
        assert validate(**{key: bad}) == [f"{key}: must be an integer >= {minimum}, got {bad!r}"]
