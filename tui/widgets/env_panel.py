"""The virtual clock and the triggers of a run's envs, with the trigger event log."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, RichLog, Static

from ..envstate import EnvView, describe_trigger_event
from ..styles import state_color


class EnvPanel(Vertical):
    def compose(self) -> ComposeResult:
        yield Static("", id="clock", classes="box")
        yield Static("Triggers", classes="section")
        yield DataTable(id="triggers-table", cursor_type="row", show_cursor=False)
        yield Static("Trigger events", classes="section")
        yield RichLog(id="trigger-log", wrap=False, markup=False, max_lines=2000)

    def on_mount(self) -> None:
        table = self.query_one("#triggers-table", DataTable)
        for name, width in (("ID", 15), ("WHEN", 16), ("STATUS", 8), ("FIRED", 5), ("FAIL", 4), ("NEXT MARK", 20)):
            table.add_column(name, width=width, key=name)
        self._seen: set = set()
        self.views: list[EnvView] = []

    def show(self, views: list[EnvView], fallback_events: list[dict]) -> None:
        """Show the envs' state; `fallback_events` (from the trajectory) when no saved log exists."""
        self.views = views
        clock = self.query_one("#clock", Static)
        if not views:
            clock.update("This run has deployed no env with a gateway (so no virtual clock or triggers).")
        else:
            text = Text()
            for v in views:
                c = v.clock
                text.append(f"{v.env_id or v.instance_id}", style="bold")
                pooled = f", pool {v.pool_slot}" if v.pool_slot else ""
                text.append(f"  ({v.instance_id}{pooled}{'' if v.live else ', torn down'})\n")
                if not c.armed:
                    text.append("  virtual clock: not armed (tools read the real time)\n")
                    continue
                text.append("  virtual time ")
                text.append(f"{c.virtual_time}", style="bold")
                text.append(f"  time zone {c.time_zone}\n")
                if c.mode == "stepped":
                    how = f"stepped: +{c.step_seconds:g}s per tool call" if c.step_seconds else "stepped"
                elif c.mode == "frozen":
                    how = "frozen"
                else:
                    how = f"wall-driven at {c.rate:g}x" if c.rate is not None else "wall-driven"
                text.append(f"  mode {how}")
                if v.live and c.mode in ("stepped", "frozen"):
                    text.append("   + advances it", style="italic")
                text.append("\n")
            text.rstrip()
            clock.update(text)
        table = self.query_one("#triggers-table", DataTable)
        table.clear()
        for v in views:
            for t in v.triggers:
                table.add_row(t.id, t.when, Text(t.status, style=state_color(_trigger_state(t.status))),
                              str(t.fire_count), str(t.failure_count), t.next_mark or "-")
        log = self.query_one("#trigger-log", RichLog)
        saved = [(v.instance_id, e) for v in views for e in v.trigger_events]
        items = saved if saved else [(None, e) for e in fallback_events]
        mode = "saved" if saved else "trajectory"
        if mode != getattr(self, "_mode", None):  # the engine's own log replaces what the trajectory told
            self._mode = mode
            self._seen = set()
            log.clear()
        for instance_id, event in items:
            key = (instance_id, event.get("seq"), event.get("at"), event.get("kind"), event.get("trigger_id"))
            if key in self._seen:
                continue
            self._seen.add(key)
            line = Text(f"{event.get('virtual_time') or '-':<21} ", style="dim")
            kind = str(event.get("kind") or "")
            style = "bold " + state_color("failed") if "fail" in kind or "error" in kind else (
                state_color("passed") if kind in ("fired", "action_ok", "verify_ok") else "")
            line.append(describe_trigger_event(event), style=style)
            log.write(line)


def _trigger_state(status: str) -> str:
    return {"fired": "passed", "armed": "running", "failed": "failed", "detected": "running",
            "firing": "running"}.get(status, "waiting")
