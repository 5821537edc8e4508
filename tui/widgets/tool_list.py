"""A virtual list of tool calls: draws only the rows on screen, so appending is O(1) at any length."""

from __future__ import annotations

from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ..format import duration, one_line
from ..model import ToolCall
from ..styles import state_color

COLUMNS = (("V-TIME", 8), ("ROLE", 9), ("TOOL", 16), ("ARGS", 22), ("RESULT", 22), ("TOOK", 6))
MAX_ROWS = 5000


class ToolList(ScrollView, can_focus=True):
    """Rows of (virtual time, role, tool, args, result, duration); denials in bold red. Follows the
    newest row while the cursor is on the last one."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "move(-1)", "Up", show=False),
        Binding("down,j", "move(1)", "Down", show=False),
        Binding("pageup", "move(-10)", show=False),
        Binding("pagedown", "move(10)", show=False),
        Binding("home", "move(-1000000)", show=False),
        Binding("end", "move(1000000)", show=False),
    ]

    DEFAULT_CSS = "ToolList { height: 1fr; }"

    class Highlighted(Message):
        def __init__(self, call: ToolCall) -> None:
            super().__init__()
            self.call = call

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.calls: list[ToolCall] = []
        self.cursor = -1
        self._header = Text("  ".join(name.ljust(width) for name, width in COLUMNS), style="bold")

    @property
    def row_count(self) -> int:
        return len(self.calls)

    def set_calls(self, calls: list[ToolCall]) -> None:
        """Show `calls` (the caller's list, newest last); cheap to call on every batch."""
        follow = self.cursor < 0 or self.cursor >= len(self.calls) - 1
        self.calls = calls[-MAX_ROWS:]
        self.virtual_size = Size(sum(w + 2 for _, w in COLUMNS), len(self.calls) + 1)
        if follow and self.calls:
            self.cursor = len(self.calls) - 1
            self.scroll_to(y=max(0, len(self.calls) + 1 - self.size.height), animate=False)
            self.post_message(self.Highlighted(self.calls[self.cursor]))
        self.refresh()

    def action_move(self, delta: int) -> None:
        if not self.calls:
            return
        self.cursor = max(0, min(len(self.calls) - 1, self.cursor + delta))
        top = self.scroll_offset.y
        row = self.cursor + 1
        if row < top + 1:
            self.scroll_to(y=max(0, row - 1), animate=False)
        elif row >= top + self.size.height:
            self.scroll_to(y=row - self.size.height + 1, animate=False)
        self.post_message(self.Highlighted(self.calls[self.cursor]))
        self.refresh()

    def on_click(self, event) -> None:
        index = event.y + self.scroll_offset.y - 1
        if 0 <= index < len(self.calls):
            self.cursor = index
            self.post_message(self.Highlighted(self.calls[index]))
            self.refresh()

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.size.width
        base = self.rich_style
        if y == 0:
            text = self._header
        else:
            index = y + scroll_y - 1
            if index >= len(self.calls):
                return Strip.blank(width, base)
            text = _row(self.calls[index])
            if index == self.cursor and self.has_focus:
                text.stylize("reverse")
            elif index == self.cursor:
                text.stylize("underline")
        segments = [Segment(seg.text, base + seg.style if seg.style else base)
                    for seg in text.render(self.app.console)]
        return Strip(segments).crop_extend(scroll_x, scroll_x + width, base)


def _row(tc: ToolCall) -> Text:
    from .tools_panel import result_text

    outcome = tc.outcome
    if tc.denied:
        style = Style(color=state_color("denied"), bold=True)
        result = "DENIED " + (tc.error or result_text(tc.result))
    else:
        style = Style(color=state_color("failed")) if outcome in ("failed", "error") else Style()
        result = tc.error or (result_text(tc.result) if tc.done else "…")
    vt = tc.virtual_time
    stamp = vt.split("T", 1)[1][:8] if vt and "T" in vt else (vt or "-")
    cells = (stamp, tc.role or "-", tc.tool, one_line(tc.arguments, 60), one_line(result, 60),
             duration(tc.duration_s) if tc.done else "…")
    text = Text(no_wrap=True)
    for (name, width), cell in zip(COLUMNS, cells):
        cell = cell if len(cell) <= width else cell[: width - 1] + "…"
        text.append(cell.ljust(width) + "  ", style=style if name in ("ROLE", "TOOL", "RESULT") else "")
    return text
