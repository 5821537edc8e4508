"""The task DAG drawn live: boxes coloured by state, a spinner on running steps, edges by level."""

from __future__ import annotations

from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ..dag_layout import Layout, box_lines, layout
from ..format import duration
from ..styles import STATE_COLORS, state_icon

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


class DagView(ScrollView, can_focus=True):
    """Keys: arrows (or h j k l) move between steps, enter opens the selected one. Click selects,
    a second click on the selected step opens it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "move('up')", "Up", show=False),
        Binding("down,j", "move('down')", "Down", show=False),
        Binding("left,h", "move('left')", "Left", show=False),
        Binding("right,l", "move('right')", "Right", show=False),
        Binding("enter", "open", "Step detail"),
    ]

    DEFAULT_CSS = """
    DagView { height: 1fr; }
    """

    class Opened(Message):
        def __init__(self, step_id: str) -> None:
            super().__init__()
            self.step_id = step_id

    def __init__(self, now=lambda: 0.0, **kwargs) -> None:
        super().__init__(**kwargs)
        self._now = now
        self.levels: list[list[str]] = []
        self.edges: dict[str, list[str]] = {}
        self.steps: dict[str, dict] = {}
        self.selected: str | None = None
        self._layout: Layout | None = None
        self._rows: list[list[tuple[str, Style]]] = []

    # -- data --
    def set_graph(self, levels: list[list[str]], edges: dict[str, list[str]], steps: dict[str, dict]) -> None:
        if levels != self.levels or edges != self.edges or self._layout is None:
            self.levels, self.edges = [list(x) for x in levels], {k: list(v) for k, v in edges.items()}
            self._layout = layout(self.levels, self.edges, min_width=max(0, self.size.width))
            self.virtual_size = Size(self._layout.width, self._layout.height)
            if self.selected not in self._layout.boxes:
                self.selected = self.levels[0][0] if self.levels and self.levels[0] else None
        self.steps = steps
        self._paint()

    def running(self) -> bool:
        return any((s or {}).get("status") in ("running", "retrying") for s in self.steps.values())

    def tick(self) -> None:
        """Advance the spinners (the screen calls this a few times a second while steps run)."""
        if self.running():
            self._paint()

    def on_resize(self) -> None:
        if self.levels:
            self._layout = None
            self.set_graph(self.levels, self.edges, self.steps)

    # -- drawing --
    def _paint(self) -> None:
        lay = self._layout
        if lay is None:
            return
        now = self._now()
        edge_style = Style(color="#7a8a99")
        rows: list[list[tuple[str, Style]]] = [[(" ", Style())] * lay.width for _ in range(lay.height)]
        for (x, y) in lay.lines:
            ch = lay.edge_char(x, y)
            if ch and 0 <= y < lay.height and 0 <= x < lay.width:
                rows[y][x] = (ch, edge_style)
        for (x, y) in lay.arrows:
            if 0 <= y < lay.height and 0 <= x < lay.width:
                rows[y][x] = ("▼", edge_style)
        for step_id, box in lay.boxes.items():
            info = self.steps.get(step_id) or {}
            status = info.get("status") or "waiting"
            color = STATE_COLORS.get(status.split(" ")[0], STATE_COLORS["waiting"])
            icon = SPINNER[int(now * 10) % len(SPINNER)] if status in ("running", "retrying") else state_icon(status)
            took = info.get("duration_s")
            if status in ("running", "retrying") and info.get("started_at"):
                took = max(0.0, now - info["started_at"])
            right = duration(took) if took is not None else status
            kind = info.get("type") or ""
            second = kind[: box.w - 3 - len(right)].ljust(box.w - 3 - len(right)) + " " + right
            selected = step_id == self.selected
            border = Style(color=color, bold=selected)
            text = Style(color=color, bold=True, reverse=selected)
            for i, line in enumerate(box_lines(box.w, f"{icon} {step_id}", second, selected)):
                for j, ch in enumerate(line):
                    inside = 0 < i < box.h - 1 and 0 < j < box.w - 1
                    style = (text if i == 1 else Style(color=color)) if inside else border
                    rows[box.y + i][box.x + j] = (ch, style)
        self._rows = rows
        self.refresh()

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        row_index = y + scroll_y
        width = self.size.width
        if row_index >= len(self._rows):
            return Strip.blank(width, self.rich_style)
        segments: list[Segment] = []
        run_text, run_style = "", None
        for ch, style in self._rows[row_index]:
            if style is run_style:
                run_text += ch
            else:
                if run_text:
                    segments.append(Segment(run_text, self.rich_style + run_style))
                run_text, run_style = ch, style
        if run_text:
            segments.append(Segment(run_text, self.rich_style + run_style))
        strip = Strip(segments, len(self._rows[row_index]))
        return strip.crop_extend(scroll_x, scroll_x + width, self.rich_style)

    # -- moving and opening --
    def select(self, step_id: str | None) -> None:
        if step_id is None or self._layout is None or step_id not in self._layout.boxes:
            return
        self.selected = step_id
        box = self._layout.boxes[step_id]
        self.scroll_to_region(_region(box), animate=False)
        self._paint()

    def action_move(self, direction: str) -> None:
        if self._layout is not None:
            self.select(self._layout.neighbour(self.selected, direction))

    def action_open(self) -> None:
        if self.selected:
            self.post_message(self.Opened(self.selected))

    def on_click(self, event) -> None:
        if self._layout is None:
            return
        x, y = event.x + self.scroll_offset.x, event.y + self.scroll_offset.y
        box = self._layout.box_at(x, y)
        if box is None:
            return
        if box.step_id == self.selected:
            self.post_message(self.Opened(box.step_id))
        else:
            self.select(box.step_id)


def _region(box):
    from textual.geometry import Region

    return Region(box.x, box.y, box.w, box.h)
