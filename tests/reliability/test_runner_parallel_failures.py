"""Steps that fail in the same scheduling round (issue 12): the runner used to crash with
`RuntimeError: coroutine raised StopIteration` and record `internal error: ...`, and a resume hit
the same crash. The run's error must name the failed steps' own errors."""

from __future__ import annotations

from kits.hub import bash_check, deploy


def _no_box(step_id: str) -> dict:
    # Fails before its first await (no sandbox named "nowhere"), so every such step started in one
    # round also finishes in that round.
    return bash_check(step_id, "true", sandbox_name="nowhere", depends_on=[])


def test_two_steps_failing_in_one_round_name_their_own_errors(hub):
    run = hub.run([_no_box("left"), _no_box("right"), _no_box("third")])
    assert run["status"] == "error"
    assert "internal error" not in run["error"] and "StopIteration" not in run["error"]
    assert "step 'left' failed" in run["error"] and "step 'right' failed" in run["error"]
    assert "no sandbox named 'nowhere'" in run["error"]
    assert {run["steps"][s]["status"] for s in ("left", "right", "third")} == {"failed"}


def test_resume_of_such_a_run_does_not_crash_either(hub):
    run = hub.run([_no_box("left"), _no_box("right")])
    assert run["status"] == "error"
    hub.session.call("runner.resume", run["run_id"])
    again = hub.wait(run["run_id"])
    assert again["generation"] == 1 and again["status"] == "error"
    assert "internal error" not in again["error"] and "step 'left' failed" in again["error"]


def test_a_failure_next_to_a_step_that_passes_in_the_same_round(hub):
    run = hub.run([deploy(), _no_box("bad"),
                   bash_check("ok", "true", sandbox_name="box", depends_on=["box"])])
    assert run["status"] == "error" and run["error"].startswith("step 'bad' failed")
    assert run["steps"]["box"]["status"] == "passed"
