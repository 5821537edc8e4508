"""The runs list: status, task, started, duration, score; filter; live; open, start, cancel, resume."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from ..format import ago, duration, score
from ..model import FINAL, LIVE, took
from ..styles import state_color, state_icon

if TYPE_CHECKING:
    from ..app import AgentenvTui

COLUMNS = ("STATUS", "TASK", "RUN", "STARTED", "TOOK", "SCORE")


class RunsScreen(Screen):
    if TYPE_CHECKING:
        app: AgentenvTui  # this screen only runs inside AgentenvTui

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Open", show=True),
        Binding("n", "start", "New run"),
        Binding("c", "cancel", "Cancel run"),
        Binding("r", "resume", "Resume"),
        Binding("slash", "filter", "Filter"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
        Binding("g", "reload", "Reload", show=False),
    ]

    def compose(self) -> ComposeResult:
        yield Static("agentenv · runs", classes="title", id="runs-title")
        yield Input(placeholder="filter: words, or status:running  (/ to focus, esc to clear)", id="filter")
        yield DataTable(id="runs", cursor_type="row", zebra_stripes=True)
        yield Static("", classes="hint", id="runs-hint")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#runs", DataTable)
        for name, width in zip(COLUMNS, (12, 10, 26, 7, 7, 5)):
            table.add_column(name, width=width, key=name)
        self.query_one("#runs-title", Static).update(f"agentenv · runs · {self.app.source.describe()}")
        table.focus()
        self.action_reload()
        self.set_interval(1.0, self._tick)

    # -- data --
    def action_reload(self) -> None:
        self.run_worker(self._load, thread=True, exclusive=True, group="runs-load")

    def _load(self) -> None:
        try:
            rows = self.app.source.list_runs(500)
        except Exception as exc:
            self.app.fail("could not list runs", exc)
            return
        self.app.later(self._loaded, rows)

    def _loaded(self, rows: list[dict]) -> None:
        self.app.runs.load(rows)
        self.render_rows()

    def on_hub_events(self, events: list[dict], changed: set[str]) -> None:
        if changed:
            self.render_rows()

    def _tick(self) -> None:
        if any(r.get("status") in LIVE for r in self.app.runs.rows.values()):
            self.render_rows()

    def render_rows(self) -> None:
        table = self.query_one("#runs", DataTable)
        keep = self.selected_run()
        now = self.app.now()
        rows = self.app.runs.visible()
        table.clear()
        for r in rows:
            status = r.get("status") or "?"
            table.add_row(Text(f"{state_icon(status)} {status}", style=state_color(status)),
                          r.get("task_name") or r.get("task_id") or "?", r["run_id"], ago(r.get("created_at"), now),
                          duration(took(r, now)), score(r.get("score")), key=r["run_id"])
        if keep is not None and keep in {r["run_id"] for r in rows}:
            table.move_cursor(row=table.get_row_index(keep), animate=False)
        hint = self.query_one("#runs-hint", Static)
        if not self.app.runs.rows:
            hint.update("No runs yet. Press n to start one (try the bundle 'hello'), or run `agentenv run hello`.")
        else:
            total = len(self.app.runs.rows)
            shown = (f"{len(rows)} of {total} runs" if self.app.runs.filter
                     else f"{total} run{'s' if total != 1 else ''}")
            hint.update(f"{shown} · enter opens · n new · c cancel · r resume · / filter · ? help")

    def selected_run(self) -> str | None:
        table = self.query_one("#runs", DataTable)
        if table.row_count == 0:
            return None
        try:
            return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        except Exception:  # an empty or shrinking table
            return None

    # -- filter --
    def action_filter(self) -> None:
        self.query_one("#filter", Input).focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.value = ""
        self.query_one("#runs", DataTable).focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self.app.runs.filter = event.value
            self.render_rows()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            self.query_one("#runs", DataTable).focus()

    # -- actions --
    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.open(event.row_key.value)

    def action_open(self) -> None:
        self.open(self.selected_run())

    def open(self, run_id: str | None) -> None:
        from .run import RunScreen

        if run_id:
            self.app.push_screen(RunScreen(run_id))

    def action_start(self) -> None:
        from .start import StartScreen

        self.app.push_screen(StartScreen(), self._start)

    def _start(self, request: dict | None) -> None:
        if not request:
            return
        app = self.app

        def work() -> None:
            try:
                jobs = app.source.jobs_for(request["kind"], request["target"], request["k"])
                started = app.launcher.launch(jobs, request["concurrency"])
            except Exception as exc:
                app.fail(f"could not start {request['kind']} {request['target']!r}", exc)
                return
            waiting = len(jobs) - len(started)
            app.later(app.notify, f"started {len(started)} run(s) of {request['target']}"
                                 + (f"; {waiting} more as slots free up" if waiting > 0 else ""))
            app.later(self.action_reload)
        self.run_worker(work, thread=True, group="launch")

    def action_cancel(self) -> None:
        run_id = self.selected_run()
        row = self.app.runs.rows.get(run_id or "")
        if row is None or run_id is None:
            return
        if row.get("status") in FINAL and row.get("status") != "interrupted":
            self.notify(f"run {run_id} is {row['status']}: nothing to cancel", severity="warning")
            return
        do_cancel(self.app, run_id)

    def action_resume(self) -> None:
        run_id = self.selected_run()
        row = self.app.runs.rows.get(run_id or "")
        if row is None or run_id is None:
            return
        if row.get("status") not in ("interrupted", "error", "failed", "cancelled"):
            self.notify(f"run {run_id} is {row.get('status')}: only an interrupted, failed or cancelled run resumes",
                        severity="warning")
            return
        do_resume(self.app, run_id)


def do_cancel(app, run_id: str) -> None:
    _run_action(app, run_id, "cancel", "cancelling")


def do_resume(app, run_id: str) -> None:
    _run_action(app, run_id, "resume", "resumed")


def _run_action(app, run_id: str, action: str, done: str) -> None:
    """``app.source.<action>(run_id)`` on a worker thread: a notice when it is done, the error when it fails."""
    def work() -> None:
        try:
            getattr(app.source, action)(run_id)
        except Exception as exc:
            app.fail(f"could not {action} {run_id}", exc)
            return
        app.later(app.notify, f"{done} {run_id}")
    app.run_worker(work, thread=True, group="actions")
