"""What the cookbook page tests (tests/docs/test_docs_cookbook_escalation.py, test_cookbook_accounts_payable.py)
do beyond running a command: give a project a `[model]` answered by the local wire-format model server (for the
pages' `--agent tool-loop` runs), and open a recorded run in the TUI's app in this process (for `agentenv tui
--run RUN`, which is interactive)."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def model_in_project(project: Path, script: list[Any], api_key: str) -> Iterator[Any]:
    """Serve `script` (one reply per model call) and write the server in as the project's `[model]`, the way the
    pages tell a reader to; yields the FakeModelServer (its `.requests` are the calls it got)."""
    from agentenv_local.testing.fake_models import FakeModelServer

    with FakeModelServer(api_key=api_key, script=script) as server:
        state = project / ".agentenv"
        state.mkdir(exist_ok=True)
        (state / "config.toml").write_text(
            f'[model]\nbase_url = "{server.base_url}"\napi_key = "{api_key}"\ndefault = "fake-model"\n')
        yield server


def open_run_in_tui(project: Path, run_id: str, monkeypatch: Any,
                    scenario: Callable[[Any, Any], Awaitable[None]]) -> None:
    """`agentenv tui --run RUN` in the project, in this process: the app opens the run's screen, then
    `scenario(pilot, screen)` presses keys and checks what the screen holds."""
    from kits.servers import run
    from kits.tui import SIZE, until
    from tui.app import AgentenvTui
    from tui.data import HubSource
    from tui.screens.run import RunScreen

    monkeypatch.chdir(project)
    source = HubSource.connect(start=project)

    async def main() -> None:
        app = AgentenvTui(source, open_run=run_id)
        async with app.run_test(size=SIZE) as pilot:
            screen = await until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.state.record
                                 and app.screen)
            await scenario(pilot, screen)
    try:
        run(main())
    finally:
        source.close()
