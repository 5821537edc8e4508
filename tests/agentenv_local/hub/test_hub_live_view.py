"""While `agentenv run` runs a task in one terminal, `runs list` / `runs show` in another see it live."""

from __future__ import annotations

from kits.hub import (
    Background,
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


def test_another_process_sees_a_run_and_its_steps_live(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    release = tmp_path / "release"
    write_bundle(project, "slowbundle", {"slow": [
        deploy(),
        {"id": "load", "type": "load_artifact", "artifact_id": "note", "sandbox_name": "box",
         "destination_path": "/app/in"},
        bash_check("wait", gate(release), sandbox_name="box"),
        bash_check("after", "test -f /app/in/note.txt", sandbox_name="box"),
    ]}, artifacts={"note": {"note.txt": "hello"}})

    run = Background(project, "run", "./slowbundle")
    try:
        # The run's command is the hub (it found none); everything below goes through it.
        wait_until(lambda: (hub_info(project) or {}).get("pid") == run.pid, what="`agentenv run` to be the hub")
        run_id = run_id_of(run, project, "slow")

        rows = wait_until(lambda: [r for r in runs_json(project) if r["status"] == "running"],
                          what="runs list to show the run running")
        assert [r["run_id"] for r in rows] == [run_id]

        live = wait_until(lambda: (r := show_json(project, run_id)) and step_status(r, "wait") == "running" and r,
                          what="runs show to show the sleeping step running")
        assert live["status"] == "running"
        assert step_status(live, "box") == "passed"
        assert step_status(live, "load") == "passed"
        assert step_status(live, "after") == "waiting"
        assert live["current_step"] == "wait"

        # The human view says the same, and a unique prefix of the run id is enough.
        text = cli(project, "runs", "show", run_id[:-3], check=True).stdout
        assert "status    running" in text
        assert any(line.split()[:2] == ["running", "wait"] for line in text.splitlines())
        assert run.alive()
        assert sandbox_folders(project)  # the box is up while the run goes

        release.touch()
        run.expect(0)
    finally:
        release.touch()
        run.stop()

    done = show_json(project, run_id)
    assert done["status"] == "passed"
    assert {step_status(done, s) for s in ("box", "load", "wait", "after")} == {"passed"}
    assert "passed" in run.stdout and run_id in run.stdout
    assert runs_json(project)[0]["status"] == "passed"
    assert sandbox_folders(project) == []
    assert not (project / ".agentenv" / "hub.sock").exists()  # the last hub left cleanly
