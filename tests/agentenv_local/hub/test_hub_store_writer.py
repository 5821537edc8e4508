"""The runner's store writes go through the store's writer thread (stores/writer.py), batched: many
runs in one hub still record complete journals and ordered events, and a hub killed with SIGKILL
loses no journal entry of a step it had reported finished, nor runs one again on resume."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from kits.hub import (
    Background,
    InProcessHub,
    bash_check,
    cli,
    deploy,
    gate,
    hub_info,
    runs_json,
    show_json,
    step_status,
    wait_until,
    write_bundle,
)

QUICK = ["s1", "s2", "s3", "s4"]


def _noop(step_id: str) -> dict:
    return {"id": step_id, "type": "teardown_sandboxes"}  # nothing deployed: a step that does nothing


def test_fifty_concurrent_runs_record_complete_journals_and_ordered_events(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    hub = InProcessHub(project)
    try:
        steps = [_noop(s) for s in ("a", "b", "c", "d", "e")]
        task_id = hub.task(steps)
        batches_before = hub.store.writer.batches
        run_ids = [hub.submit(task_id) for _ in range(50)]
        finished = [hub.wait(run_id, timeout=180) for run_id in run_ids]
        assert [r["status"] for r in finished] == ["passed"] * 50
        for run_id in run_ids:
            run = hub.store.runs.get(run_id)
            assert {s: step_status(run, s) for s in "abcde"} == {s: "passed" for s in "abcde"}
            journal = hub.store.runs.journal(run_id)
            assert [(e["step_id"], e["status"]) for e in journal] == \
                [("__seed__", "seed")] + [(s, "success") for s in "abcde"]
            assert [e["seq"] for e in journal] == list(range(1, 7))
            kinds = [(e["kind"], e["step_id"]) for e in hub.store.events.query(run_id)]
            expected = [("run.queued", None), ("run.started", None)]
            for s in "abcde":
                expected += [("step.started", s), ("step.finished", s)]
            assert [k for k in kinds if k[0] in ("run.queued", "run.started", "step.started", "step.finished")] \
                == expected
            assert kinds[-1] == ("run.finished", None)
        # Each run made 1 + 2 per step + 1 writes, all through the writer (how many share a commit depends
        # on timing: tests/stores/test_writer.py counts the batching deterministically).
        writes = 50 * (1 + 2 * 5 + 1)
        assert 0 < hub.store.writer.batches - batches_before <= writes
    finally:
        hub.close()


def _kill9(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)

    def gone() -> bool:
        try:
            return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0] == "Z"
        except (OSError, IndexError):
            return True
    wait_until(gone, timeout=30, what=f"process {pid} to die")


def test_sigkill_of_a_busy_hub_loses_no_reported_step_and_resume_runs_none_again(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    release = tmp_path / "release"
    k = 8
    write_bundle(project, "many", {"many": [
        deploy(), *[bash_check(s, "true", sandbox_name="box") for s in QUICK],
        bash_check("wait", gate(release, 120), sandbox_name="box"),
        bash_check("after", "true", sandbox_name="box"),
    ]})
    cli(project, "up", "--detach", check=True)
    hub_pid = hub_info(project)["pid"]
    client = Background(project, "run", "./many", "--k", str(k), "--concurrency", str(k))
    try:
        def all_waiting() -> list[dict] | None:
            rows = [r for r in runs_json(project) if r.get("task_name") == "many"]
            if len(rows) < k:
                return None
            shown = [show_json(project, r["run_id"]) for r in rows]
            return shown if all(step_status(r, "wait") == "running" for r in shown) else None
        reported = wait_until(all_waiting, timeout=180, interval=0.5, what="every run to reach its slow step")
        _kill9(hub_pid)
    finally:
        client.stop()
    finished_before = {r["run_id"]: [s for s in ("box", *QUICK) if step_status(r, s) == "passed"] for r in reported}
    assert all(steps == ["box", *QUICK] for steps in finished_before.values())

    # The next command becomes the hub and finds every reported step journaled, once, in order.
    assert {r["status"] for r in runs_json(project) if r["run_id"] in finished_before} == {"interrupted"}
    hub = InProcessHub(project)
    try:
        journals = {run_id: hub.store.runs.journal(run_id) for run_id in finished_before}
    finally:
        hub.close()
    for run_id, steps in finished_before.items():
        assert [e["step_id"] for e in journals[run_id]] == ["__seed__", *steps], run_id

    release.touch()
    for run_id in finished_before:
        resumed = cli(project, "runs", "resume", run_id, timeout=180)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    hub = InProcessHub(project)
    try:
        for run_id in finished_before:
            assert hub.store.runs.get(run_id)["status"] == "passed"
            entries = [e["step_id"] for e in hub.store.runs.journal(run_id)]
            # the steps reported before the kill were not run again; the rest ran once each
            assert entries == ["__seed__", "box", *QUICK, "wait", "after"], (run_id, entries)
    finally:
        hub.close()


class _RunsWithoutUpdateWith:
    """A store plugin's runs store that has only the interface's single calls (no update_with)."""

    def __init__(self, runs):
        self._runs = runs
        self.calls: list[str] = []

    def __getattr__(self, name: str):
        if name == "update_with":
            raise AttributeError(name)
        self.calls.append(name)
        return getattr(self._runs, name)


def test_a_store_without_writer_or_update_with_runs_the_same_inline(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    hub = InProcessHub(project)
    store = hub.store
    writer, runs = store.writer, store.runs
    plain = _RunsWithoutUpdateWith(runs)
    try:
        store.writer, store.runs = None, plain
        batches = writer.batches
        run = hub.run([_noop("a"), _noop("b")])
        assert run["status"] == "passed"
        assert {s: step_status(run, s) for s in "ab"} == {"a": "passed", "b": "passed"}
        assert [e["step_id"] for e in runs.journal(run["run_id"])] == ["__seed__", "a", "b"]
        assert writer.batches == batches  # nothing went through the writer
        assert "update" in plain.calls and "journal_append" in plain.calls
    finally:
        store.writer, store.runs = writer, runs
        hub.close()
