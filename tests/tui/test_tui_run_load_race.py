"""A run screen that opens while the run moves on: events that come in after the screen read the run's history
but before it finished loading are applied, not lost (a step that started then shows running)."""

from __future__ import annotations

import asyncio
import time

from fake_source import DEMO_ID, T0, FakeSource

from tui.app import AgentenvTui
from tui.clock import FixedClock
from tui.screens.run import RunScreen


class _MovingSource(FakeSource):
    """Reads the history, then the `check` step starts (a live event) before the screen has loaded."""

    def run_events(self, run_id, after_id=0):
        history = super().run_events(run_id, after_id)
        if run_id == DEMO_ID and after_id == 0:
            started = {"event_id": 999, "run_id": DEMO_ID, "kind": "step.started", "step_id": "check", "at": T0,
                       "body": {"type": "verify_sandbox", "index": 5}}
            self.stream.queue.put(started)
            time.sleep(0.5)  # the live event reaches the screen before this history does
        return history


def test_events_that_come_while_the_run_loads_are_not_lost():
    async def scenario():
        app = AgentenvTui(_MovingSource(), clock=FixedClock(T0), open_run=DEMO_ID)
        async with app.run_test(size=(100, 32)) as pilot:
            deadline = time.monotonic() + 20
            while not (isinstance(app.screen, RunScreen) and app.screen._loaded):
                assert time.monotonic() < deadline
                await pilot.pause(0.05)
            await pilot.pause(0.2)
            assert app.screen.state.steps["check"]["status"] == "running"
            assert app.screen.state.last_event_id == 999

    asyncio.run(scenario())


class _ReloadCrossesAStepEnd(FakeSource):
    """The `load` step finishes (event 20, which makes the screen reload the record); while that reload reads the
    record, `check` starts and finishes (events 21, 22, live). As the hub's store does, each record read shows
    the events published before it: the reload's shows `load` passed but not yet `check`."""

    def __init__(self) -> None:
        super().__init__()
        self.details = 0

    def run_detail(self, run_id):
        record = super().run_detail(run_id)
        if run_id != DEMO_ID:
            return record
        self.details += 1
        if self.details >= 2:  # a reload, after event 20
            record["steps"]["load"].update(status="passed", duration_s=12.0)
        if self.details == 2:
            for event_id, kind, status in ((21, "step.started", None), (22, "step.finished", "passed")):
                body = {"type": "verify_sandbox"} | ({"status": status, "duration_s": 0.1} if status else {})
                self.stream.queue.put({"event_id": event_id, "run_id": DEMO_ID, "kind": kind, "step_id": "check",
                                       "at": T0, "body": body})
            time.sleep(0.5)  # the live events reach the screen while this read is still in flight
        if self.details >= 3:  # read after events 21 and 22
            record["steps"]["check"].update(status="passed", duration_s=0.1)
        return record


def test_a_reload_that_crosses_live_events_keeps_them():
    """Seen in the suite under load: the human-agent TUI test waited 60 s for a question while the screen showed a
    finished step as running for good. A reload's record, read while later events came live, overwrote what those
    events had shown, and the reload asked for meanwhile was dropped."""
    source = _ReloadCrossesAStepEnd()

    async def scenario():
        app = AgentenvTui(source, clock=FixedClock(T0), open_run=DEMO_ID)
        async with app.run_test(size=(100, 32)) as pilot:
            deadline = time.monotonic() + 20
            while not (isinstance(app.screen, RunScreen) and app.screen._loaded):
                assert time.monotonic() < deadline
                await pilot.pause(0.05)
            screen = app.screen
            source.stream.queue.put({"event_id": 20, "run_id": DEMO_ID, "kind": "step.finished", "step_id": "load",
                                     "at": T0, "body": {"status": "passed", "duration_s": 12.0,
                                                        "type": "load_artifact"}})
            while source.details < 3 or screen._refreshing:  # the second reload: asked for during the first
                if time.monotonic() > deadline:
                    raise AssertionError(f"{source.details} record reads; the screen shows {screen.state.steps}")
                await pilot.pause(0.05)
            await pilot.pause(0.2)
            steps = screen.state.steps
            assert (steps["load"]["status"], steps["check"]["status"]) == ("passed", "passed")
            assert source.details == 3

    asyncio.run(scenario())
