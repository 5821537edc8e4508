"""RunOptions' per-run models, start step and starting context: real model names pass and key-like values
are refused; the options cross the hub's wire as they are; a stored run's overrides give its models back."""

from __future__ import annotations

import json

import pytest

from agentenv_local.errors import ValidationError
from agentenv_local.tasks.options import RunOptions, model_name_problem

REAL_NAMES = ["qwen3:8b", "Qwen/Qwen3-8B", "claude-sonnet-4-5-20250929", "meta-llama/Llama-3.1-8B-Instruct",
              "llama3.1:8b-instruct-q4_K_M", "gpt-4o-mini", "hosted_vllm/Qwen/Qwen2.5-72B-Instruct",
              "anthropic.claude-3-5-sonnet-20241022-v2:0", "hf-internal-testing/tiny-random-gpt2",
              "accounts/fireworks/models/llama-v3p1-70b-instruct", "local"]
KEYS = ["sk-ant-api03-abcdefghij", "sk-proj-x", "gsk_abc", "AIzaSyA1b2C3d4", "hf_abcdef",
        "3f9a0c7b1d2e4f6a8b9c0d1e2f3a", "Xy7kP2mQ9rT4vW8zA1bC3dE5fG"]


@pytest.mark.parametrize("name", REAL_NAMES)
def test_real_model_names_are_accepted(name):
    assert model_name_problem(name) is None
    assert RunOptions(agent_model=name, user_model=name, judge_model=name).model_for("judge") == name


@pytest.mark.parametrize("value", KEYS)
def test_key_like_values_are_refused_without_echoing_them(value):
    with pytest.raises(ValidationError) as caught:
        RunOptions(judge_model=value)
    assert "--judge-model" in caught.value.message and "looks like an API key" in caught.value.message
    assert value not in caught.value.message


def test_the_options_cross_the_wire_and_come_back_from_the_store():
    context = {"deployed_sandboxes": [], "metadata": {"seed": {"a": "1"}}}
    options = RunOptions(sandbox="process", agent="tool-loop", keep=True, agent_model="m-a", user_model="m-u",
                         judge_model="m-j", start_step=2, context=context)
    wire = json.loads(json.dumps(options.to_wire()))
    back = RunOptions.from_wire(wire)
    assert back == options and back.context == context and back.start_step == 2
    assert options.overrides() == {"sandbox": "process", "agent": "tool-loop", "agent_model": "m-a",
                                   "user_model": "m-u", "judge_model": "m-j"}
    stored = RunOptions.from_stored(options.overrides(), keep=True)
    assert (stored.agent_model, stored.user_model, stored.judge_model) == ("m-a", "m-u", "m-j")
    assert stored.start_step == 0 and stored.context is None  # the journal holds what they did
    assert RunOptions.from_stored({"judge_model": "sk-proj-leaked", "user_model": 3}).judge_model is None


def test_options_left_out_do_not_travel():
    """A hub started by an earlier version knows only sandbox, agent and keep: a run without the newer
    options sends only those."""
    assert RunOptions(sandbox="process").to_wire() == {"sandbox": "process", "agent": None, "keep": False}
    assert RunOptions.from_wire(RunOptions(sandbox="process").to_wire()) == RunOptions(sandbox="process")


@pytest.mark.parametrize("wire, message", [
    ({"start_step": -1}, "--start-step must be a step index >= 0"),
    ({"start_step": True}, "--start-step must be a step index >= 0"),
    ({"context": [1]}, "starting context is a JSON object"),
    ({"user_model": 7}, "run option 'user_model' is a name"),
])
def test_bad_wire_options_are_refused(wire, message):
    with pytest.raises(ValidationError) as caught:
        RunOptions.from_wire(wire)
    assert message in caught.value.message
