"""The runs screen on a real hub: the list, live updates, the filter, starting runs (k, concurrency),
cancelling and resuming, and opening a run (keyboard and mouse)."""

from __future__ import annotations

import pytest
from kits.hub import write_bundle
from kits.tui import (
    SIZE,
    InProcessHub,
    app_on,
    bash_check,
    close_hub,
    deploy,
    gated_steps,
    run,
    table_rows,
    until,
)

from tui.screens.run import RunScreen
from tui.screens.runs import RunsScreen


@pytest.fixture
def hub(tmp_path, monkeypatch):
    project = tmp_path / "proj"
    project.mkdir()
    monkeypatch.chdir(project)
    h = InProcessHub(project)
    yield h
    close_hub(h)


def _status(app, run_id):
    return (app.runs.rows.get(run_id) or {}).get("status")


def test_the_list_starts_empty_then_follows_a_run_live(hub, tmp_path):
    release = tmp_path / "release"

    async def scenario():
        app = app_on(hub)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "No runs yet" in str(app.screen.query_one("#runs-hint").render()))
            run_id = hub.submit(hub.task(gated_steps(release)))
            await until(pilot, lambda: _status(app, run_id) == "running", what="the run to show as running")
            assert any(run_id in row for row in table_rows(app))
            release.touch()
            await until(pilot, lambda: _status(app, run_id) == "passed", what="the run to show as passed")
            row = next(r for r in table_rows(app) if r[2] == run_id)
            assert "passed" in row[0] and row[5] == "1"
    run(scenario())


def test_filter_by_words_and_status(hub):
    ok = hub.run([deploy(), bash_check("ok", "true", sandbox_name="box")])
    bad = hub.run([deploy(), bash_check("no", "false", sandbox_name="box")])
    assert (ok["status"], bad["status"]) == ("passed", "failed")

    async def scenario():
        app = app_on(hub)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: len(table_rows(app)) == 2)
            await pilot.press("slash", *"status:failed")
            await until(pilot, lambda: [r[2] for r in table_rows(app)] == [bad["run_id"]])
            await pilot.press("escape")  # clears the filter
            await until(pilot, lambda: len(table_rows(app)) == 2)
            await pilot.press("slash", *ok["run_id"][-8:], "enter")
            await until(pilot, lambda: [r[2] for r in table_rows(app)] == [ok["run_id"]])
    run(scenario())


def test_start_a_bundle_k_times_with_a_concurrency(hub):
    write_bundle(hub.root, "quick", {"quick": [deploy(), bash_check("ok", "true", sandbox_name="box")]})

    async def scenario():
        app = app_on(hub)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("n")
            await until(pilot, lambda: app.screen.query_one("#target"))
            await pilot.press(*"./quick")
            k = app.screen.query_one("#k")
            k.value = "3"
            app.screen.query_one("#concurrency").value = "2"
            await pilot.click("#start")
            await until(pilot, lambda: len(app.runs.rows) == 3 and all(
                r["status"] == "passed" for r in app.runs.rows.values()), what="3 runs to pass")
            assert app.launcher.concurrency == 2
            assert len(app.launcher.started) == 3
            assert isinstance(app.screen, RunsScreen)
    run(scenario())


def test_start_dialog_says_what_is_wrong(hub):
    async def scenario():
        app = app_on(hub)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("n")
            await until(pilot, lambda: app.screen.query_one("#target"))
            await pilot.press("enter")
            await until(pilot, lambda: "name what to run" in str(app.screen.query_one("#start-error").render()))
            await pilot.press(*"no-such-bundle", "enter")
            await until(pilot, lambda: isinstance(app.screen, RunsScreen))
            await until(pilot, lambda: any("no-such-bundle" in str(n.message) for n in app._notifications),
                        what="an error notification")
    run(scenario())


def test_cancel_then_resume_from_the_list(hub, tmp_path):
    release = tmp_path / "release"

    async def scenario():
        app = app_on(hub)
        async with app.run_test(size=SIZE) as pilot:
            run_id = hub.submit(hub.task(gated_steps(release)))
            await until(pilot, lambda: _status(app, run_id) == "running")
            await pilot.press("c")
            await until(pilot, lambda: _status(app, run_id) == "cancelled", what="the run to be cancelled")
            release.touch()
            await pilot.press("r")
            await until(pilot, lambda: _status(app, run_id) == "passed", what="the resumed run to pass")
            assert hub.store.runs.get(run_id)["generation"] >= 1
    run(scenario())


def test_open_a_run_with_enter_and_with_the_mouse(hub):
    done = hub.run([deploy(), bash_check("ok", "true", sandbox_name="box")])

    async def scenario():
        app = app_on(hub)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: len(table_rows(app)) == 1)
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.state.record)
            assert app.screen.run_id == done["run_id"]
            await pilot.press("escape")
            await until(pilot, lambda: isinstance(app.screen, RunsScreen))
            await pilot.click("#runs", offset=(20, 1))  # the first row (row 0 is the header)
            await pilot.click("#runs", offset=(20, 1))
            await until(pilot, lambda: isinstance(app.screen, RunScreen), what="a click to open the run")
    run(scenario())
