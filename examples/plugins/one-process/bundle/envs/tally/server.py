"""tally: named counters (a small SDK server, one of the desk's two)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from agentenv_local.env import DataPart, Env, EnvError, environment_card, get_data, reset_data, tool


@environment_card(name="tally", description="Named counters.")
class Tally(Env):
    def __init__(self) -> None:
        self.totals: dict[str, int] = {}

    @tool()
    def increment(self, name: Annotated[str, Field(description="The counter")],
                  by: Annotated[int, Field(description="How much to add")] = 1) -> int:
        """Add to a counter (made at 0) and return its new value."""
        if by < 1:
            raise EnvError("invalid_by", f"by must be >= 1, got {by}")
        self.totals[name] = self.totals.get(name, 0) + by
        return self.totals[name]

    @tool(annotations={"readOnlyHint": True})
    def counts(self) -> dict:
        """Every counter and its value."""
        return dict(self.totals)

    @reset_data
    def reset(self) -> None:
        self.totals.clear()

    @get_data
    def export(self) -> list:
        return [DataPart(data={"counts": self.totals})]
