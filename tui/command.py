"""`agentenv tui`: watch runs live in the terminal. Registered in the `agentenv_local.cli` entry-point group
(the core never imports `tui`); the Textual app is imported only when the command runs."""

from __future__ import annotations

import click

from agentenv_local.cli.commands import LazyCommand


@click.command("tui")
@click.option("--run", "run_id", help="Open this run at once (a unique run id prefix works).")
def tui_command(run_id: str | None) -> None:
    """Watch runs live: the task DAG, the virtual clock, triggers, tool calls, scores, human agents.

    Start, cancel and resume runs and answer review gates from it. It is a client of this
    project's hub, or becomes the hub when none runs. Press ? inside for the keys.
    """
    from tui.app import AgentenvTui
    from tui.data import HubSource

    source = HubSource.connect()
    try:
        if run_id:
            run_id = source.session.store.runs.resolve(run_id)
        AgentenvTui(source, open_run=run_id).run()
    finally:
        source.close()


# The entry point: `agentenv --help` shows this line without importing more than this module.
tui = LazyCommand("tui", "tui.command:tui_command",
                  "Watch runs live in a terminal UI (DAG, clock, triggers, tool calls, scores).")
