"""The keys, on one screen."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

HELP = """\
# agentenv tui: keys

**Everywhere** — `?` or `F1` this help · `ctrl+t` light/dark · `q` quit (`ctrl+q` always) · `esc` back · mouse: click
tabs, rows, steps and buttons; scroll with the wheel

**Runs** — `↑ ↓` move · `enter` open · `n` start a bundle, task or eval (k, concurrency) · `c` cancel ·
`r` resume · `/` filter (words, or `status:running`) · `esc` clear the filter · `g` reload

**A run** — `1` DAG · `2` env (clock, triggers) · `3` tool calls · `4` scores · `5` human & review ·
`c` cancel · `r` resume · `esc` back to the runs

**DAG** — arrows or `h j k l` move between steps · `enter` (or a click on the selected step) opens its inputs,
outputs, logs and errors

**Env** — `+` advances a stepped (or frozen) virtual clock by one step (60 s when it has none)

**Human & review** — `y` continue a review gate · `x` abort it · type a reply to the human agent's question and
press `enter` (or *Send & end* to end the conversation)
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark,f1", "close", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-body"):
            yield Markdown(HELP)

    def action_close(self) -> None:
        self.dismiss(None)
