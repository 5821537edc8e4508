"""The trajectory: tool calls as they stream in, RBAC denials highlighted, and the role rules."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from ..envstate import EnvView
from ..format import duration, one_line, pretty
from ..model import ToolCall
from ..styles import state_color
from .tool_list import ToolList


class ToolsPanel(Vertical):
    def compose(self) -> ComposeResult:
        yield ToolList(id="tool-table")
        yield Static("", id="tool-detail")
        yield Static("", id="roles")

    def show(self, calls: list[ToolCall], added: int | None = None) -> None:
        self.query_one(ToolList).set_calls(calls)

    def on_tool_list_highlighted(self, event: ToolList.Highlighted) -> None:
        tc = event.call
        text = Text()
        text.append(f"{tc.tool}", style="bold")
        text.append(f" as {tc.role or '-'}" + (f" ({tc.source})" if tc.source else "")
                    + f" · {tc.outcome} · {duration(tc.duration_s)} · virtual {tc.virtual_time or '-'}\n")
        text.append("args   " + one_line(tc.arguments, 400) + "\n")
        text.append("result " + one_line(tc.error or result_text(tc.result), 400))
        self.query_one("#tool-detail", Static).update(text)

    def show_roles(self, views: list[EnvView]) -> None:
        text = Text()
        for v in views:
            if not v.roles:
                text.append(f"{v.env_id or v.instance_id}: no role rules (every role may call every tool)\n",
                            style="dim")
            for role, rules in v.roles.items():
                text.append(f"role {role}: ", style="bold")
                if rules["disabled"]:
                    text.append("disabled " + ", ".join(rules["disabled"]), style=state_color("denied"))
                if rules["allowed"]:
                    text.append(("; " if rules["disabled"] else "") + "allowed " + ", ".join(rules["allowed"]))
                text.append("\n")
        self.query_one("#roles", Static).update(text if views else "")


def result_text(result) -> str:
    if isinstance(result, dict) and isinstance(result.get("content"), list):
        parts = [p["text"] for p in result["content"] if isinstance(p, dict) and p.get("text")]
        if parts:
            return " ".join(parts)
    return pretty(result) if result is not None else "-"
