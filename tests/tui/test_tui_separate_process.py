"""A run started by `agentenv run` in another process (which becomes the hub); the TUI, a client of
that hub, shows its steps change state live."""

from __future__ import annotations

from kits.hub import (
    Background,
    bash_check,
    deploy,
    gate,
    run_id_of,
    write_bundle,
)
from kits.tui import SIZE, run, until

from tui.app import AgentenvTui
from tui.data import HubSource
from tui.screens.run import RunScreen


def test_the_tui_follows_a_run_of_another_process(tmp_path, monkeypatch):
    project = tmp_path / "proj"
    project.mkdir()
    release = tmp_path / "release"
    write_bundle(project, "gated", {"gated": [deploy(), bash_check("wait", gate(release, 120), sandbox_name="box"),
                                              bash_check("after", "true", sandbox_name="box")]})
    bg = Background(project, "run", "./gated")
    try:
        run_id = run_id_of(bg, project, "gated")
        monkeypatch.chdir(project)
        source = HubSource.connect(start=project)
        assert not source.session.is_hub  # the `agentenv run` process is the hub

        async def scenario():
            app = AgentenvTui(source)
            async with app.run_test(size=SIZE) as pilot:
                await until(pilot, lambda: run_id in app.runs.rows, what="the run in the list")
                await pilot.press("enter")
                screen = await until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.state.record
                                     and app.screen)

                def steps() -> dict:
                    return {k: v.get("status") for k, v in screen.state.steps.items()}

                await until(pilot, lambda: steps().get("wait") == "running", what="`wait` to be running")
                assert steps()["after"] == "waiting"
                release.touch()
                await until(pilot, lambda: steps()["wait"] == "passed", what="`wait` to pass")
                await until(pilot, lambda: steps()["after"] == "passed", what="`after` to pass")
                await until(pilot, lambda: app.runs.rows[run_id]["status"] == "passed")
        try:
            run(scenario())
        finally:
            source.close()
        bg.expect(0)
    finally:
        release.touch()
        bg.stop()
