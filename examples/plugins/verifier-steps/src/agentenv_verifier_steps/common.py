"""What both steps share: criterion rows in the built-in verifiers' shape, the plain-name rule for sandbox
names, and the per-step scratch folder that the step's teardown removes (kept with `--keep`, for a look)."""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from agentenv_local.tasks.context import StepContext

# Where the open scratch folders are recorded in the run's state: journaled with it, so a teardown after a
# resume (another process) still finds what an earlier attempt left.
SCRATCH_KEY = "verifier_steps_scratch"
SCRATCH_PREFIX = "agentenv-verifier-steps-"
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*\Z")


class Criterion(BaseModel):
    """What every check of these steps may carry, as the built-in verifiers' criteria do."""

    model_config = ConfigDict(extra="forbid")

    description: str | None = None
    weight: float = 1.0


class Outcome(BaseModel):
    """One check's verdict before it becomes a row."""

    passed: bool
    justification: str
    skipped: bool = False
    extra: dict[str, Any] = Field(default_factory=dict)


def row(index: int, written: dict[str, Any], outcome: Outcome) -> dict[str, Any]:
    """A result row as the built-in verifiers record it: the criterion as written plus its verdict."""
    return {"criterion_index": index, **written, **outcome.extra, "result": outcome.passed,
            "score": 1 if outcome.passed else 0, "justification": outcome.justification,
            "skipped": outcome.skipped}


def name_problem(field: str, value: str | None) -> str | None:
    """A sandbox name must be a plain name (what deploy_sandbox's sandbox_name can be)."""
    if value is None or _PLAIN_NAME.match(value):
        return None
    return f"{field}: {value!r} is not a sandbox name (letters, digits, '_', '.', '-'; as deploy_sandbox names it)"


def open_scratch(ctx: StepContext) -> Path:
    """A fresh private folder for this step, recorded in the run's state before anything is written to it."""
    path = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX))
    ctx.state.setdefault(SCRATCH_KEY, []).append({"step_id": ctx.step.id, "path": str(path)})
    return path


def remove_scratch(ctx: StepContext) -> list[str]:
    """Remove every scratch folder this step opened in the run (its teardown); the paths removed."""
    removed, kept = [], []
    for entry in ctx.state.get(SCRATCH_KEY, []):
        path = Path(str(entry.get("path", "")))
        if entry.get("step_id") != ctx.step.id:
            kept.append(entry)
            continue
        # only folders this package made (a state edited by hand cannot make a teardown remove anything else)
        if path.name.startswith(SCRATCH_PREFIX) and path.parent == Path(tempfile.gettempdir()):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(str(path))
        else:
            kept.append(entry)
    ctx.state[SCRATCH_KEY] = kept
    return removed
