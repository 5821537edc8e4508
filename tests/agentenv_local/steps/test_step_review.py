"""review: the run waits until an operator decides, from another thread, through the store."""

from __future__ import annotations

import threading
import time

import pytest

from agentenv_local.errors import StepError


def decide_later(run, step_id: str, decision: str, delay: float = 0.3) -> threading.Thread:
    review_id = f"{run.run_id}:{step_id}"

    def operator():
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # wait until the step has asked
            record = run.store.records.find("reviews", review_id)
            if record and record["body"].get("status") == "pending":
                break
            time.sleep(0.02)
        time.sleep(delay)
        body = dict(record["body"], decision=decision, status="decided")
        run.store.records.save("reviews", review_id, body)
        run.services.notify_review(review_id)

    thread = threading.Thread(target=operator)
    thread.start()
    return thread


def test_continue(run):
    thread = decide_later(run, "gate", "continue")
    run.execute(run.step({"id": "gate", "type": "review", "label": "check the files", "timeout_seconds": 20,
                          "poll_interval_seconds": 0.05}))
    thread.join()
    assert run.metadata["reviews"] == {"gate": "continue"}
    kinds = [e["kind"] for e in run.store.events.query(run_id=run.run_id)]
    assert "review.pending" in kinds and "review.decided" in kinds


def test_abort(run):
    thread = decide_later(run, "gate", "abort")
    with pytest.raises(StepError, match="review 'check' aborted by the operator"):
        run.execute(run.step({"id": "gate", "type": "review", "label": "check", "timeout_seconds": 20,
                              "poll_interval_seconds": 0.05}))
    thread.join()
    assert run.metadata["reviews"] == {"gate": "abort"}


def test_timeout_without_a_decision(run):
    with pytest.raises(StepError, match="timed out"):
        run.execute(run.step({"id": "gate", "type": "review", "timeout_seconds": 0.3, "poll_interval_seconds": 0.05}))


def test_defaults_from_task_json(run):
    step = run.step({"id": "gate", "type": "review"})
    assert (step.label, step.timeout_seconds, step.poll_interval_seconds) == ("", 10800, 5)
    with pytest.raises(ValueError):
        run.step({"id": "gate", "type": "review", "timeout_seconds": 0})
