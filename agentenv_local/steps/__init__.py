"""The built-in task steps, one module per family.

They register through the `agentenv_local.task_steps` entry points in pyproject.toml, exactly like
a plugin's steps; importing this package imports none of them. What is here is shared by several
step modules: finding the run's sandboxes, joining sandbox paths, checking criteria lists.
"""

from __future__ import annotations

import posixpath
import re
from typing import TYPE_CHECKING, Any

from agentenv_local.errors import StepError

if TYPE_CHECKING:
    from agentenv_local.tasks.context import StepContext


def live_sandbox_records(ctx: "StepContext") -> list[dict]:
    """The run's deployed sandboxes that are not torn down yet, in deploy order."""
    gone = set(ctx.metadata.get("torn_down_sandbox_ids", []))
    return [r for r in ctx.state.get("deployed_sandboxes", []) if r.get("sandbox_id") not in gone]


def sandbox_or_container(sandbox_name: str | None, container_name: str | None) -> str | None:
    """The sandbox a step that takes the reference's pair means. The reference names a VM (sandbox_name)
    and the task container inside it (container_name); here run_docker_container deploys that container as
    a sandbox of its own name, so the container wins."""
    return container_name or sandbox_name


def resolve_sandbox_name(ctx: "StepContext", name: str | None) -> str:
    """`name`, or the run's only live sandbox when `name` is None."""
    if name:
        return name
    live = live_sandbox_records(ctx)
    if len(live) == 1:
        return live[0]["sandbox_name"]
    if not live:
        raise StepError(f"step {ctx.step.id!r}: no sandbox is deployed in this run",
                        hint="add a deploy_sandbox step and list it in depends_on")
    names = ", ".join(r["sandbox_name"] for r in live)
    raise StepError(f"step {ctx.step.id!r}: {len(live)} sandboxes are deployed ({names}); say which one",
                    hint="set sandbox_name")


def not_yet(ctx: "StepContext", what: str, issue: str) -> StepError:
    return StepError(f"step {ctx.step.id!r}: {what} comes with the {issue} issue; not supported yet",
                     hint="use sandbox_name for now")


def join_path(base: str, path: str) -> str:
    """A relative path joined to `base`; an absolute one as given."""
    return path if path.startswith("/") else posixpath.join(base, path)


def tail(text: str, limit: int = 400) -> str:
    text = (text or "").strip()
    return text if len(text) <= limit else "…" + text[-limit:]


def regex_problem(pattern: Any, flags: int = 0) -> str | None:
    """Why `pattern` is not a usable regex, or None."""
    if not isinstance(pattern, str):
        return f"must be a string, not {type(pattern).__name__}"
    try:
        re.compile(pattern, flags)
    except re.error as exc:
        return f"{pattern!r} does not compile: {exc}"
    return None


def string_list(value: Any) -> list[str] | None:
    """A non-empty list of non-empty strings (a lone string counts as a list of one), or None."""
    if isinstance(value, str):
        value = [value]
    if isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
        return value
    return None


def criteria_shape_problems(criteria: list, field: str = "criteria") -> list[str]:
    """Problems common to every criteria list: empty, items not objects, type or weight wrong."""
    if not criteria:
        return [f"{field}: needs at least one criterion"]
    problems = []
    for i, criterion in enumerate(criteria):
        where = f"{field}[{i}]"
        if not isinstance(criterion, dict):
            problems.append(f"{where}: must be an object with a \"type\", not {type(criterion).__name__}")
            continue
        if not isinstance(criterion.get("type"), str) or not criterion.get("type"):
            problems.append(f"{where}: needs a \"type\"")
        weight = criterion.get("weight")
        if weight is not None and (isinstance(weight, bool) or not isinstance(weight, (int, float))):
            problems.append(f"{where}.weight: must be a number, not {weight!r}")
    return problems
