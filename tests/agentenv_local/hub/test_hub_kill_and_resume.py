"""`kill -9` in the middle of a run: of the process that is the hub, and of a client of a
long-lived hub. Nothing stored before the kill is lost and `agentenv runs resume` finishes the run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kits.hub import (
    Background,
    InProcessHub,
    bash_check,
    cli,
    deploy,
    gate,
    hub_info,
    run_id_of,
    runs_json,
    sandbox_folders,
    show_json,
    step_status,
    wait_until,
    write_bundle,
)

from agentenv_local.tasks.journal import journal_state


def _crashy_bundle(project: Path, tmp_path: Path) -> tuple[Path, Path, Path]:
    """deploy -> count (appends to a counter) -> wait (for the release file) -> after (appends)."""
    counter, after, release = tmp_path / "counter", tmp_path / "after", tmp_path / "release"
    write_bundle(project, "crashy", {"crashy": [
        deploy(),
        bash_check("count", f"echo ran >> {counter}", sandbox_name="box"),
        bash_check("wait", gate(release, 120), sandbox_name="box"),
        bash_check("after", f"echo ran >> {after}", sandbox_name="box"),
    ]})
    return counter, after, release


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not reaped by its new parent) is not alive
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def test_kill9_of_the_hub_mid_run_then_resume(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    # History from before the crash: a passed run and two versions of an artifact.
    cli(project, "run", "hello", check=True)
    note = tmp_path / "note.txt"
    for text in ("one", "two"):
        note.write_text(text)
        cli(project, "artifact", "put", str(note), "--id", "note", check=True)
    hello_run = runs_json(project)[0]
    counter, after, release = _crashy_bundle(project, tmp_path)

    run = Background(project, "run", "./crashy")
    try:
        wait_until(lambda: (hub_info(project) or {}).get("pid") == run.pid, what="`agentenv run` to be the hub")
        run_id = run_id_of(run, project, "crashy")
        wait_until(lambda: step_status(show_json(project, run_id), "wait") == "running",
                   what="the run to reach its slow step")
        run.kill9()
    finally:
        run.stop()
    assert run.proc.returncode == -9
    state = project / ".agentenv"
    assert (state / "hub.sock").exists() and (state / "hub.json").exists()  # left behind by the killed hub
    assert _lines(counter) == 1

    # The next command finds no hub (the lock died with its holder), cleans up and becomes it.
    rows = {r["run_id"]: r for r in runs_json(project)}
    assert rows[run_id]["status"] == "interrupted"
    assert rows[hello_run["run_id"]]["status"] == "passed"
    assert not (state / "hub.sock").exists()  # that command was the hub and left cleanly
    shown = cli(project, "runs", "show", run_id, check=True).stdout
    assert "status    interrupted" in shown and f"agentenv runs resume {run_id}" in shown
    interrupted = show_json(project, run_id)
    assert step_status(interrupted, "box") == "passed" and step_status(interrupted, "count") == "passed"
    assert step_status(interrupted, "wait") == "interrupted" and step_status(interrupted, "after") == "waiting"
    assert interrupted["current_step"] is None
    for version, text in ((1, "one"), (2, "two")):
        out = tmp_path / f"v{version}"
        cli(project, "artifact", "get", "--id", "note", "--version", str(version), "--output-dir", str(out),
            check=True)
        assert (out / "note.txt").read_text() == text

    # The journal kept every step that finished before the kill, with the state after it.
    hub = InProcessHub(project)
    try:
        journal = hub.store.runs.journal(run_id)
        events = [e["kind"] for e in hub.store.events.query(run_id)]
    finally:
        hub.close()
    assert [(e["step_id"], e["status"]) for e in journal] == [("__seed__", "seed"), ("box", "success"),
                                                              ("count", "success")]
    assert [s["sandbox_name"] for s in journal_state(journal)["deployed_sandboxes"]] == ["box"]
    # each step's entry holds what it changed (tasks/journal.py), not the whole state again
    assert set(journal[-1]["body"]["state_changes"]) < set(journal[0]["body"]["state"])
    assert events[:2] == ["run.queued", "run.started"] and "run.interrupted" in events
    assert len(sandbox_folders(project)) == 1  # the box deployed before the kill, owed a teardown

    release.touch()
    resumed = cli(project, "runs", "resume", run_id[:-2])
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "passed" in resumed.stdout
    final = show_json(project, run_id)
    assert final["status"] == "passed" and final["generation"] == 1
    assert {step_status(final, s) for s in ("box", "count", "wait", "after")} == {"passed"}
    assert _lines(counter) == 1  # the steps done before the kill did not run again
    assert _lines(after) == 1
    assert sandbox_folders(project) == []  # resume tore down what the first attempt deployed
    assert runs_json(project)[0]["run_id"] == run_id
    # Resuming a passed run is refused with a clear message.
    again = cli(project, "runs", "resume", run_id)
    assert again.returncode == 1 and "already passed" in again.stderr


@pytest.fixture
def long_lived_hub(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    started = cli(project, "up", "--detach", check=True)
    assert "Hub running in the background" in started.stdout
    pid = hub_info(project)["pid"]
    yield project, pid
    if pid_alive(pid):
        cli(project, "down", timeout=30)
    if pid_alive(pid):
        os.kill(pid, 9)


def test_kill9_of_a_client_of_a_long_lived_hub(long_lived_hub, tmp_path):
    project, hub_pid = long_lived_hub
    counter, after, release = _crashy_bundle(project, tmp_path)

    # `up --detach` again is fine; `up` in the foreground while one runs is an error.
    again = cli(project, "up", "--detach", check=True)
    assert "already running" in again.stdout and str(hub_pid) in again.stdout
    clash = cli(project, "up", timeout=30)
    assert clash.returncode == 1
    assert "already running" in clash.stderr and "agentenv down" in clash.stderr

    run = Background(project, "run", "./crashy")
    try:
        run_id = run_id_of(run, project, "crashy")
        wait_until(lambda: step_status(show_json(project, run_id), "wait") == "running",
                   what="the run to reach its slow step")
        run.kill9()
    finally:
        run.stop()
    # The hub saw its client go and interrupted the run (no teardown: resume needs the sandbox).
    wait_until(lambda: runs_json(project)[0]["status"] == "interrupted", what="the run to be interrupted")
    assert pid_alive(hub_pid) and hub_info(project)["pid"] == hub_pid
    interrupted = show_json(project, run_id)
    assert step_status(interrupted, "wait") == "interrupted" and step_status(interrupted, "after") == "waiting"
    assert len(sandbox_folders(project)) == 1
    assert _lines(counter) == 1

    release.touch()
    resumed = cli(project, "runs", "resume", run_id)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    final = show_json(project, run_id)
    assert final["status"] == "passed" and final["generation"] == 1
    assert _lines(counter) == 1 and _lines(after) == 1
    assert sandbox_folders(project) == []
    assert final["owner"].split("-")[0] == str(hub_pid)  # the long-lived hub ran both attempts

    down = cli(project, "down", check=True)
    assert f"Hub stopped (pid {hub_pid})" in down.stdout
    wait_until(lambda: not pid_alive(hub_pid), timeout=30, what="the hub process to exit")
    state = project / ".agentenv"
    assert not (state / "hub.sock").exists() and not (state / "hub.json").exists()
    none = cli(project, "down", check=True)
    assert "No hub is running" in none.stdout
    # With the hub gone, a command becomes the hub again and sees everything.
    assert [r["status"] for r in runs_json(project)] == ["passed"]


def test_down_marks_runs_it_stops_interrupted_and_resume_finishes_them(long_lived_hub, tmp_path):
    project, hub_pid = long_lived_hub
    counter, after, release = _crashy_bundle(project, tmp_path)
    run = Background(project, "run", "./crashy")
    try:
        run_id = run_id_of(run, project, "crashy")
        wait_until(lambda: step_status(show_json(project, run_id), "wait") == "running",
                   what="the run to reach its slow step")
        cli(project, "down", check=True)
        rc = run.wait(60)
    finally:
        run.stop()
    assert rc == 1
    assert "hub stopped" in (run.stdout + run.stderr).lower() or "interrupted" in run.stdout
    wait_until(lambda: not pid_alive(hub_pid), timeout=30, what="the hub process to exit")
    assert runs_json(project)[0]["status"] == "interrupted"
    release.touch()
    assert cli(project, "runs", "resume", run_id).returncode == 0
    assert show_json(project, run_id)["status"] == "passed"
    assert _lines(counter) == 1 and sandbox_folders(project) == []


def test_cancel_closes_an_interrupted_run_and_tears_down_what_it_left(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    counter, after, release = _crashy_bundle(project, tmp_path)
    run = Background(project, "run", "./crashy")
    try:
        wait_until(lambda: (hub_info(project) or {}).get("pid") == run.pid, what="`agentenv run` to be the hub")
        run_id = run_id_of(run, project, "crashy")
        wait_until(lambda: step_status(show_json(project, run_id), "wait") == "running", what="the slow step")
        run.kill9()
    finally:
        release.touch()
        run.stop()
    assert runs_json(project)[0]["status"] == "interrupted"
    assert len(sandbox_folders(project)) == 1
    closed = cli(project, "runs", "cancel", run_id, check=True)
    assert f"{run_id}: cancelled" in closed.stdout
    final = show_json(project, run_id)
    assert final["status"] == "cancelled"
    assert step_status(final, "after") == "skipped"
    assert sandbox_folders(project) == []
    assert _lines(after) == 0


def test_up_while_another_command_is_the_hub_says_so(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    counter, after, release = _crashy_bundle(project, tmp_path)
    run = Background(project, "run", "./crashy")
    try:
        wait_until(lambda: (hub_info(project) or {}).get("pid") == run.pid, what="`agentenv run` to be the hub")
        for args in (("up", "--detach"), ("up",)):
            proc = cli(project, *args, timeout=30)
            assert proc.returncode == 1, proc.stdout + proc.stderr
            assert str(run.pid) in proc.stderr
        release.touch()
        run.expect(0)
    finally:
        release.touch()
        run.stop()
    assert "No hub is running" in cli(project, "down", check=True).stdout
