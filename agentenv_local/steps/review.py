"""`review`: pause the run until an operator answers `continue` or `abort`.

The pending review is a `reviews` record (id `<run_id>:<step_id>`); `agentenv runs review`, the
TUI or anything else saves the decision there and calls `RunServices.notify_review`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from pydantic import Field

from agentenv_local.errors import StepError
from agentenv_local.tasks.step import Step

if TYPE_CHECKING:
    from agentenv_local.tasks.context import StepContext

DECISIONS = ("continue", "abort")


class ReviewStep(Step):
    type: ClassVar[str] = "review"

    label: str = ""
    timeout_seconds: float = Field(default=10800, gt=0)
    poll_interval_seconds: float = Field(default=5, gt=0)

    async def execute(self, ctx: "StepContext") -> None:
        label = self.label or self.id
        ctx.log(f"waiting for a review decision on {label!r} (up to {self.timeout_seconds:g}s)")
        decision = await ctx.wait_for_review(label, self.timeout_seconds, self.poll_interval_seconds)
        ctx.metadata.setdefault("reviews", {})[self.id] = decision
        if decision == "abort":
            raise StepError(f"review {label!r} aborted by the operator")
        if decision != "continue":
            raise StepError(f"review {label!r} got an unknown decision {decision!r}",
                            hint=f"answer with one of: {', '.join(DECISIONS)}")
        ctx.log(f"review {label!r}: continue")
