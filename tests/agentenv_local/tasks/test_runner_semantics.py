"""The task runner in a real hub (this process) on a real DuckDB file: concurrency of ready steps,
depends_on, tolerated failures, retries, teardown, cancel, scores and run statuses."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from kits.hub import bash_check, deploy, gate, sandbox_folders, step_status, wait_until

from agentenv_local.artifacts import put_artifact


def _q(path: Path) -> str:
    return shlex.quote(str(path))


def _stamp(log: Path, what: str) -> str:
    return f"echo {what} $(date +%s.%N) >> {_q(log)}"


def _stamps(log: Path) -> dict[str, float]:
    return {" ".join(line.split()[:-1]): float(line.split()[-1]) for line in log.read_text().splitlines()}


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


FLAKY = '''
import os

def run(input):
    args = input["args"]
    with open(args["attempts"], "a") as f:
        f.write("attempt\\n")
    if args.get("always_fail") or not os.path.exists(args["marker"]):
        open(args["marker"], "w").close()
        raise RuntimeError("first attempt fails on purpose")
    return {"attempts": sum(1 for _ in open(args["attempts"]))}
'''


def _flaky_step(step_id: str, tmp_path: Path, **fields) -> dict:
    return {"id": step_id, "type": "run_code", "script_artifact_id": "flaky",
            "args": {"attempts": str(tmp_path / f"{step_id}.attempts"), "marker": str(tmp_path / f"{step_id}.marker"),
                     **fields.pop("args", {})}, **fields}


# -- concurrency and order ------------------------------------------------------------------
def test_ready_steps_run_concurrently_and_depends_on_waits(hub, tmp_path):
    log = tmp_path / "stamps"
    left_up, right_up = tmp_path / "left.up", tmp_path / "right.up"

    def side(name: str, mine: Path, other: Path) -> dict:
        # Each side starts, says so, and waits for the other to have started: run one after the
        # other they could never both pass (the wait gives up after 20 s).
        cmd = f"{_stamp(log, 'start ' + name)}; touch {_q(mine)}; {gate(other, 20)}; sleep 0.2; " \
              f"{_stamp(log, 'end ' + name)}"
        return bash_check(name, f"bash -c {shlex.quote(cmd)}", sandbox_name="box", depends_on=["box"])

    run = hub.run([
        deploy(),
        side("left", left_up, right_up),
        side("right", right_up, left_up),
        bash_check("last", _stamp(log, "start last"), sandbox_name="box", depends_on=["left", "right"]),
    ])
    assert run["status"] == "passed", run.get("error")
    stamps = _stamps(log)
    # Both started before either finished (overlap), from the recorded timestamps.
    assert max(stamps["start left"], stamps["start right"]) < min(stamps["end left"], stamps["end right"])
    # `last` waited for both.
    assert stamps["start last"] > max(stamps["end left"], stamps["end right"])
    steps = run["steps"]
    assert steps["last"]["started_at"] >= max(steps["left"]["finished_at"], steps["right"]["finished_at"])
    assert run["levels"] == [["box"], ["left", "right"], ["last"]]


def test_depends_on_names_only_what_a_step_waits_for(hub, tmp_path):
    order = tmp_path / "order"
    early_done = tmp_path / "early.done"
    run = hub.run([
        deploy(),
        # `slow` waits for `early`, which comes later in the list but depends only on box.
        bash_check("slow", f"{gate(early_done, 20)} && echo slow >> {_q(order)}", sandbox_name="box",
                   depends_on=["box"]),
        bash_check("early", f"echo early >> {_q(order)} && touch {_q(early_done)}", sandbox_name="box",
                   depends_on=["box"]),
        # No depends_on: after every earlier step.
        bash_check("tail", f"echo tail >> {_q(order)}", sandbox_name="box"),
    ])
    assert run["status"] == "passed", run.get("error")
    assert order.read_text().split() == ["early", "slow", "tail"]


# -- failures, tolerated or not ----------------------------------------------------------------
def test_fail_task_on_error_false_lets_the_run_go_on(hub, tmp_path):
    later = tmp_path / "later"
    run = hub.run([
        deploy(),
        bash_check("wrong_box", "true", sandbox_name="nope", fail_task_on_error=False),
        {"id": "no_reply", "type": "agent_prompt_response_verifier", "prompt_id": "p1", "fail_task_on_error": False,
         "criteria": [{"type": "response_contains", "needles": ["x"]}]},
        bash_check("later", f"echo ran > {_q(later)}", sandbox_name="box"),
    ])
    assert run["status"] == "passed", run.get("error")
    assert later.exists()
    failed = run["context"]["metadata"]["failed_steps"]
    assert [f["step_id"] for f in failed] == ["wrong_box", "no_reply"]
    assert "nope" in failed[0]["error"] and "p1" in failed[1]["error"]
    assert step_status(run, "wrong_box") == "failed (tolerated)"
    assert step_status(run, "later") == "passed"
    assert run["score"] == 1.0


def test_a_step_that_fails_the_task_ends_the_run_in_error_and_tears_down(hub, tmp_path):
    put_artifact(hub.store, "flaky", {"flaky.py": FLAKY.encode()})
    never = tmp_path / "never"
    run = hub.run([
        deploy(),
        _flaky_step("boom", tmp_path, args={"always_fail": True}),
        bash_check("after", f"touch {_q(never)}", sandbox_name="box"),
    ])
    assert run["status"] == "error"
    assert "step 'boom' failed" in run["error"] and "first attempt fails on purpose" in run["error"]
    assert step_status(run, "boom") == "failed" and step_status(run, "after") == "skipped"
    assert not never.exists()
    assert sandbox_folders(hub.root) == []  # torn down on failure too
    assert run["context"]["metadata"]["torn_down_sandbox_ids"]


def test_a_verifier_below_one_makes_the_run_failed(hub):
    run = hub.run([deploy(), bash_check("check", "false", sandbox_name="box")])
    assert run["status"] == "failed" and run["score"] == 0.0 and not run.get("error")
    assert sandbox_folders(hub.root) == []


# -- retries --------------------------------------------------------------------------------
def test_retry_config_runs_a_failed_step_again(hub, tmp_path):
    put_artifact(hub.store, "flaky", {"flaky.py": FLAKY.encode()})
    run = hub.run([deploy(), _flaky_step("flaky", tmp_path, retry_config={"max_retries": 1})])
    assert run["status"] == "passed", run.get("error")
    assert _lines(tmp_path / "flaky.attempts") == 2
    assert run["context"]["metadata"]["script_results"]["flaky"] == {"attempts": 2}
    kinds = [e["kind"] for e in hub.store.events.query(run["run_id"])]
    assert kinds.count("step.retry") == 1


def test_retry_from_an_ancestor_runs_the_span_again(hub, tmp_path):
    put_artifact(hub.store, "flaky", {"flaky.py": FLAKY.encode()})
    prep = tmp_path / "prep"
    run = hub.run([
        deploy(),
        bash_check("prep", f"echo prep >> {_q(prep)}", sandbox_name="box"),
        _flaky_step("flaky", tmp_path, retry_config={"retry_from_step_id": "prep", "max_retries": 2}),
    ])
    assert run["status"] == "passed", run.get("error")
    assert _lines(prep) == 2  # the anchor ran again
    assert _lines(tmp_path / "flaky.attempts") == 2
    assert len(run["context"]["deployed_sandboxes"]) == 1  # box is outside the span: deployed once
    assert run["generation"] == 1
    assert sandbox_folders(hub.root) == []


def test_retries_that_run_out_end_the_run_in_error(hub, tmp_path):
    put_artifact(hub.store, "flaky", {"flaky.py": FLAKY.encode()})
    run = hub.run([deploy(), _flaky_step("flaky", tmp_path, args={"always_fail": True},
                                         retry_config={"max_retries": 2})])
    assert run["status"] == "error" and "'flaky'" in run["error"]
    assert _lines(tmp_path / "flaky.attempts") == 3
    assert sandbox_folders(hub.root) == []


# -- teardown, keep, cancel -------------------------------------------------------------------
def test_keep_leaves_the_sandboxes(hub):
    run = hub.run([deploy(), bash_check("ok", "true", sandbox_name="box")], keep=True)
    assert run["status"] == "passed"
    assert len(sandbox_folders(hub.root)) == 1
    assert run["context"]["metadata"]["torn_down_sandbox_ids"] == []


def test_cancel_a_running_run_tears_it_down(hub, tmp_path):
    release = tmp_path / "release"
    run_id = hub.submit(hub.task([deploy(), bash_check("wait", gate(release, 60), sandbox_name="box"),
                                  bash_check("after", "true", sandbox_name="box")]))
    wait_until(lambda: step_status(hub.store.runs.get(run_id), "wait") == "running", what="the slow step")
    assert len(sandbox_folders(hub.root)) == 1
    assert hub.session.call("runner.cancel", run_id=run_id)["status"] == "cancelling"
    run = hub.wait(run_id)
    release.touch()
    assert run["status"] == "cancelled"
    assert step_status(run, "after") == "skipped"
    assert sandbox_folders(hub.root) == []
    kinds = [e["kind"] for e in hub.store.events.query(run_id)]
    assert kinds[-1] == "run.finished"


# -- scores ------------------------------------------------------------------------------------
def _scored(aggregator: str | None) -> list[dict]:
    steps = [
        deploy(),
        {"id": "v1", "type": "verify_sandbox", "sandbox_name": "box",
         "criteria": [{"type": "bash_cmd_succeeds", "bash_cmd": "true", "weight": 3}]},
        {"id": "v2", "type": "verify_sandbox", "sandbox_name": "box",
         "criteria": [{"type": "bash_cmd_succeeds", "bash_cmd": "false", "weight": 1}]},
    ]
    if aggregator:
        steps.append({"id": "agg", "type": "aggregate_verifiers", "verifier_ids": ["v1", "v2"],
                      "score_aggregator": aggregator})
    return steps


@pytest.mark.parametrize("aggregator, score, status", [
    ("all_pass", 0.0, "failed"),
    ("any_pass", 1.0, "passed"),
    ("weighted_average", 0.75, "failed"),
    (None, 0.5, "failed"),  # no aggregate: the mean of the verifiers
])
def test_run_score_from_aggregate_verifiers(hub, aggregator, score, status):
    run = hub.run(_scored(aggregator))
    assert run["score"] == pytest.approx(score)
    assert run["status"] == status
    assert run["verifications"]["v1"]["score"] == 1.0 and run["verifications"]["v2"]["score"] == 0.0


# -- the event log ----------------------------------------------------------------------------
def test_the_final_status_and_run_finished_are_seen_together(hub, monkeypatch):
    """A reader that sees a run's final status finds its run.finished event too: the record and the event are
    written in one store write. They were written one after the other, and a client polling the status could
    query the events in between (seen under load in the suite). Here each write's confirmation reaches the
    runner late, as on a loaded machine, which held that gap open."""
    import concurrent.futures
    import threading

    writer = hub.store.writer
    submit = writer.submit

    def confirmed_late(fn, *args, **kwargs):
        written = submit(fn, *args, **kwargs)
        late: concurrent.futures.Future = concurrent.futures.Future()

        def confirm(done: concurrent.futures.Future) -> None:
            error = done.exception()
            threading.Timer(0.3, late.set_exception if error else late.set_result,
                            [error if error else done.result()]).start()

        written.add_done_callback(confirm)
        return late

    monkeypatch.setattr(writer, "submit", confirmed_late)
    run_id = hub.submit(hub.task([deploy(), bash_check("a", "true", sandbox_name="box")]))
    while (run := hub.store.runs.get(run_id))["status"] not in ("passed", "failed", "error"):
        pass
    assert run["status"] == "passed"
    assert "run.finished" in [e["kind"] for e in hub.store.events.query(run_id)]


def test_a_cancel_that_comes_as_the_run_ends_leaves_it_as_it_ended(hub):
    """The command waiting on a run leaves the moment it reads run.finished, and the hub cancels what that
    command still waits on: the run it just saw end must stay passed, not turn interrupted."""
    import asyncio

    runner = hub.session.hub.runner
    cancels: list[bool] = []

    def cancel_on_finish(event: dict) -> None:
        if event["kind"] == "run.finished":
            future = asyncio.run_coroutine_threadsafe(_cancel(runner, event["run_id"]), runner.loop)
            future.add_done_callback(lambda f: cancels.append(f.result()))

    unsubscribe = hub.store.events.subscribe(cancel_on_finish)
    try:
        run = hub.run([deploy(), bash_check("a", "true", sandbox_name="box")])
        wait_until(lambda: cancels, what="the cancel to be answered")
    finally:
        unsubscribe()
    assert cancels == [False]  # nothing left to cancel: it had ended
    assert hub.store.runs.get(run["run_id"])["status"] == "passed"


async def _cancel(runner, run_id: str) -> bool:
    return runner.cancel(run_id, "the command that started it stopped before it finished", interrupted=True)


def test_events_of_a_run_are_queryable_after_it_ends(hub):
    run = hub.run([deploy(), bash_check("a", "true", sandbox_name="box"), bash_check("b", "true", sandbox_name="box")])
    assert run["status"] == "passed"
    events = hub.store.events.query(run["run_id"])
    kinds = [(e["kind"], e["step_id"]) for e in events if e["kind"].startswith(("run.", "step.started",
                                                                                "step.finished"))]
    assert kinds == [
        ("run.queued", None), ("run.started", None),
        ("step.started", "box"), ("step.finished", "box"),
        ("step.started", "a"), ("step.finished", "a"),
        ("step.started", "b"), ("step.finished", "b"),
        ("run.finished", None),
    ]
    ids = [e["event_id"] for e in events]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert events[-1]["body"]["status"] == "passed"
    assert {e["run_id"] for e in events} == {run["run_id"]}
    assert hub.store.events.query(run["run_id"], kinds=["step.finished"])[0]["body"]["status"] == "passed"


def test_a_retry_does_not_run_again_a_step_outside_its_span(hub, tmp_path):
    """`other` runs alongside the flaky step and finishes while the runner handles the failure."""
    put_artifact(hub.store, "flaky", {"flaky.py": FLAKY.encode()})
    other = tmp_path / "other"
    run = hub.run([
        deploy(),
        # Finishes only once the flaky step's first attempt has failed (it leaves its marker).
        bash_check("other", f"{gate(tmp_path / 'flaky.marker', 20)} && sleep 0.3 && echo ran >> {_q(other)}",
                   sandbox_name="box", depends_on=["box"]),
        _flaky_step("flaky", tmp_path, depends_on=["box"], retry_config={"max_retries": 1}),
    ])
    assert run["status"] == "passed", run.get("error")
    assert _lines(tmp_path / "flaky.attempts") == 2
    assert _lines(other) == 1


def test_resume_of_a_run_that_ended_in_error_redeploys_what_its_teardown_removed(hub, tmp_path):
    put_artifact(hub.store, "flaky", {"flaky.py": FLAKY.encode()})
    put_artifact(hub.store, "note", {"note.txt": b"hello"})
    prep = tmp_path / "prep"
    task_id = hub.task([
        deploy(),
        {"id": "load", "type": "load_artifact", "artifact_id": "note", "sandbox_name": "box"},
        {"id": "prep", "type": "run_code", "script_artifact_id": "flaky", "depends_on": [],
         "args": {"attempts": str(prep), "marker": str(tmp_path / "prep.marker"), "always_fail": False}},
        _flaky_step("flaky", tmp_path, depends_on=["load", "prep"]),
        {"id": "check", "type": "verify_sandbox", "sandbox_name": "box",
         "criteria": [{"type": "probe_file_contains", "paths": ["note.txt"], "expected": "hello"}]},
    ])
    (tmp_path / "prep.marker").touch()  # prep passes at once
    first = hub.wait(hub.submit(task_id))
    assert first["status"] == "error" and sandbox_folders(hub.root) == []
    hub.session.call("runner.resume", run_id=first["run_id"])
    again = hub.wait(first["run_id"])
    assert again["status"] == "passed", again.get("error")
    assert again["score"] == 1.0
    assert _lines(prep) == 1  # outside the sandbox, done: not run again
    assert _lines(tmp_path / "flaky.attempts") == 2
    assert len(again["context"]["deployed_sandboxes"]) == 2  # the box again, after its teardown
    assert sandbox_folders(hub.root) == []
