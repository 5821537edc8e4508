"""Parse and validate task JSON (a list of steps) into a Task whose steps form a DAG.

Everything wrong is reported at once, each problem naming the file, the step id and the field:
duplicate ids, unknown types, missing or bad fields, forward references, unknown dependencies,
cycles, bad retry anchors. Nothing runs until a task validates.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pydantic

from agentenv_local.errors import ValidationError
from agentenv_local.inputs import id_problem, read_json_file, refused, shorten
from agentenv_local.plugins import register_config_impls, registry
from agentenv_local.untrusted import UntrustedInputError, check_shape

from .step import Step


@dataclass
class Task:
    id: str
    steps: list[Step]
    version: int | None = None
    source: str | None = None  # where it came from, for messages
    description: str = ""
    # step id -> ids it waits for (explicit depends_on, or every earlier step when unset)
    edges: dict[str, list[str]] = field(default_factory=dict)

    def step(self, step_id: str) -> Step:
        for s in self.steps:
            if s.id == step_id:
                return s
        raise KeyError(step_id)

    def to_json(self) -> list[dict]:
        return [s.to_json() for s in self.steps]

    def levels(self) -> list[list[str]]:
        """Step ids grouped by dependency depth (for display)."""
        depth: dict[str, int] = {}
        for s in self.steps:  # steps only depend on earlier ones, so one pass suffices
            depth[s.id] = 1 + max((depth[d] for d in self.edges[s.id]), default=-1)
        out: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
        for sid, d in depth.items():
            out[d].append(sid)
        return out


class StepTypes(Mapping[str, type[Step]]):
    """The step types by name, each imported on first use: a task names a few of the 49 built-in types, and
    importing all of them cost a quarter of a one-shot `agentenv run hello`. Iterating gives the names that may
    work (registry().names) without importing any."""

    def __getitem__(self, name: str) -> type[Step]:
        cls = registry().get("task_steps", name)
        if cls is None:
            raise KeyError(name)
        return cls  # the registry checked it is a step type (tasks.step.plugin_problem)

    def __iter__(self) -> Iterator[str]:
        return iter(registry().names("task_steps"))

    def __len__(self) -> int:
        return len(registry().names("task_steps"))


def step_types(config: Any) -> Mapping[str, type[Step]]:
    """Every usable step type: the registry's (entry points, and types registered in code), plus the
    `[task_steps] impls` that `config` names; None: the registry's only.

    The config is passed in, not found here, so a command that parses a task before it connects to the
    hub (`agentenv run` loads the bundle first) knows the project's own step types all the same.
    """
    if config is not None:
        # Registering again is harmless; a bad impls line is warned about when the session connects,
        # and a task that uses it is told its type is unknown.
        register_config_impls(config)
    return StepTypes()


def load_task_file(path: Path, task_id: str | None = None, *, config: Any = None) -> Task:
    return parse_task(read_json_file(path), task_id or path.stem, source=str(path), config=config)


def parse_task(data: Any, task_id: str, source: str | None = None, version: int | None = None, *,
               config: Any = None) -> Task:
    """`config`: the project's configuration, whose `[task_steps] impls` are step types too."""
    where = source or f"task {task_id}"
    try:  # a stored or hand-built body was not parsed by us: check it as untrusted too
        check_shape(data, what=where)
    except UntrustedInputError as exc:
        raise ValidationError(refused(where, exc)) from None
    description = ""
    if isinstance(data, dict) and "steps" in data:  # also accept {"steps": [...], "description": ...}
        description = str(data.get("description", ""))
        data = data["steps"]
    if not isinstance(data, list):
        raise ValidationError(f"{where}: a task is a JSON list of steps, got {type(data).__name__}")
    if not data:
        raise ValidationError(f"{where}: the task has no steps")
    types = step_types(config)
    problems: list[str] = []
    steps: list[Step] = []
    seen: set[str] = set()
    every_id: list[str] = [raw["id"] for raw in data if isinstance(raw, dict) and isinstance(raw.get("id"), str)]
    for index, raw in enumerate(data):
        label = f"step #{index + 1}"
        if not isinstance(raw, dict):
            problems.append(f"{label}: must be an object, got {type(raw).__name__}")
            continue
        step_id = raw.get("id")
        if isinstance(step_id, str) and step_id and (why := id_problem(step_id)):
            problems.append(f"{label}: field 'id': {shorten(step_id)} cannot be a step id: {why}")
        elif isinstance(step_id, str) and step_id:
            label = f"step {step_id!r}"
            if step_id in seen:
                problems.append(f"{label}: duplicate step id (ids must be unique in a task)")
            seen.add(step_id)
        else:
            problems.append(f"{label}: field 'id': missing or not a non-empty string")
        step_type = raw.get("type")
        cls = types.get(step_type) if isinstance(step_type, str) else None
        if cls is None:
            if step_type is None:
                problems.append(f"{label}: field 'type': missing")
            else:
                reason = registry().failure("task_steps", str(step_type))
                problems.append(f"{label}: field 'type': {shorten(step_type)} is not a known step type"
                                + (f" (its plugin failed to load: {reason})" if reason else "")
                                + f"; known: {', '.join(sorted(types))}")
            continue
        fields = {k: v for k, v in raw.items() if k != "type"}
        # JSON has no inf or nan, but Python reads Infinity, NaN and 1e999 as them: no field means that.
        bad = [f"{label} ({step_type}): field '{loc}': {value} is not a finite number"
               for loc, value in _non_finite(fields)]
        if bad:
            problems += bad
            continue
        try:
            step = cls.model_validate(fields)
        except pydantic.ValidationError as exc:
            for err in exc.errors():
                loc = ".".join(str(p) for p in err["loc"]) or "(step)"
                msg = _unknown_field(cls, loc) if err["type"] == "extra_forbidden" else err["msg"]
                problems.append(f"{label} ({step_type}): field '{loc}': {msg}")
            continue
        try:
            problems += [f"{label} ({step_type}): {p}" for p in step.config_problems()]
        except Exception as exc:  # a step type's own checks (a plugin's too) tripped on a bad value
            problems.append(f"{label} ({step_type}): a field has a value of the wrong shape "
                            f"({type(exc).__name__}: {shorten(str(exc), 120, quote=False)}); "
                            "compare it with the step's fields in the docs")
        steps.append(step)
    # The graph is checked even when some steps are broken, so every problem is reported at once;
    # a dependency on a step that failed to parse is not reported again.
    edges = _check_graph(steps, problems, every_id)
    if problems:
        raise ValidationError(f"{where}: {len(problems)} problem(s); nothing was written or run", problems=problems)
    return Task(id=task_id, steps=steps, version=version, source=source, description=description, edges=edges)


def _non_finite(value: Any, at: str = "") -> list[tuple[str, float]]:
    """(dotted place, value) of every inf or nan inside a step's fields (nesting is already bounded)."""
    if isinstance(value, float) and not math.isfinite(value):
        return [(at or "(step)", value)]
    if isinstance(value, dict):
        return [hit for k, v in value.items() for hit in _non_finite(v, f"{at}.{k}" if at else str(k))]
    if isinstance(value, list):
        return [hit for i, v in enumerate(value) for hit in _non_finite(v, f"{at}.{i}")]
    return []


def _unknown_field(cls: type[Step], loc: str) -> str:
    """'unknown field', with the nearest valid name (or the valid names) for a top-level field."""
    if "." in loc:  # inside a nested object: its own model names the fields
        return "unknown field (typo?)"
    names = list(cls.model_fields)
    near = difflib.get_close_matches(loc, names, n=1, cutoff=0.6)
    return "unknown field (typo?)" + (f"; did you mean {near[0]!r}?" if near else f"; fields: {', '.join(names)}")


def _check_graph(steps: list[Step], problems: list[str], every_id: list[str] | None = None) -> dict[str, list[str]]:
    """Dependencies must name earlier steps (so the graph is acyclic by construction).

    `every_id` lists the ids of all steps in the file in order, including ones that failed to
    parse: positions come from it, and a dependency on a broken step is not reported twice.
    """
    order = every_id if every_id is not None else [s.id for s in steps]
    position: dict[str, int] = {}
    for i, sid in enumerate(order):
        position.setdefault(sid, i)
    parsed = {s.id for s in steps}
    edges: dict[str, list[str]] = {}
    for s in steps:
        i = position[s.id]
        if s.depends_on is None:
            edges[s.id] = [p.id for p in steps if position[p.id] < i]
            continue
        deps = []
        for dep in s.depends_on:
            if dep in position and dep not in parsed:
                continue  # that step's own problems are already listed
            if dep not in position:
                problems.append(f"step {s.id!r}: field 'depends_on': {shorten(dep)} is not a step of this task")
            elif dep == s.id:
                problems.append(f"step {s.id!r}: field 'depends_on': a step cannot depend on itself (cycle)")
            elif position[dep] > i:
                kind = "cycle" if _reaches(steps, position, dep, s.id) else "forward reference"
                problems.append(f"step {s.id!r}: field 'depends_on': {shorten(dep)} comes later in the task ({kind}); "
                                "list steps after the ones they depend on")
            else:
                deps.append(dep)
        edges[s.id] = deps
    complete = set(order) <= parsed  # with a broken step, ancestry is partial: don't guess
    for s in steps:
        anchor = s.retry_config.retry_from_step_id if s.retry_config else None
        if anchor and complete and anchor != s.id and anchor not in ancestors(edges, s.id):
            problems.append(f"step {s.id!r}: field 'retry_config.retry_from_step_id': {shorten(anchor)} must be "
                            "the step itself or one it depends on")
    return edges


def _reaches(steps: list[Step], position: dict[str, int], start: str, target: str) -> bool:
    """Does `start` (transitively, through depends_on) depend on `target`?"""
    by_id = {s.id: s for s in steps}
    stack, seen = [start], set()
    while stack:
        sid = stack.pop()
        if sid == target:
            return True
        if sid in seen:
            continue
        seen.add(sid)
        s = by_id[sid]
        deps = s.depends_on if s.depends_on is not None else [p.id for p in steps if position[p.id] < position[sid]]
        stack += [d for d in deps if d in by_id]
    return False


def ancestors(edges: dict[str, list[str]], step_id: str) -> set[str]:
    out, stack = set(), list(edges.get(step_id, []))
    while stack:
        sid = stack.pop()
        if sid not in out:
            out.add(sid)
            stack += edges.get(sid, [])
    return out
