"""Helpers for the TUI's Pilot tests: a real in-process hub in a tmp project, the app on it, and
waiting for what the screen shows."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kits.hub import InProcessHub, bash_check, deploy, gate
from kits.servers import run  # noqa: F401 - the tests' helper
from tui.app import AgentenvTui
from tui.data import HubSource

SIZE = (100, 30)


async def until(pilot, predicate: Callable[[], Any], timeout: float = 60, what: str = "",
                explain: Callable[[], Any] | None = None) -> Any:
    """Let the app run until `predicate()` is truthy (checked between pauses); on a timeout the error shows
    `explain()` too (what the app saw meanwhile), so a failure says why, not only what."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
        except Exception as exc:  # a widget not mounted yet
            last = exc
        if last and not isinstance(last, Exception):
            return last
        await pilot.pause(0.05)
    seen = f"; the app saw: {explain()!r}" if explain else ""
    raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate} (last: {last!r}){seen}")



def app_on(hub: InProcessHub, **kwargs: Any) -> AgentenvTui:
    return AgentenvTui(HubSource(hub.session), **kwargs)


def gated_steps(release: Path) -> list[dict]:
    return [deploy(), bash_check("wait", gate(release), sandbox_name="box")]


def table_rows(app, selector: str = "#runs") -> list[list[str]]:
    from textual.widgets import DataTable

    table = app.screen.query_one(selector, DataTable)
    return [[str(getattr(c, "plain", c)) for c in table.get_row_at(i)] for i in range(table.row_count)]


def close_hub(hub: InProcessHub) -> None:
    """Cancel what still runs (a failed test may leave a run waiting on a gate), then close."""
    import time

    runner = hub.session.hub.runner
    for run_id in list(runner.active):
        try:
            hub.session.call("runner.cancel", run_id=run_id)
        except Exception:  # it may have just finished
            pass
    deadline = time.monotonic() + 20
    while runner.active and time.monotonic() < deadline:
        time.sleep(0.05)
    hub.close()
