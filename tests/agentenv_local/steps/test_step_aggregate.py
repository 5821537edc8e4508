"""aggregate_verifiers: one score over the rows of earlier verifications."""

from __future__ import annotations

import pytest

from agentenv_local.errors import StepError


@pytest.fixture
def verified(run):
    ctx = run.ctx(run.step({"id": "seed", "type": "review"}))
    ctx.record_verification("files", [{"criterion_index": 0, "result": True, "score": 1, "weight": 3},
                                      {"criterion_index": 1, "result": False, "score": 0, "weight": 1}])
    ctx.record_verification("reply", [{"criterion_index": 0, "result": True, "score": 1},
                                      {"criterion_index": 1, "result": False, "score": 0, "skipped": True}])
    return run


def test_weighted_average_over_the_union(verified):
    verified.execute(verified.step({"id": "total", "type": "aggregate_verifiers", "verifier_ids": ["files", "reply"],
                                    "score_aggregator": "weighted_average"}))
    v = verified.metadata["verifications"]["total"]
    assert v["score"] == pytest.approx(4 / 5)  # (3*1 + 1*0 + 1*1) / (3 + 1 + 1); skipped row ignored
    assert [r["source_verifier_id"] for r in v["results"]] == ["files", "files", "reply", "reply"]
    assert "source_verifier_id" not in verified.metadata["verifications"]["files"]["results"][0]


def test_all_pass_and_custom_verifier_id(verified):
    verified.execute(verified.step({"id": "agg", "type": "aggregate_verifiers", "verifier_ids": ["reply"],
                                    "verifier_id": "overall"}))
    assert verified.metadata["verifications"]["overall"]["score"] == 1.0
    verified.execute(verified.step({"id": "agg2", "type": "aggregate_verifiers", "verifier_ids": ["files", "reply"]}))
    assert verified.metadata["verifications"]["agg2"]["score"] == 0.0


def test_missing_verifier_lists_the_known_ones(verified):
    with pytest.raises(StepError, match=r"no verification named 'judge' in this run \(known: files, reply\)"):
        verified.execute(verified.step({"id": "a", "type": "aggregate_verifiers", "verifier_ids": ["files", "judge"]}))


def test_config_problems(run):
    def problems(**fields):
        return run.step({"id": "a", "type": "aggregate_verifiers", **fields}).config_problems()

    assert problems() == ["verifier_ids: name at least one verifier to aggregate"]
    assert problems(verifier_ids=["x", "x"]) == ["verifier_ids: x listed more than once"]
    assert problems(verifier_ids=["a"]) == ["verifier_id: 'a' cannot aggregate itself"]
