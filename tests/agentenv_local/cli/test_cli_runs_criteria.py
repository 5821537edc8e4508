"""`agentenv runs show` prints each criterion by its id (or type) with its justification, for the
row shapes the verifiers record: a rubric judge's rows (id, criterion text, weight, justification;
no type) and a check's rows (type, justification). Before issue 12 rubric rows showed as
`[pass] None:`. The run is written into a real store file, then shown through the real CLI."""

from __future__ import annotations

import time

from stores.database import DuckDBStore

RUBRIC_ROWS = [  # as steps/rubrics.py records them
    {"criterion_index": 0, "id": "answer", "criterion": "States that the total is 42", "weight": 2,
     "skipped": False, "score": 1, "result": True, "justification": "the reply says the total is 42",
     "judge_output": {"id": "answer", "passed": True}},
    {"criterion_index": 1, "id": "criterion_2", "criterion": "Uses the calculator tool", "weight": 1,
     "skipped": False, "score": 0, "result": False, "justification": "no calculator call in the trajectory",
     "judge_output": None},
]
CHECK_ROWS = [  # as steps/response_verifier.py records them
    {"criterion_index": 0, "type": "response_contains", "needles": ["42"], "result": True, "score": 1,
     "justification": "contains '42'", "skipped": False},
]


def test_show_names_each_criterion_and_its_justification(project):
    project.cli("runs", "list")  # creates the project's store; its hub has exited when this returns
    store = DuckDBStore(project.root / ".agentenv" / "store.duckdb", project.root / ".agentenv" / "objects")
    try:
        now = time.time()
        store.runs.create({
            "run_id": "judged-1", "task_id": "tasks/judged", "task_version": 1, "status": "passed",
            "created_at": now, "started_at": now, "finished_at": now + 1, "score": 0.67, "owner": None,
            "steps": {"grade": {"status": "passed", "type": "rubrics_verifier"}},
            "verifications": {
                "grade": {"score": 0.67, "score_aggregator": "weighted_mean", "results": RUBRIC_ROWS},
                "reply": {"score": 1, "score_aggregator": "all_pass", "results": CHECK_ROWS}},
        })
    finally:
        store.close()
    out = project.cli("runs", "show", "judged-1").stdout
    assert "None" not in out
    assert "[pass] answer (weight 2): States that the total is 42" in out
    assert "the reply says the total is 42" in out
    assert "[FAIL] criterion_2: Uses the calculator tool" in out
    assert "no calculator call in the trajectory" in out
    assert "[pass] response_contains: contains '42'" in out
