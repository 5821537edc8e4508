"""Which judges a replay asks again: the built-in scripted agent with its plan in the task judges the replayed
episode again (it answers the same input the same way); any other judge answers its recorded verdict."""

from __future__ import annotations

import copy

from agentenv_local.replay.task import replay_steps

VERDICT = {"criteria": [{"id": "replied", "score": 1, "passed": True, "justification": "it replied"}]}
RUN = {"run_id": "r1", "started_at": 1_780_000_000.0, "context": {"prompt_responses": []},
       "verifications": {"grade": {"judge": {"attempts": [{"raw": VERDICT}]}, "results": []}}}


def task(judge: dict) -> list[dict]:
    return [{"id": "judge", "type": "deploy_agent", "agent_name": "judge", **judge},
            {"id": "grade", "type": "rubrics_verifier", "use_agent_judge": True, "judge_agent_name": "judge",
             "criteria": [{"id": "replied", "criterion": "It replied."}], "depends_on": ["judge"]}]


def test_a_scripted_judge_with_its_plan_in_the_task_is_deployed_as_recorded_and_judges_again():
    steps = task({"a2a_agent_id": "scripted", "config": {"plan": [{"check": {"input": "data.trajectory",
                                                                          "contains": "send_email"},
                                                                "name": "replied"}, {"verdict": {}}]}})
    replayed, notes = replay_steps(copy.deepcopy(steps), RUN, [], None, {})
    assert replayed == steps and notes == []


def test_any_other_judge_answers_its_recorded_verdict():
    for judge in ({"a2a_agent_id": "tool-loop", "model": "fake-model"},  # a model: not asked again offline
                  {"a2a_agent_id": "scripted", "config": {"plan": "judge-plan.json"}}):  # a file that may change
        replayed, notes = replay_steps(task(judge), RUN, [], None, {})
        by_id = {s["id"]: s for s in replayed}
        assert notes == ["step grade: its judge (judge) is not asked again (only the scripted agent with its plan in "
                         "the task is): the recorded verdict is fed back, so its criteria are those it gave the "
                         "recorded episode"]
        assert set(by_id) == {"judge", "replay-judge-grade", "grade"}
        assert by_id["judge"]["a2a_agent_id"] == "scripted"
        assert by_id["judge"]["config"] == {"plan": {"turns": [], "after_last": "end"}}  # never prompted
        assert by_id["replay-judge-grade"]["config"] == {"plan": {"steps": [{"structured": VERDICT}]}}
        assert by_id["grade"]["judge_agent_name"] == "replay-judge-grade"
        assert by_id["grade"]["depends_on"] == ["judge", "replay-judge-grade"]
