"""Lay a task DAG out as boxes and edges on a character canvas (no terminal needed).

Levels (from the run record's `levels`: the steps each level may start once the ones above are
done) are rows, top to bottom; each step is a box; an edge goes from the bottom of a box to the
top of each step that depends on it. Edges implied by others (a->b->c makes a->c redundant) are
not drawn; an edge that still skips a level runs down a gutter on the left.
"""

from __future__ import annotations

from dataclasses import dataclass, field

BOX_W = 22
BOX_H = 4
GAP_X = 2
BAND_H = 3  # rows between two levels for the edges

_UP, _DOWN, _LEFT, _RIGHT = 1, 2, 4, 8
_JOINTS = {
    _UP | _DOWN: "│", _LEFT | _RIGHT: "─", _DOWN | _RIGHT: "┌", _DOWN | _LEFT: "┐", _UP | _RIGHT: "└",
    _UP | _LEFT: "┘", _UP | _DOWN | _RIGHT: "├", _UP | _DOWN | _LEFT: "┤", _DOWN | _LEFT | _RIGHT: "┬",
    _UP | _LEFT | _RIGHT: "┴", _UP | _DOWN | _LEFT | _RIGHT: "┼", _UP: "│", _DOWN: "│", _LEFT: "─", _RIGHT: "─",
}


@dataclass
class Box:
    step_id: str
    level: int
    index: int
    x: int
    y: int
    w: int = BOX_W
    h: int = BOX_H

    def contains(self, x: int, y: int) -> bool:
        return self.x <= x < self.x + self.w and self.y <= y < self.y + self.h

    @property
    def center(self) -> int:
        return self.x + self.w // 2


@dataclass
class Layout:
    boxes: dict[str, Box]
    levels: list[list[str]]
    width: int
    height: int
    lines: dict[tuple[int, int], int] = field(default_factory=dict)  # (x, y) -> edge directions
    arrows: set[tuple[int, int]] = field(default_factory=set)

    def edge_char(self, x: int, y: int) -> str | None:
        if (x, y) in self.arrows:
            return "▼"
        dirs = self.lines.get((x, y))
        return _JOINTS.get(dirs) if dirs else None

    def box_at(self, x: int, y: int) -> Box | None:
        for box in self.boxes.values():
            if box.contains(x, y):
                return box
        return None

    def neighbour(self, step_id: str | None, direction: str) -> str | None:
        """The step the cursor moves to from `step_id` (left/right in a level, up/down across)."""
        if not self.levels:
            return None
        if step_id not in self.boxes:
            return self.levels[0][0]
        box = self.boxes[step_id]
        if direction in ("left", "right"):
            row = self.levels[box.level]
            i = box.index + (1 if direction == "right" else -1)
            return row[max(0, min(len(row) - 1, i))]
        level = box.level + (1 if direction == "down" else -1)
        if not 0 <= level < len(self.levels):
            return step_id
        row = self.levels[level]
        return min(row, key=lambda s: abs(self.boxes[s].center - box.center))


def reduce_edges(edges: dict[str, list[str]]) -> dict[str, list[str]]:
    """Each step's direct dependencies minus those reachable through another dependency."""
    memo: dict[str, set[str]] = {}

    def ancestors(step: str, seen: frozenset = frozenset()) -> set[str]:
        if step in memo:
            return memo[step]
        out: set[str] = set()
        for dep in edges.get(step, []):
            if dep in seen:
                continue
            out.add(dep)
            out |= ancestors(dep, seen | {step})
        memo[step] = out
        return out

    reduced = {}
    for step, deps in edges.items():
        keep = []
        for dep in deps:
            others = [d for d in deps if d != dep]
            if not any(dep in ancestors(o) for o in others):
                keep.append(dep)
        reduced[step] = keep
    return reduced


def layout(levels: list[list[str]], edges: dict[str, list[str]], min_width: int = 0) -> Layout:
    levels = [list(level) for level in levels if level]
    reduced = reduce_edges(edges)
    level_of = {s: i for i, level in enumerate(levels) for s in level}
    long_edges = [(dep, step) for step, deps in reduced.items() for dep in deps
                  if step in level_of and dep in level_of and level_of[step] - level_of[dep] > 1]
    gutter = 2 * len(long_edges) + (1 if long_edges else 0)
    widest = max((len(level) for level in levels), default=0)
    inner = widest * BOX_W + max(0, widest - 1) * GAP_X
    width = max(min_width, gutter + inner + 1)
    boxes: dict[str, Box] = {}
    for li, level in enumerate(levels):
        row_w = len(level) * BOX_W + (len(level) - 1) * GAP_X
        x0 = gutter + max(0, (width - gutter - row_w) // 2)
        y = li * (BOX_H + BAND_H)
        for i, step in enumerate(level):
            boxes[step] = Box(step, li, i, x0 + i * (BOX_W + GAP_X), y)
    height = len(levels) * BOX_H + max(0, len(levels) - 1) * BAND_H
    out = Layout(boxes, levels, width, height)

    def mark(x: int, y: int, dirs: int) -> None:
        out.lines[(x, y)] = out.lines.get((x, y), 0) | dirs

    def vertical(x: int, y0: int, y1: int) -> None:
        for y in range(y0, y1 + 1):
            mark(x, y, (_UP if y > y0 else 0) | (_DOWN if y < y1 else 0) or (_UP | _DOWN))

    def horizontal(y: int, x0: int, x1: int) -> None:
        lo, hi = min(x0, x1), max(x0, x1)
        for x in range(lo, hi + 1):
            mark(x, y, (_LEFT if x > lo else 0) | (_RIGHT if x < hi else 0))

    def route(x0: int, y0: int, x1: int, y1: int, mid: int) -> None:
        """From (x0, y0) down to row `mid`, across to x1, down to (x1, y1)."""
        mark(x0, y0, _DOWN)
        for y in range(y0 + 1, mid):
            mark(x0, y, _UP | _DOWN)
        mark(x0, mid, _UP)
        horizontal(mid, x0, x1)
        mark(x1, mid, _DOWN)
        for y in range(mid + 1, y1):
            mark(x1, y, _UP | _DOWN)
        mark(x1, y1, _UP)
        out.arrows.add((x1, y1))

    for step, deps in reduced.items():
        for dep in deps:
            if step not in boxes or dep not in boxes or (dep, step) in long_edges:
                continue
            parent, child = boxes[dep], boxes[step]
            if child.level <= parent.level:
                continue
            y_start = parent.y + BOX_H
            y_end = child.y - 1
            route(parent.center, y_start, child.center, y_end, y_start + 1)
    for k, (dep, step) in enumerate(long_edges):
        parent, child = boxes[dep], boxes[step]
        gx = 1 + 2 * k
        y_start, y_end = parent.y + BOX_H, child.y - 1
        mid_top, mid_bottom = y_start + 1, y_end - 1
        mark(parent.center, y_start, _DOWN)
        mark(parent.center, mid_top, _UP)
        horizontal(mid_top, parent.center, gx)
        mark(gx, mid_top, _DOWN)
        for y in range(mid_top + 1, mid_bottom):
            mark(gx, y, _UP | _DOWN)
        mark(gx, mid_bottom, _UP)
        horizontal(mid_bottom, gx, child.center)
        mark(child.center, mid_bottom, _DOWN)
        mark(child.center, y_end, _UP)
        out.arrows.add((child.center, y_end))
    return out


def to_text(lay: Layout, labels: dict[str, tuple[str, str]] | None = None) -> list[str]:
    """The canvas as plain lines (tests; the widget draws the same with colours)."""
    grid = [[" "] * lay.width for _ in range(lay.height)]
    for (x, y) in lay.lines:
        if 0 <= y < lay.height and 0 <= x < lay.width:
            grid[y][x] = lay.edge_char(x, y) or " "
    for (x, y) in lay.arrows:
        if 0 <= y < lay.height and 0 <= x < lay.width:
            grid[y][x] = "▼"
    for step, box in lay.boxes.items():
        top, mid = labels.get(step, (step, "")) if labels else (step, "")
        for i, line in enumerate(box_lines(box.w, top, mid, selected=False)):
            for j, ch in enumerate(line):
                grid[box.y + i][box.x + j] = ch
    return ["".join(row).rstrip() for row in grid]


def box_lines(w: int, first: str, second: str, selected: bool) -> list[str]:
    tl, tr, bl, br, hz, vt = ("┏", "┓", "┗", "┛", "━", "┃") if selected else ("╭", "╮", "╰", "╯", "─", "│")
    inner = w - 2

    def fit(text: str) -> str:
        text = text if len(text) <= inner else text[: inner - 1] + "…"
        return text.ljust(inner)
    return [tl + hz * inner + tr, vt + fit(first) + vt, vt + fit(second) + vt, bl + hz * inner + br]
