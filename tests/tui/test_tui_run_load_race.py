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
