"""SVG snapshots of every screen, from a fixed data source and a frozen clock (deterministic).

Update them after an intended change with: pytest tests/tui --snapshot-update
"""

from __future__ import annotations

import pytest
from fake_source import DEMO_ID, HUMAN_ID, OFFICE_ID, T0, FakeSource

from tui.app import AgentenvTui
from tui.clock import FixedClock

SIZE = (100, 32)


def make_app(open_run: str | None = None, dark: bool = True) -> AgentenvTui:
    app = AgentenvTui(FakeSource(), clock=FixedClock(T0), open_run=open_run)
    if not dark:
        app.theme = "textual-light"
    return app


async def settle(pilot) -> None:
    await pilot.pause(0.3)
    await pilot.app.workers.wait_for_complete()
    await pilot.pause(0.1)


def test_runs_screen(snap_compare):
    assert snap_compare(make_app(), terminal_size=SIZE, run_before=settle)


def test_runs_screen_80x24_light(snap_compare):
    assert snap_compare(make_app(dark=False), terminal_size=(80, 24), run_before=settle)


def test_runs_filtered(snap_compare):
    async def before(pilot):
        await settle(pilot)
        await pilot.press("slash", *"status:running", "enter")
        await pilot.pause(0.1)
    assert snap_compare(make_app(), terminal_size=SIZE, run_before=before)


def test_start_dialog(snap_compare):
    async def before(pilot):
        await settle(pilot)
        await pilot.press("n", *"hello", "tab")
        await pilot.pause(0.1)
    assert snap_compare(make_app(), terminal_size=SIZE, run_before=before)


def test_help_screen(snap_compare):
    async def before(pilot):
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause(0.2)
    assert snap_compare(make_app(), terminal_size=SIZE, run_before=before)


def test_run_dag(snap_compare):
    assert snap_compare(make_app(DEMO_ID), terminal_size=SIZE, run_before=settle)


def test_run_dag_80x24_light(snap_compare):
    assert snap_compare(make_app(DEMO_ID, dark=False), terminal_size=(80, 24), run_before=settle)


def test_step_detail(snap_compare):
    async def before(pilot):
        await settle(pilot)
        await pilot.press("down", "enter")  # box -> lint (the nearest below)
        await settle(pilot)
    assert snap_compare(make_app(DEMO_ID), terminal_size=SIZE, run_before=before)


@pytest.mark.parametrize("tab", ["2", "3", "4"])
def test_office_tabs(snap_compare, tab):
    async def before(pilot):
        await settle(pilot)
        await pilot.press(tab)
        await settle(pilot)
    assert snap_compare(make_app(OFFICE_ID), terminal_size=SIZE, run_before=before)


def test_human_and_review(snap_compare):
    async def before(pilot):
        await settle(pilot)
        await pilot.press("5")
        await settle(pilot)
    assert snap_compare(make_app(HUMAN_ID), terminal_size=SIZE, run_before=before)
