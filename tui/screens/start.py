"""Start a bundle, a stored task or a stored eval, k times, with a concurrency."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select

KINDS = [("bundle (folder or known name, like `agentenv run`)", "bundle"), ("stored task id", "task"),
         ("stored eval id", "eval")]


class StartScreen(ModalScreen[dict | None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss_none", "Close")]

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label("Start runs", classes="section")
            yield Select(KINDS, value="bundle", allow_blank=False, id="kind")
            yield Input(placeholder="what to run, e.g. hello or ./my-bundle", id="target")
            with Horizontal(classes="row"):
                yield Label("k (runs of each task)", classes="field")
                yield Input("1", id="k", type="integer", classes="number")
                yield Label("concurrency", classes="field")
                yield Input("4", id="concurrency", type="integer", classes="number")
            yield Label("", id="start-error")
            with Horizontal(classes="row"):
                yield Button("Start", variant="primary", id="start")
                yield Button("Cancel", id="close")

    def on_mount(self) -> None:
        self.query_one("#target", Input).focus()

    def action_dismiss_none(self) -> None:
        self.dismiss(None)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "start":
            self._submit()
        else:
            self.dismiss(None)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._submit()

    def _submit(self) -> None:
        target = self.query_one("#target", Input).value.strip()
        error = self.query_one("#start-error", Label)
        try:
            k = int(self.query_one("#k", Input).value or "1")
            concurrency = int(self.query_one("#concurrency", Input).value or "4")
        except ValueError:
            error.update("k and concurrency are whole numbers")
            return
        if not target:
            error.update("name what to run")
            return
        if not (1 <= k <= 10_000 and 1 <= concurrency <= 1000):
            error.update("k is 1..10000 and concurrency 1..1000")
            return
        self.dismiss({"kind": self.query_one("#kind", Select).value, "target": target, "k": k,
                      "concurrency": concurrency})
