"""`trajectory_filter` (rubrics_verifier): what of an agent's trajectory a judge sees.

The reference's fields, all accepted. Locally the `include_*` flags act on our agents' trajectory events:
`include_tool_calls` drops `tool_call` events and the calls a `model_call` asked for,
`include_tool_call_results` drops their `result`, `include_response` drops the agent's messages (`reply`,
`final`, a model call's `text`), `include_thinking` keeps `thinking`/`reasoning` keys (dropped by default).
The screenshot compaction (`compaction_type: "screenshot"` and its frame knobs) needs screenshot trajectories,
which no local agent records: it is accepted and `screenshot_note` says so in the run log.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

RESPONSE_EVENTS = ("reply", "final")
THINKING_KEYS = ("thinking", "reasoning")


def _compile(pattern: str, label: str | None = None) -> None:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"{pattern!r}" + (f" (label {label!r})" if label else "")
                         + f" is not a valid regex: {exc}") from None


class TrajectoryFilter(BaseModel):
    model_config = ConfigDict(extra="forbid")

    include_tool_calls: bool = True
    include_tool_call_results: bool = True
    include_response: bool = True
    include_thinking: bool = False
    compaction_type: Literal["default", "screenshot"] = "default"
    screenshot_last_n: int = Field(default=3, ge=1, le=50)
    frame_strategy: Literal["final_frames", "per_criterion", "last_n"] = "final_frames"
    frame_budget: int = Field(default=90, ge=6, le=95)
    trajectory_text: Literal["full", "action_log"] | None = None
    evidence_exclude_pattern: str | None = None
    always_show_actions: dict[str, str] | None = None
    action_log_max_lines: int = Field(default=120, ge=10)

    @field_validator("evidence_exclude_pattern")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            _compile(value)
        return value

    @field_validator("always_show_actions")
    @classmethod
    def _patterns_compile(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        for label, pattern in (value or {}).items():
            if not label:
                raise ValueError("labels must be non-empty")
            _compile(pattern, label)
        return value

    def screenshot_note(self) -> str | None:
        if self.compaction_type != "screenshot":
            return None
        return ("trajectory_filter.compaction_type 'screenshot' is accepted but has no local meaning: no local "
                "agent records screenshots; the judge sees the trajectory compacted by the include_* flags")

    def apply(self, events: list[Any]) -> list[Any]:
        """The events as this filter lets a judge see them (copies; the recorded trajectory is unchanged)."""
        out: list[Any] = []
        for event in events:
            if not isinstance(event, dict):
                out.append(event)
                continue
            kind = event.get("type")
            if kind == "tool_call" and not self.include_tool_calls:
                continue
            if kind in RESPONSE_EVENTS and not self.include_response:
                continue
            kept = dict(event)
            if not self.include_thinking:
                for key in THINKING_KEYS:
                    kept.pop(key, None)
            if kind == "tool_call" and not self.include_tool_call_results:
                kept.pop("result", None)
            if kind == "model_call":
                if not self.include_tool_calls:
                    kept.pop("tool_calls", None)
                if not self.include_response:
                    kept.pop("text", None)
            out.append(kept)
        return out
