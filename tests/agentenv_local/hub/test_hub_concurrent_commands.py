"""Two (or more) `agentenv` commands at once in one project: all succeed, one of them is the hub."""

from __future__ import annotations

import json

from kits.hub import (
    Background,
    bash_check,
    cli,
    deploy,
    gate,
    hub_info,
    runs_json,
    sandbox_folders,
    wait_until,
    write_bundle,
)


def _owner_pid(run: dict) -> int:
    return int(run["owner"].split("-")[0])


def _gated_bundle(project, release):
    return write_bundle(project, "gated", {"gated": [
        deploy(),
        bash_check("wait", gate(release), sandbox_name="box"),
    ]})


def test_two_runs_started_together_both_pass_through_one_hub(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    release = tmp_path / "release"
    _gated_bundle(project, release)

    first = Background(project, "run", "./gated")
    second = Background(project, "run", "./gated")
    try:
        pids = {first.pid, second.pid}
        hub = wait_until(lambda: (hub_info(project) or {}).get("pid") in pids and hub_info(project),
                         what="one of the two commands to become the hub")
        # Both runs are going at the same time (each waits for the release).
        running = wait_until(lambda: len(rows := [r for r in runs_json(project) if r["status"] == "running"]) == 2
                             and rows, what="both runs to be running")
        assert {_owner_pid(r) for r in running} == {hub["pid"]}
        assert first.alive() and second.alive()
        release.touch()
        first.expect(0)
        second.expect(0)
    finally:
        release.touch()
        first.stop()
        second.stop()

    rows = runs_json(project)
    assert len(rows) == 2
    assert {r["status"] for r in rows} == {"passed"}
    # Exactly one became the hub: both runs were executed by the same hub session, in one of them.
    assert len({r["owner"] for r in rows}) == 1
    assert _owner_pid(rows[0]) in {first.pid, second.pid}
    for proc in (first, second):
        assert ": passed (wait: 1)" in proc.stdout
    assert sandbox_folders(project) == []


def test_run_and_artifact_put_at_once_both_succeed(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    release = tmp_path / "release"
    _gated_bundle(project, release)
    note = tmp_path / "note.txt"
    note.write_text("first")

    # Started together: whichever takes the lock is the hub, the other goes through it. (If the
    # put is the hub, it stays up after its own work until the run it serves is over.)
    run = Background(project, "run", "./gated")
    put = Background(project, "artifact", "put", str(note), "--id", "note")
    try:
        hub = wait_until(lambda: (hub_info(project) or {}).get("pid") in {run.pid, put.pid} and hub_info(project),
                         what="one of the two to become the hub")
        # The put's own work is done (and said so) even while it may still be serving the run.
        wait_until(lambda: "Created file note v1" in put.stdout, what="the put to say it is done")
        # While the run goes (the hub holds the store), another put goes through the hub.
        wait_until(lambda: [r for r in runs_json(project) if r["status"] == "running"], what="the run to be running")
        # The hub serving the run now: the first one, or, when the put was the hub and finished before the run
        # reached it, the run itself (it then found no hub and took the lock).
        hub = hub_info(project)
        assert hub["pid"] in {run.pid, put.pid}
        note.write_text("second")
        cli(project, "artifact", "put", str(note), "--id", "note", check=True)
        assert run.alive()
        release.touch()
        run.expect(0)
        put.expect(0)
    finally:
        release.touch()
        run.stop()
        put.stop()

    rows = runs_json(project)
    assert [r["status"] for r in rows] == ["passed"]
    assert _owner_pid(rows[0]) == hub["pid"]
    listed = json.loads(cli(project, "artifact", "list", "--json", check=True).stdout)
    assert [(a["id"], a["version"]) for a in listed] == [("note", 2)]
    first = json.loads(cli(project, "artifact", "get", "--id", "note", "--version", "1", check=True).stdout)
    assert first["version"] == 1


def test_a_burst_of_commands_in_a_fresh_project_all_succeed(tmp_path):
    """Rounds of four commands at once (hub start, hand-over and shutdown races): every one exits 0."""
    project = tmp_path / "proj"
    project.mkdir()
    note = tmp_path / "note.txt"
    note.write_text("x")
    for round_no in range(3):
        procs = [
            Background(project, "run", "hello"),
            Background(project, "run", "hello"),
            Background(project, "artifact", "put", str(note), "--id", f"note{round_no}"),
            Background(project, "runs", "list", "--json"),
        ]
        try:
            for proc in procs:
                proc.expect(0, timeout=120)
        finally:
            for proc in procs:
                proc.stop()
    rows = runs_json(project)
    assert len(rows) == 6 and {r["status"] for r in rows} == {"passed"}
    assert not (project / ".agentenv" / "hub.sock").exists()


def test_a_hub_whose_command_is_done_prints_everything_then_serves_the_others(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    release_a, release_b = tmp_path / "release-a", tmp_path / "release-b"
    write_bundle(project, "a", {"a": [deploy(), bash_check("wait", gate(release_a), sandbox_name="box")]})
    write_bundle(project, "b", {"b": [deploy(), bash_check("wait", gate(release_b), sandbox_name="box")]})
    first = Background(project, "run", "./a")
    second = None
    try:
        wait_until(lambda: (hub_info(project) or {}).get("pid") == first.pid, what="the first run to be the hub")
        second = Background(project, "run", "./b")
        wait_until(lambda: len([r for r in runs_json(project) if r["status"] == "running"]) == 2,
                   what="both runs to be running")
        release_a.touch()
        # The first command's own run is over: its whole output is out, while it still serves b.
        wait_until(lambda: "Tore down 1 sandbox." in first.stdout, what="the hub's command to print its summary")
        assert "a.json v1: passed" in first.stdout
        assert first.alive() and second.alive()
        assert [r["status"] for r in runs_json(project) if r["task_name"] == "b"] == ["running"]
        release_b.touch()
        second.expect(0)
        first.expect(0)
    finally:
        release_a.touch()
        release_b.touch()
        first.stop()
        if second is not None:
            second.stop()
    assert {r["status"] for r in runs_json(project)} == {"passed"}


def test_a_short_command_that_is_the_hub_prints_its_result_before_serving_others(tmp_path):
    """`artifact put` prints after its session closes; as the hub with a client, it still prints
    at once and only then stays up for the client."""
    from kits.hub import clean_env

    from agentenv_local.config import load_config
    from agentenv_local.hub import connect

    project = tmp_path / "proj"
    (project / ".agentenv").mkdir(parents=True)
    big = tmp_path / "big"
    big.mkdir()
    for i in range(1500):  # enough files that the put takes a moment
        (big / f"f{i}.txt").write_text(f"file {i}\n")
    put = Background(project, "artifact", "put", str(big), "--id", "big")
    client = None
    try:
        wait_until(lambda: (hub_info(project) or {}).get("pid") == put.pid, what="the put to be the hub")
        client = connect(start=project, config=load_config(project, environ=clean_env()), become_hub=False)
        assert not client.is_hub
        wait_until(lambda: "Created file_artifact_universe big v1 (1500 files" in put.stdout,
                   what="the put to print its result")
        assert put.alive()  # still up: it serves this client
        assert client.store.documents.find("artifacts", "big")["version"] == 1
    finally:
        if client is not None:
            client.close()
        put.expect(0)
