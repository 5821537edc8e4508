"""`aggregate_verifiers`: one score over the result rows of several earlier verifiers.

The rows of every named verification are unioned (each copy tagged with `source_verifier_id`)
and scored with `score_aggregator` under this step's `verifier_id`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from pydantic import Field

from agentenv_local.errors import StepError
from agentenv_local.tasks.scoring import ScoreAggregator
from agentenv_local.tasks.step import Step

if TYPE_CHECKING:
    from agentenv_local.tasks.context import StepContext


class AggregateVerifiersStep(Step):
    type: ClassVar[str] = "aggregate_verifiers"

    verifier_ids: list[str] = Field(default_factory=list)
    score_aggregator: ScoreAggregator = "all_pass"
    verifier_id: str | None = None  # None: the step id

    def config_problems(self) -> list[str]:
        problems = []
        if not self.verifier_ids:
            problems.append("verifier_ids: name at least one verifier to aggregate")
        if any(not v for v in self.verifier_ids):
            problems.append("verifier_ids: ids must not be empty")
        duplicates = sorted({v for v in self.verifier_ids if self.verifier_ids.count(v) > 1})
        if duplicates:
            problems.append(f"verifier_ids: {', '.join(duplicates)} listed more than once")
        if (self.verifier_id or self.id) in self.verifier_ids:
            problems.append(f"verifier_id: {self.verifier_id or self.id!r} cannot aggregate itself")
        return problems

    async def execute(self, ctx: "StepContext") -> None:
        problems = self.config_problems()
        if problems:
            raise StepError(f"step {self.id!r} is misconfigured: " + "; ".join(problems))
        verifications = ctx.metadata.get("verifications", {})
        missing = [v for v in self.verifier_ids if v not in verifications]
        if missing:
            known = ", ".join(sorted(verifications)) or "none yet"
            raise StepError(f"step {self.id!r}: no verification named {', '.join(repr(m) for m in missing)} "
                            f"in this run (known: {known})",
                            hint="check verifier_ids, and list those verifier steps in depends_on")
        rows = []
        for source in self.verifier_ids:
            for row in verifications[source].get("results", []):
                rows.append({**row, "source_verifier_id": source})
        verifier_id = self.verifier_id or self.id
        score = ctx.record_verification(verifier_id, rows, self.score_aggregator)
        ctx.log(f"{verifier_id}: score {score:g} over {len(rows)} rows of {', '.join(self.verifier_ids)}")
