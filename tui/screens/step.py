"""One step: its inputs (the step's JSON), outputs and logs (from events and the run), errors."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from ..format import duration, one_line, pretty
from ..model import RunState
from ..styles import state_color, state_icon


class StepScreen(Screen):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "back", "Back to the DAG")]

    def __init__(self, state: RunState, step_id: str) -> None:
        super().__init__()
        self.state = state
        self.step_id = step_id

    def compose(self) -> ComposeResult:
        yield Static("", id="run-head")
        with VerticalScroll(id="step-body"):
            yield Static("Inputs", classes="section")
            yield Static("", id="step-inputs", classes="box")
            yield Static("Outputs", classes="section")
            yield Static("", id="step-outputs", classes="box")
            yield Static("Logs", classes="section")
            yield Static("", id="step-logs", classes="box")
            yield Static("Errors", classes="section")
            yield Static("", id="step-errors", classes="box")
        yield Footer()

    def on_mount(self) -> None:
        self.show()
        self.query_one("#step-body").focus()

    def on_hub_events(self, events: list[dict], changed: set[str]) -> None:
        if any(e.get("run_id") == self.state.run_id and e.get("step_id") == self.step_id for e in events):
            self.show()

    def show(self) -> None:
        info = self.state.steps.get(self.step_id) or {}
        status = info.get("status") or "waiting"
        head = Text()
        head.append(f"{state_icon(status)} {status}", style=f"bold {state_color(status)}")
        head.append(f"  step {self.step_id} ({info.get('type') or '?'})", style="bold")
        head.append(f"  took {duration(info.get('duration_s'))}  run {self.state.run_id}")
        self.query_one("#run-head", Static).update(head)
        spec = self.state.task_steps.get(self.step_id)
        self.query_one("#step-inputs", Static).update(pretty(spec) if spec else "(the task document is not available)")
        self.query_one("#step-outputs", Static).update(self._outputs())
        logs = Text()
        for e in self.state.logs.get(self.step_id) or []:
            body = e.get("body") or {}
            kind = e.get("kind")
            message = body.get("message") if kind == "step.log" else (
                f"{kind}: " + one_line({k: v for k, v in body.items() if k != "traceback"}, 200))
            level = body.get("level")
            logs.append(f"{_clock(e.get('at'))} ", style="dim")
            logs.append(f"{message}\n", style=state_color("failed") if level in ("warning", "error") else "")
        self.query_one("#step-logs", Static).update(logs if logs.plain else Text("(no log lines)", style="dim"))
        errors = Text()
        if info.get("error"):
            errors.append(str(info["error"]) + "\n", style=f"bold {state_color('failed')}")
        if info.get("traceback"):
            errors.append(str(info["traceback"]), style="dim")
        self.query_one("#step-errors", Static).update(errors if errors.plain else Text("(none)", style="dim"))

    def _outputs(self) -> Text:
        out = Text()
        for vid, v in self.state.verifications().items():
            if v.get("step_id") == self.step_id:
                results = v.get("results") or []
                passed = sum(1 for r in results if r.get("result"))
                out.append(f"verification {vid}: {passed}/{len(results)} criteria, score {v.get('score')}\n")
        context = self.state.context()
        for key in ("deployed_envs", "deployed_agents", "deployed_sandboxes", "prompt_responses"):
            for item in context.get(key) or []:
                if isinstance(item, dict) and item.get("step_id") == self.step_id:
                    shown = {k: v for k, v in item.items() if k not in ("environment_card", "a2a_card", "children")}
                    out.append(f"{key[:-1]}: {one_line(shown, 400)}\n")
        scripts = (context.get("metadata") or {}).get("script_results") or {}
        if self.step_id in scripts:
            out.append(f"script result: {one_line(scripts[self.step_id], 400)}\n")
        for e in self.state.outputs.get(self.step_id) or []:
            out.append(f"{e.get('kind')}: {one_line(e.get('body'), 300)}\n")
        return out if out.plain else Text("(no outputs recorded)", style="dim")

    def action_back(self) -> None:
        self.app.pop_screen()


def _clock(ts: float | None) -> str:
    import time

    return time.strftime("%H:%M:%S", time.gmtime(ts)) if ts else "--:--:--"
