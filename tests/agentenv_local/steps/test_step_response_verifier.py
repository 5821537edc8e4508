"""agent_prompt_response_verifier over recorded prompt responses."""

from __future__ import annotations

import asyncio

import pytest

from agentenv_local.errors import StepError


@pytest.fixture
def answered(run):
    run.state["prompt_responses"].append({"prompt_id": "ask", "response": "Old answer", "step_id": "p0"})
    run.state["prompt_responses"].append({"prompt_id": "ask", "response": "The invoice TOTAL is $1,250.00.\nPaid.",
                                          "step_id": "p1"})
    run.state["prompt_responses"].append({"prompt_id": "other", "response": None})
    return run


def test_contains_and_regex(answered):
    answered.execute(answered.step({"id": "check", "type": "agent_prompt_response_verifier", "prompt_id": "ask",
                                    "criteria": [
        {"type": "response_contains", "needles": ["total", "paid"]},
        {"type": "response_contains", "needles": ["TOTAL"], "case_sensitive": True},
        {"type": "response_regex_present", "pattern": r"\$\d{1,3}(,\d{3})*\.\d\d"},
        {"type": "response_regex_present", "pattern": "^paid", "flags": "im"},
    ]}))
    v = answered.metadata["verifications"]["check"]
    assert v["score"] == 1.0
    rows = v["results"]
    assert rows[0]["justification"] == "the response contains 'total', 'paid'"
    assert rows[2]["justification"] == r"/\$\d{1,3}(,\d{3})*\.\d\d/ matches '$1,250.00'"
    assert rows[3]["flags"] == "im" and rows[3]["criterion_index"] == 3


def test_failures_score_zero(answered):
    answered.execute(answered.step({"id": "check", "type": "agent_prompt_response_verifier", "prompt_id": "ask",
                                    "verifier_id": "reply", "score_aggregator": "any_pass", "criteria": [
        {"type": "response_contains", "needles": ["total", "refund"]},
        {"type": "response_contains", "needles": ["total"], "case_sensitive": True},
        {"type": "response_regex_present", "pattern": "^paid"},
    ]}))
    v = answered.metadata["verifications"]["reply"]
    assert v["score"] == 0.0
    why = [r["justification"] for r in v["results"]]
    assert why == ["the response lacks 'refund'", "the response lacks 'total'", "no match for /^paid/ in the response"]


def test_none_response_is_empty_text(answered):
    answered.execute(answered.step({"id": "c", "type": "agent_prompt_response_verifier", "prompt_id": "other",
                                    "criteria": [{"type": "response_contains", "needles": ["x"]}]}))
    assert answered.metadata["verifications"]["c"]["score"] == 0.0


def test_missing_prompt_names_the_ones_there_are(answered):
    expected = r"no response to prompt 'nope' in this run \(responses exist for: ask, other\)"
    with pytest.raises(StepError, match=expected):
        answered.execute(answered.step({"id": "c", "type": "agent_prompt_response_verifier", "prompt_id": "nope",
                                        "criteria": [{"type": "response_contains", "needles": ["x"]}]}))


def test_config_problems(run):
    def problems(criteria):
        return run.step({"id": "c", "type": "agent_prompt_response_verifier", "prompt_id": "p",
                         "criteria": criteria}).config_problems()

    assert problems([]) == ["criteria: needs at least one criterion"]
    assert problems([{"type": "response_judged_nice"}]) == [
        "criteria[0].type: unknown criterion type 'response_judged_nice'; use one of response_contains, "
        "response_regex_present"]
    assert problems([{"type": "response_contains", "needles": []}]) == [
        "criteria[0] (response_contains).needles: needs a non-empty list of strings"]
    assert problems([{"type": "response_regex_present", "pattern": "a("}])[0].startswith(
        "criteria[0] (response_regex_present).pattern: 'a(' does not compile")
    assert problems([{"type": "response_regex_present", "pattern": "a", "flags": "ix"}]) == [
        "criteria[0] (response_regex_present).flags: 'ix' must be letters from \"ims\""]
    assert problems([{"type": "response_regex_present"}]) == ['criteria[0] (response_regex_present): missing "pattern"']


def test_execute_refuses_a_misconfigured_step(run):
    run.state["prompt_responses"].append({"prompt_id": "p", "response": "x"})
    step = run.step({"id": "c", "type": "agent_prompt_response_verifier", "prompt_id": "p",
                     "criteria": [{"type": "bogus"}]})
    with pytest.raises(StepError, match="misconfigured"):
        asyncio.run(step.execute(run.ctx(step)))
