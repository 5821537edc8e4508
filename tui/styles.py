"""Colours and icons for states: mid-tone colours that read on light and dark backgrounds."""

from __future__ import annotations

STATE_COLORS = {
    "waiting": "#8a8f98",
    "queued": "#8a8f98",
    "running": "#d18f00",
    "retrying": "#b05fd6",
    "passed": "#2f9e52",
    "failed": "#d9433b",
    "error": "#d9433b",
    "skipped": "#8a8f98",
    "cancelled": "#b5742d",
    "interrupted": "#b5742d",
    "ok": "#2f9e52",
    "denied": "#d9433b",
}

ICONS = {
    "waiting": "·", "queued": "·", "passed": "✓", "failed": "✗", "error": "✗", "skipped": "-",
    "cancelled": "⊘", "interrupted": "‖", "retrying": "↻", "running": "▶",
}


def state_color(status: str | None) -> str:
    return STATE_COLORS.get((status or "waiting").split(" ")[0], STATE_COLORS["waiting"])


def state_icon(status: str | None) -> str:
    status = status or "waiting"
    if status.startswith("failed (tolerated)"):
        return "!"
    return ICONS.get(status.split(" ")[0], "?")
