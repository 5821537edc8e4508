"""The base every task step derives from, built-in or plugin.

A step is a pydantic model: its fields are the step's JSON keys (unknown keys are an error, so a
typo is caught before anything runs). Subclasses set `type` and implement `execute`. Every field the
reference's step of the same type takes is a field here too; the ones that only mean something in the
cloud are listed in `cloud_only_fields`, and a run notes each one a task sets (`cloud_only_notes`).

    class Greet(Step):
        type: ClassVar[str] = "greet"
        name: str
        async def execute(self, ctx: StepContext) -> None:
            ctx.log(f"hello {self.name}")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

if TYPE_CHECKING:
    from .context import StepContext


class RetryConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    retry_from_step_id: str | None = Field(default=None, alias="go_to_step_id")
    max_retries: int = Field(default=1, ge=0, le=100)


class Step(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    type: ClassVar[str] = ""
    # Fields that name stored entities, so bundles can resolve bare names in them.
    artifact_ref_fields: ClassVar[tuple[str, ...]] = ()
    # Fields that name envs (bare names resolve to the bundle's envs/<name>).
    env_ref_fields: ClassVar[tuple[str, ...]] = ()
    # True for steps that create something their teardown removes (a sandbox, an env, an agent):
    # resuming a run that was already torn down runs them, and what depends on them, again.
    deploys: ClassVar[bool] = False
    # True for steps that only read and record (verifiers, judges, snapshots): a resume keeps their
    # recorded result even when something they looked at has to be deployed again (tasks/resume.py).
    records_only: ClassVar[bool] = False
    # The reference's fields that have no local meaning (field -> why): accepted so a reference task
    # validates, and never silently ignored: the runner logs one line for each one a task sets.
    cloud_only_fields: ClassVar[dict[str, str]] = {}

    id: str = Field(min_length=1)
    version: int | None = None
    depends_on: list[str] | None = None  # None: after every earlier step (the reference's rule)
    fail_task_on_error: bool = True
    retry_config: RetryConfig | None = None

    @field_validator("depends_on", mode="before")
    @classmethod
    def _normalize_depends_on(cls, value: Any) -> Any:
        # The reference also accepts [{"task_step_id": "x"}].
        if isinstance(value, list):
            return [v.get("task_step_id") if isinstance(v, dict) else v for v in value]
        return value

    def cloud_only_notes(self) -> list[str]:
        """One line per cloud-only field this step's JSON sets (see `cloud_only_fields`)."""
        return [f"step {self.id!r}: field {name!r} is accepted but has no local meaning: {why}"
                for name, why in self.cloud_only_fields.items() if name in self.model_fields_set]

    def config_problems(self) -> list[str]:
        """Pure checks of the step's own fields beyond their types (no store, no I/O)."""
        return []

    def config_preflight(self, config: Any, overrides: dict | None = None) -> list[str]:
        """What this step needs from the configuration and does not find (checked when a run is submitted,
        before any step runs): e.g. a model endpoint for a role. `config` has `.get("a.b")`; `overrides` are
        the run's own settings (`--agent`, `--sandbox`)."""
        return []

    def lost_on_resume(self, state: dict, services: Any) -> bool:
        """For a deploying step that completed before its run stopped: is what it deployed gone (it
        lived in a hub that died)? `state` is the run's state from its journal. Then a resume runs
        it again (tasks/resume.py)."""
        return False

    async def execute(self, ctx: "StepContext") -> None:  # pragma: no cover - abstract
        raise NotImplementedError(f"step type {self.type!r} does not implement execute()")

    async def teardown(self, ctx: "StepContext") -> None:
        """Undo what execute deployed; called once per run, pass or fail, in reverse order."""

    def to_json(self) -> dict:
        data = self.model_dump(mode="json", exclude_none=True, by_alias=False)
        return {"id": data.pop("id"), "type": self.type, **data}


def artifact_refs(raw: dict, cls: type[Step] | None) -> list[tuple[str, str]]:
    """(field, artifact id) for every artifact a step's JSON names: its `artifact_ref_fields`, and
    the entries of an `artifacts` list (`"id"` or `{"id": ...}`)."""
    refs = [(f, raw[f]) for f in getattr(cls, "artifact_ref_fields", ()) if isinstance(raw.get(f), str)]
    for entry in raw.get("artifacts") or []:
        ref = entry.get("id") if isinstance(entry, dict) else entry
        if isinstance(ref, str):
            refs.append(("artifacts", ref))
    return refs


def plugin_problem(name: str, obj: Any) -> str | None:
    """Why `obj` cannot be the step type `name` (an `agentenv_local.task_steps` entry), or None."""
    if not (isinstance(obj, type) and issubclass(obj, Step)):
        return "a task step must be a subclass of agentenv_local.tasks.step.Step"
    if obj.type != name:
        return f"the class's type is {obj.type!r} but it is registered as {name!r}"
    return None
