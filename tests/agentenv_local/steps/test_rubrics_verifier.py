"""rubrics_verifier: a FakeModelServer judge (both APIs) and a scripted judge agent served over HTTP."""

from __future__ import annotations

import json

import pytest
from kits.agents import serving_agent
from kits.config import DictConfig

from agentenv_local.errors import StepError
from agentenv_local.steps.rubrics import truncate_events
from agentenv_local.testing.fake_models import FakeModelServer, Reply

KEY = "judge-key-0123456789"
TRAJECTORY = [{"type": "turn", "input": "what is 6*7?"},
              {"type": "tool_call", "server": "calc", "tool": "multiply", "args": {"a": 6, "b": 7}, "result": "42",
               "is_error": False},
              {"type": "final", "text": "The answer is 42."}]
CRITERIA = [{"id": "answer", "criterion": "States that the answer is 42", "weight": 3},
            {"id": "tool", "criterion": "Uses the multiply tool", "weight": 1}]


@pytest.fixture
def config() -> DictConfig:
    return DictConfig({"sandbox": {"default": "process"}})


@pytest.fixture
def judged(run):
    run.state["prompt_responses"].append({
        "prompt_id": "p1", "response": "The answer is 42.", "structured_output": None, "agent_name": "solver",
        "step_id": "ask", "trajectory": TRAJECTORY, "error_message": None})
    return run


def _use_judge(config: DictConfig, srv: FakeModelServer, api: str) -> None:
    config.values["model"] = {"base_url": srv.base_url, "api": api, "api_key": KEY, "default": "solver-m",
                              "roles": {"judge": "judge-m"}, "max_retries": 0}


def _verification(run, vid: str = "grade") -> dict:
    return run.metadata["verifications"][vid]


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_binary_judge_weights_rows_and_raw_output(judged, config, api):
    verdict = {"criteria": [{"id": "answer", "passed": True, "justification": "says 42"},
                            {"id": "tool", "passed": False, "justification": "no tool seen"}]}
    with FakeModelServer(api_key=KEY, script=[Reply.structured(verdict)]) as srv:
        _use_judge(config, srv, api)
        judged.execute(judged.step({"id": "grade", "type": "rubrics_verifier", "prompt_id": "p1",
                                    "criteria": CRITERIA, "grading_policy_prompt": "Be harsh.",
                                    "context_facts_for_judge": ["6*7 is 42"]}))
        (request,) = srv.valid_requests()
    v = _verification(judged)
    assert v["score"] == pytest.approx(0.75) and v["score_aggregator"] == "weighted_average"
    rows = v["results"]
    assert [(r["criterion_index"], r["id"], r["weight"], r["score"], r["result"]) for r in rows] == [
        (0, "answer", 3.0, 1.0, True), (1, "tool", 1.0, 0.0, False)]
    assert rows[0]["criterion"] == "States that the answer is 42" and rows[1]["justification"] == "no tool seen"
    assert rows[0]["judge_output"]["justification"] == "says 42"
    judge = v["judge"]
    assert judge["mode"] == "model" and judge["model"] == "judge-m" and judge["usable"]
    assert json.loads(judge["attempts"][0]["raw"]) == verdict
    assert request.model == "judge-m" and "Be harsh." in request.system
    prompt = request.last_user_text
    assert "The answer is 42." in prompt and "multiply" in prompt and "6*7 is 42" in prompt
    schema = request.response_schema
    assert schema["properties"]["criteria"]["items"]["properties"]["id"]["enum"] == ["answer", "tool"]


def test_partial_scores_and_trajectory_off(judged, config):
    verdict = {"criteria": [{"id": "answer", "score": 0.5, "justification": "half"},
                            {"id": "tool", "score": 1, "justification": "full"}]}
    with FakeModelServer(api_key=KEY, script=[Reply.structured(verdict)]) as srv:
        _use_judge(config, srv, "openai")
        judged.execute(judged.step({"id": "grade", "type": "rubrics_verifier", "prompt_id": "p1",
                                    "output_format": "rubric_partial", "use_trajectory": False,
                                    "criteria": [{"id": "answer", "criterion": "42"},
                                                 {"id": "tool", "criterion": "tool"}]}))
        (request,) = srv.valid_requests()
    rows = _verification(judged)["results"]
    assert [(r["score"], r["result"]) for r in rows] == [(0.5, True), (1.0, True)]
    assert _verification(judged)["score"] == pytest.approx(0.75)
    assert "multiply" not in request.last_user_text
    assert request.response_schema["properties"]["criteria"]["items"]["required"] == ["id", "score", "justification"]


def test_unparsable_then_valid_is_retried_once(judged, config):
    good = {"criteria": [{"id": "answer", "passed": True, "justification": "ok"},
                         {"id": "tool", "passed": True, "justification": "ok"}]}
    with FakeModelServer(api_key=KEY, script=[Reply.text("I think it passes"), Reply.structured(good)]) as srv:
        _use_judge(config, srv, "openai")
        judged.execute(judged.step({"id": "grade", "type": "rubrics_verifier", "prompt_id": "p1",
                                    "criteria": CRITERIA}))
        requests = srv.valid_requests()
    assert len(requests) == 2 and "could not be used" in requests[1].last_user_text
    v = _verification(judged)
    assert v["score"] == 1.0 and v["judge"]["usable"]
    assert [a["problem"] for a in v["judge"]["attempts"]] == ["the answer is not JSON", None]


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_unparsable_twice_records_every_criterion_failed(judged, config, api):
    partial = {"criteria": [{"id": "answer", "passed": True, "justification": "ok"}]}
    script = [Reply.structured({"verdict": "yes"}), Reply.structured(partial)]
    with FakeModelServer(api_key=KEY, script=script) as srv:
        _use_judge(config, srv, api)
        judged.execute(judged.step({"id": "grade", "type": "rubrics_verifier", "prompt_id": "p1",
                                    "criteria": CRITERIA, "verifier_id": "v"}))
        assert len(srv.valid_requests()) == 2
    v = _verification(judged, "v")
    rows = v["results"]
    assert rows[0]["result"] is True                       # what could be read counts
    assert rows[1]["result"] is False and rows[1]["score"] == 0
    assert "no usable verdict from the judge after 2 attempt(s)" in rows[1]["justification"]
    assert "'tool'" in rows[1]["justification"]
    assert not v["judge"]["usable"] and v["score"] == pytest.approx(0.75)


def test_no_judge_model_fails_in_preflight_naming_the_step_and_key(judged, config):
    step = judged.step({"id": "grade", "type": "rubrics_verifier", "prompt_id": "p1", "criteria": CRITERIA})
    problems = step.preflight(config)
    assert len(problems) == 1
    assert "'grade'" in problems[0] and "rubrics_verifier" in problems[0]
    assert "[model] base_url" in problems[0] and "[model.roles] judge" in problems[0]
    with pytest.raises(StepError, match=r"'grade'.*\[model\] base_url"):
        judged.execute(step)
    agent_step = judged.step({"id": "g2", "type": "rubrics_verifier", "criteria": CRITERIA,
                              "use_agent_judge": True, "judge_agent_name": "judge"})
    assert agent_step.preflight(config) == []
    bad = judged.step({"id": "g3", "type": "rubrics_verifier", "criteria": [{"criterion": ""}, {"id": 3}],
                       "use_agent_judge": True})
    problems = bad.config_problems()
    assert any("criteria[0].criterion" in p for p in problems) and any("judge_agent_name" in p for p in problems)


def test_missing_response_is_a_clear_error(judged, config):
    with FakeModelServer(api_key=KEY) as srv:
        _use_judge(config, srv, "openai")
        with pytest.raises(StepError, match="no response to prompt 'nope'.*responses exist for: p1"):
            judged.execute(judged.step({"id": "grade", "type": "rubrics_verifier", "prompt_id": "nope",
                                        "criteria": CRITERIA}))


def test_agent_judge_scripted_over_http(judged, config):
    from agentenv_local.agents.scripted import ScriptedAgent

    plan = [{"check": {"input": "data.response", "contains": "42"}, "name": "answer"},
            {"check": {"input": "data.trajectory", "contains": "multiply"}, "name": "tool"},
            {"check": {"input": "data.rubric", "contains": "Uses the multiply tool"}, "name": "extra"},
            {"verdict": {}}]
    with serving_agent(ScriptedAgent(plan=plan)) as base:
        judged.state["deployed_agents"].append({"agent_name": "judge", "a2a_url": base + "/a2a"})
        judged.execute(judged.step({"id": "grade", "type": "rubrics_verifier", "prompt_id": "p1",
                                    "criteria": CRITERIA, "use_agent_judge": True, "judge_agent_name": "judge"}))
    v = _verification(judged)
    assert [(r["id"], r["result"]) for r in v["results"]] == [("answer", True), ("tool", True)]
    assert v["score"] == 1.0 and v["judge"]["mode"] == "agent" and v["judge"]["usable"]
    assert v["judge"]["attempts"][0]["raw"]["criteria"][2] == {"name": "extra", "passed": True}


def test_agent_judge_that_fails_its_checks_and_one_that_is_missing(judged, config):
    from agentenv_local.agents.scripted import ScriptedAgent

    plan = [{"check": {"input": "data.response", "contains": "43"}, "name": "first"},
            {"check": {"input": "data.response", "contains": "42"}, "name": "second"},
            {"verdict": {}}]
    with serving_agent(ScriptedAgent(plan=plan)) as base:   # unnamed entries map by position
        judged.state["deployed_agents"].append({"agent_name": "judge", "a2a_url": base})
        judged.execute(judged.step({"id": "grade", "type": "rubrics_verifier", "prompt_id": "p1",
                                    "criteria": CRITERIA, "use_agent_judge": True, "judge_agent_name": "judge",
                                    "score_aggregator": "all_pass"}))
    v = _verification(judged)
    assert [r["result"] for r in v["results"]] == [False, True] and v["score"] == 0.0
    with pytest.raises(StepError, match="judge agent 'other' is not deployed.*deployed: judge"):
        judged.execute(judged.step({"id": "g2", "type": "rubrics_verifier", "criteria": CRITERIA,
                                    "use_agent_judge": True, "judge_agent_name": "other"}))


def test_truncate_events_keeps_head_and_tail():
    events = [{"i": i, "pad": "x" * 50} for i in range(100)]
    kept, omitted = truncate_events(events, 1000)
    assert omitted > 0 and kept[0]["i"] == 0 and kept[-1]["i"] == 99
    marker = next(e for e in kept if e.get("type") == "truncated")
    assert marker["events_omitted"] == omitted == 100 - (len(kept) - 1)
    assert len(json.dumps(kept)) < 1200
    assert truncate_events(events[:3], 10_000) == (events[:3], 0)
