"""`agentenv tui`: watch runs live in the terminal (the Textual app lives in the `tui` package)."""

from __future__ import annotations

import click


@click.command()
@click.option("--run", "run_id", help="Open this run at once (a unique run id prefix works).")
def tui(run_id):
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
