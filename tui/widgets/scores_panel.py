"""Each verifier's criteria with pass/fail and justification; the judge's reasoning."""

from __future__ import annotations

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from ..format import one_line, pretty, score
from ..styles import state_color


class ScoresPanel(VerticalScroll):
    def compose(self):
        yield Static("", id="scores-body", classes="box")

    def show(self, run_score, verifications: dict, status: str) -> None:
        text = Text()
        text.append(f"run score {score(run_score)}", style="bold")
        text.append(f"  ({status})\n")
        if not verifications:
            text.append("\nNo verifier has recorded a result yet.\n", style="dim")
        for vid, v in verifications.items():
            text.append(f"\n{vid}", style="bold")
            text.append(f"  score {score(v.get('score'))} ({v.get('score_aggregator') or '-'})"
                        + (f"  step {v['step_id']}" if v.get("step_id") else "") + "\n")
            for row in v.get("results") or []:
                if row.get("skipped"):
                    mark, color = "skip", state_color("skipped")
                elif row.get("result"):
                    mark, color = "pass", state_color("passed")
                else:
                    mark, color = "FAIL", state_color("failed")
                text.append(f"  [{mark}] ", style=f"bold {color}")
                name = row.get("id") or row.get("criterion") or row.get("type") or f"#{row.get('criterion_index')}"
                text.append(f"{one_line(name, 70)}")
                if row.get("weight") not in (None, 1):
                    text.append(f" (weight {row['weight']})", style="dim")
                text.append("\n")
                if row.get("justification"):
                    text.append(f"         {row['justification']}\n", style="italic")
                judge = row.get("judge_output") or row.get("reasoning")
                if judge and not isinstance(judge, str):
                    judge = judge.get("reasoning") or judge.get("justification") or one_line(judge, 300) \
                        if isinstance(judge, dict) else one_line(judge, 300)
                if judge and judge != row.get("justification"):
                    text.append(f"         judge: {judge}\n", style="dim")
            meta = v.get("judge")
            if meta:
                text.append("  judge's reasoning:\n", style="bold")
                reasoning = meta.get("reasoning") if isinstance(meta, dict) else None
                text.append("    " + (reasoning or pretty(meta)).replace("\n", "\n    ")[:4000] + "\n", style="dim")
        self.query_one("#scores-body", Static).update(text)
