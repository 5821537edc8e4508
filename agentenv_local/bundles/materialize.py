"""Write a bundle's entities into the store as versioned records, only when their content changed.

Preflight first (every artifact or skill a task names must exist in the bundle or the store), then
artifacts, skills, envs, tasks, evals. A dry run computes the same plan and writes nothing.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from agentenv_local.artifacts import files_digest
from agentenv_local.errors import ValidationError
from agentenv_local.typed_artifacts import put_bundle_artifact

from .loader import Bundle, skill_refs


@dataclass
class PlanLine:
    kind: str  # artifacts | tasks | evals
    name: str
    id: str
    version: int
    status: str  # new | changed | unchanged

    def render(self) -> str:
        if self.status == "unchanged":
            return f"{self.kind}/{self.name}: v{self.version}, unchanged"
        return f"{self.kind}/{self.name}: v{self.version} ({self.status})"


@dataclass
class MaterializeResult:
    lines: list[PlanLine] = field(default_factory=list)
    task_versions: dict[str, tuple[str, int]] = field(default_factory=dict)  # name -> (id, version)
    eval_versions: dict[str, tuple[str, int]] = field(default_factory=dict)


def _json_digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _plan(store, collection: str, entity_id: str, digest: str) -> tuple[int, str]:
    latest = store.documents.find(collection, entity_id)
    if latest is None:
        return 1, "new"
    if latest.get("digest") == digest:
        return latest["version"], "unchanged"
    return latest["version"] + 1, "changed"


def preflight(store, bundle: Bundle, sandbox: str | None = None) -> None:
    """Everything a task names that is not in the bundle must be in the store, and every sandbox provider
    a run would use must be installed (`sandbox`: the run's --sandbox, which overrides the steps' own)."""
    from agentenv_local.tasks.model import step_types
    from agentenv_local.tasks.step import artifact_refs

    types = step_types(bundle.config)
    bundle_ids = {a.id for a in bundle.artifacts.values()} | {s.id for s in bundle.skills.values()}
    problems = []
    for entry in bundle.envs.values():
        for ref in getattr(entry.env, "refs", lambda: [])():
            if ref.env not in bundle.envs and store.documents.find("envs", ref.env, ref.version) is None:
                problems.append(f"envs/{entry.name}/env.toml: mcp_server_envs: {ref.env!r} is not in this bundle "
                                f"(envs/: {', '.join(bundle.envs)}) nor in the store")
    from agentenv_local.hosting.envs.reference_env_types import undeployable_env_problems

    problems += undeployable_env_problems(bundle, types)  # the reference's env types that cannot run offline
    for task in bundle.tasks.values():
        for raw in task.steps:
            cls = types.get(raw.get("type") or "")
            for field_name, ref in artifact_refs(raw, cls):
                if not ref or ref in bundle_ids or "<" in ref:  # seed placeholders resolve per run
                    continue
                if store.documents.find("artifacts", ref) is None:
                    here = ", ".join(bundle.artifacts) or "none"
                    problems.append(f"tasks/{task.source.name}: step {raw.get('id')!r}: field {field_name!r}: "
                                    f"artifact {ref!r} is not in this bundle (artifacts/: {here}) nor in the store")
            for ref in skill_refs(raw):
                if ref in bundle_ids or "<" in ref:
                    continue
                doc = store.documents.find("artifacts", ref)
                if doc is None or doc["body"].get("type") != "skill":
                    here = ", ".join(bundle.skills) or "none"
                    what = "is not a skill" if doc is not None else "is not in this bundle"
                    problems.append(f"tasks/{task.source.name}: step {raw.get('id')!r}: field 'skills': skill "
                                    f"{ref!r} {what} (skills/: {here})" + ("" if doc else " nor in the store"))
            if not sandbox and isinstance(raw.get("sandbox_type"), str):
                mode = raw.get("sandbox_mode") if raw.get("type") == "deploy_sandbox" else "container"
                if problem := _provider_problem(raw["sandbox_type"], mode if isinstance(mode, str) else "vm"):
                    problems.append(f"tasks/{task.source.name}: step {raw.get('id')!r}: field 'sandbox_type': "
                                    f"{problem}")
    if sandbox and (problem := _provider_problem(sandbox, "vm")):
        problems.append(f"--sandbox: {problem}")
    if problems:
        raise ValidationError(f"bundle {bundle.path}: {len(problems)} problem(s); nothing was written or run",
                              problems=problems)


def _provider_problem(name: str, mode: str) -> str | None:
    """Why sandbox provider `name` (a fallback chain too) cannot be used here, or None."""
    from agentenv_local.errors import AgentenvError
    from agentenv_local.plugins import registry
    from agentenv_local.tasks.sandbox_names import our_sandbox_type

    try:
        ours = [n for n in our_sandbox_type(name, mode).split(",") if n]
    except AgentenvError as exc:
        return f"{exc.message} ({exc.hint})" if exc.hint else exc.message
    chain = [n for part in ours for n in (("podman", "process") if part == "auto" else (part,))]
    if any(registry().get("sandbox_providers", n) is not None for n in chain):
        return None
    installed = ", ".join(sorted(registry().available("sandbox_providers"))) or "none"
    return f"no sandbox provider named {name!r} is installed (installed: {installed}; see `agentenv plugin list`)"


def materialize(store, bundle: Bundle, dry_run: bool = False, sandbox: str | None = None) -> MaterializeResult:
    """`sandbox`: the run's --sandbox (checked, with the providers the steps name, before anything is written)."""
    from agentenv_local.compat.bundle_aliases import prefer_store_envs

    prefer_store_envs(store, bundle)  # a store's env of an alias's id wins over the alias (aliases.toml)
    preflight(store, bundle, sandbox)
    result = MaterializeResult()

    def record(kind: str, name: str, collection: str, entity_id: str, digest: str, write) -> int:
        """Plan one entity; write it (if its content changed) unless this is a dry run."""
        version, status = _plan(store, collection, entity_id, digest)
        if status != "unchanged" and not dry_run:
            doc = write()  # with if_changed: a concurrent identical write makes no second version
            version, status = doc["version"], "unchanged" if doc.get("unchanged") else status
        result.lines.append(PlanLine(kind, name, entity_id, version, status))
        return version

    pinned: dict[str, int] = {}  # bundle artifact id -> the version this run stores
    for art in bundle.artifacts.values():
        digest = files_digest(art.files, {"type": art.artifact_type, "description": art.description, **art.settings})
        pinned[art.id] = record("artifacts", art.name, "artifacts", art.id, digest, lambda art=art, digest=digest:
                                put_bundle_artifact(store, art.id, art.files, art.artifact_type, art.settings,
                                                    description=art.description, digest=digest,
                                                    extra={"bundle": str(bundle.path)}, if_changed=True))
    if bundle.skills:
        from agentenv_local.skills import put_skill, skill_digest

        for sk in bundle.skills.values():
            digest = skill_digest(sk.files)
            pinned[sk.id] = record("skills", sk.name, "artifacts", sk.id, digest, lambda sk=sk, digest=digest:
                                   put_skill(store, sk.id, sk.files, digest=digest,
                                             extra={"bundle": str(bundle.path)}, if_changed=True))
    _materialize_envs(store, bundle, record, dry_run)
    for task in bundle.tasks.values():
        steps = pin_versions(task.steps, pinned, bundle.config)
        body = {"steps": steps, "description": task.description, "source": f"tasks/{task.source.name}",
                "bundle": str(bundle.path)}
        digest = _json_digest({"steps": steps, "description": task.description})
        version = record("tasks", task.source.name, "tasks", task.id, digest,
                         lambda task=task, body=body, digest=digest:
                         store.documents.put("tasks", task.id, body, digest=digest, if_changed=True))
        result.task_versions[task.name] = (task.id, version)
    for ev in bundle.evals.values():
        tasks = [{"task_id": result.task_versions[n][0], "task_version": result.task_versions[n][1]}
                 for n in ev.task_names]
        body = {"tasks": tasks, "source": f"evals/{ev.source.name}"}
        digest = _json_digest(tasks)
        version = record("evals", ev.source.name, "evals", ev.id, digest, lambda ev=ev, body=body, digest=digest:
                         store.documents.put("evals", ev.id, body, digest=digest, if_changed=True))
        result.eval_versions[ev.name] = (ev.id, version)
    return result


def _materialize_envs(store, bundle: Bundle, record, dry_run: bool) -> None:
    """Server envs first, then multi envs pinned to the versions of the bundle's servers."""
    if not bundle.envs:
        return
    from agentenv_local.hosting.envs import MultiEnv
    from agentenv_local.hosting.envs.store import env_body

    versions: dict[str, int] = {}
    for entry in sorted(bundle.envs.values(), key=lambda e: isinstance(e.env, MultiEnv)):
        body = env_body(store, entry.id, entry.env, entry.files, default_name=entry.name, dry_run=dry_run)
        if isinstance(entry.env, MultiEnv):
            body["mcp_server_envs"] = [
                {"env": bundle.envs[r.env].id, "version": r.version or versions[r.env]} if r.env in bundle.envs
                else r.model_dump(exclude_none=True) for r in entry.env.refs()]
        digest = _json_digest(body)
        versions[entry.name] = record("envs", entry.name, "envs", entry.id, digest,
                                      lambda entry=entry, body=body, digest=digest:
                                      store.documents.put("envs", entry.id, body, digest=digest, if_changed=True))


def pin_versions(steps: list[dict], pinned: dict[str, int], config: Any = None) -> list[dict]:
    """Pin each reference to a bundle artifact to the version stored now, so a task version always
    means the same inputs: changing an artifact makes a new task version too.

    `<name>_id` fields get `<name>_version` (artifact_id -> artifact_version); entries of an
    `artifacts` list get `version`; skill ids in a `skills` list become `{"id", "version"}` (a
    `{"skill_artifact_id"}` entry gets `skill_artifact_version`). A version the task already names is left alone.
    """
    from agentenv_local.tasks.model import step_types

    types = step_types(config)  # `config`: the project's, whose [task_steps] impls are step types too
    out = []
    for raw in steps:
        raw = dict(raw)
        cls = types.get(raw.get("type") or "")
        for field_name in getattr(cls, "artifact_ref_fields", ()):
            ref = raw.get(field_name)
            version_field = field_name.removesuffix("_id") + "_version"
            if isinstance(ref, str) and ref in pinned and raw.get(version_field) is None:
                raw[version_field] = pinned[ref]
        if isinstance(raw.get("artifacts"), list):
            raw["artifacts"] = [
                {"id": a, "version": pinned[a]} if isinstance(a, str) and a in pinned
                else {**a, "version": pinned[a["id"]]} if isinstance(a, dict) and a.get("id") in pinned
                and a.get("version") is None else a
                for a in raw["artifacts"]]
        if isinstance(raw.get("skills"), list):
            raw["skills"] = [_pin_skill(s, pinned) for s in raw["skills"]]
        out.append(raw)
    return out


def _pin_skill(entry: object, pinned: dict[str, int]) -> object:
    if isinstance(entry, str) and entry in pinned:
        return {"id": entry, "version": pinned[entry]}
    if isinstance(entry, dict):
        if entry.get("id") in pinned and entry.get("version") is None:
            return {**entry, "version": pinned[entry["id"]]}
        if entry.get("skill_artifact_id") in pinned and entry.get("skill_artifact_version") is None:
            return {**entry, "skill_artifact_version": pinned[entry["skill_artifact_id"]]}
    return entry
