"""Write a bundle's entities into the store as versioned records, only when their content changed.

Preflight first (every artifact or skill a task names must exist in the bundle or the store), then
artifacts, skills, envs, agents, tasks, evals. A dry run computes the same plan and writes nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
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


def preflight(store, bundle: Bundle, sandbox: str | None = None, agent: str | None = None) -> None:
    """Everything a task names that is not in the bundle must be in the store (artifacts, skills, envs of a type
    that deploys here, the agents deploy_agent starts), and every sandbox provider a run would use must be
    installed (`sandbox`, `agent`: the run's --sandbox and --agent, which override the steps' own), so a run
    that would fail before its first step fails here, a dry run too, with one line per problem."""
    from agentenv_local.tasks.model import step_types

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
    from agentenv_local.agents.registry import solver_step_ids

    for task in bundle.tasks.values():
        written = _written_artifacts(task.steps, types)
        solvers = solver_step_ids(task.steps)
        for raw in task.steps:
            cls = types.get(raw.get("type") or "")
            at = f"tasks/{task.source.name}: step {raw.get('id')!r}: field"
            for field_name, ref in _artifact_refs(raw, cls):
                if not ref or ref in bundle_ids or ref in written or "<" in ref:  # seeds' <key>: filled per run
                    continue
                if store.documents.find("artifacts", ref) is None:
                    here = ", ".join(bundle.artifacts) or "none"
                    problems.append(f"{at} {field_name!r}: artifact {ref!r} is not in this bundle (artifacts/: "
                                    f"{here}) nor in the store")
            problems += [f"{at} {where!r}: {problem}" for where, problem in _env_problems(store, bundle, raw, cls)]
            problems += [f"{at} {where!r}: {problem}" for where, problem in _agent_problems(store, bundle, raw, cls,
                                                                                          agent, solvers)]
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


def _artifact_refs(raw: dict, cls) -> list[tuple[str, str]]:
    """(where, artifact id) of every artifact a step's JSON names at a place its type declares (the
    reference's cloud-only fields left out: a run never reads them) and in an `artifacts` list."""
    from agentenv_local.tasks.entity_refs import ref_sites

    cloud_only = getattr(cls, "cloud_only_fields", {})
    refs = [(site.path, site.value) for site in ref_sites(raw, cls, "artifact") if site.field not in cloud_only]
    listed = raw.get("artifacts")
    for i, entry in enumerate(listed if isinstance(listed, list) else []):
        ref = entry.get("id") if isinstance(entry, dict) else entry
        if isinstance(ref, str):
            refs.append((f"artifacts[{i}]", ref))
    return refs


def _written_artifacts(steps: list[dict], types: Mapping[str, Any]) -> set[str]:
    """The artifact ids the task's steps write under the names they are given (their output fields), which a
    later step may read before any of them is stored."""
    from agentenv_local.tasks.entity_refs import ref_sites

    out = set()
    for raw in steps:
        for site in ref_sites(raw, types.get(raw.get("type") or ""), "output_artifact"):
            suffix = raw.get("universe_id_suffix")  # collect_artifacts appends it to the id
            out |= {site.value, site.value + suffix} if isinstance(suffix, str) else {site.value}
    return out


def _env_problems(store, bundle: Bundle, raw: dict, cls) -> list[tuple[str, str]]:
    """(where, why) for each env a step names that is neither the bundle's nor in the store, or whose stored
    record is of a type that cannot deploy here (the bundle's own envs' types: undeployable_env_problems)."""
    from agentenv_local.hosting.envs.env_types import env_type
    from agentenv_local.hosting.envs.reference_env_types import deploy_refusal
    from agentenv_local.tasks.entity_refs import ref_sites

    ours = {entry.id for entry in bundle.envs.values()}
    cloud_only = getattr(cls, "cloud_only_fields", {})
    out = []
    for site in ref_sites(raw, cls, "env"):
        if site.field in cloud_only or site.value in ours or "<" in site.value:  # seed placeholders: per run
            continue
        version = raw.get("env_version") if site.path == "env_id" else None
        doc = store.documents.find("envs", site.value, version if isinstance(version, int) else None)
        if doc is None:
            here = ", ".join(bundle.envs) or "none"
            aliases = f"; aliases.toml: {', '.join(bundle.env_aliases)}" if bundle.env_aliases else ""
            out.append((site.path, f"env {site.value!r} is not in this bundle (envs/: {here}{aliases}) nor in the "
                                   "store (`agentenv env list`)"))
            continue
        kind = str(doc["body"].get("type") or "mcp_server")
        if env_type(kind) is None:
            out.append((site.path, f"env {site.value!r} is of type {kind!r}, which no installed plugin provides "
                                   "(see `agentenv plugin list`)"))
        elif refusal := deploy_refusal(kind):
            out.append((site.path, f"env {site.value!r}: {refusal}"))
    return out


def _agent_problems(store, bundle: Bundle, raw: dict, cls, run_agent: str | None,
                    solvers: set[str] | None = None) -> list[tuple[str, str]]:
    """(where, why) when the agent a deploying step starts (the run's --agent for a solver step, one a
    prompt_agent prompts: `solvers`; else its a2a_agent_id, else --agent, else [agents] default, else the
    scripted agent) is neither a named agent, the bundle's, nor in the store. Steps that only check an agent
    the run deployed (verify_a2a_*) name it as deploy_agent did: nothing more to check."""
    from agentenv_local.agents import registry
    from agentenv_local.errors import AgentenvError
    from agentenv_local.tasks.entity_refs import declared_paths

    if not getattr(cls, "deploys", False) or "a2a_agent_id" not in declared_paths(cls, "agent"):
        return []
    default = bundle.config.get("agents.default") if bundle.config is not None else None
    swapped = run_agent if raw.get("id") in (solvers or set()) else None  # --agent replaces the solver's agent
    where, agent_id = next(((w, a) for w, a in (("--agent", swapped), ("a2a_agent_id", raw.get("a2a_agent_id")),
                                                 ("--agent", run_agent), ("[agents] default", default)) if a),
                           ("", "scripted"))
    if not isinstance(agent_id, str) or "<" in agent_id:  # seed placeholders resolve per run
        return []
    if agent_id in {a.id for a in bundle.agents.values()}:  # stored with the bundle, before its tasks
        return []
    version = raw.get("a2a_agent_version") if where == "a2a_agent_id" else None
    try:
        registry.resolve(store, agent_id, version if isinstance(version, int) else None)
    except AgentenvError as exc:
        from .agents import agent_names

        via = f" (from {where})" if where != "a2a_agent_id" else ""
        ours = f"; this bundle's agents: {', '.join(agent_names(bundle))}" if agent_names(bundle) else ""
        return [("a2a_agent_id", f"{exc.message}{via}" + (f"; {exc.hint}" if exc.hint else "") + ours)]
    return []


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


def materialize(store, bundle: Bundle, dry_run: bool = False, sandbox: str | None = None,
                agent: str | None = None) -> MaterializeResult:
    """`sandbox`, `agent`: the run's --sandbox and --agent (checked, with the providers and agents the steps
    name, before anything is written)."""
    from agentenv_local.compat.bundle_aliases import prefer_store_envs

    prefer_store_envs(store, bundle)  # a store's env of an alias's id wins over the alias (aliases.toml)
    preflight(store, bundle, sandbox, agent)
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
    for ag in bundle.agents.values():
        digest = _json_digest({"body": ag.body, "files": files_digest(ag.digest_files)})
        record("agents", ag.name, "agents", ag.id, digest, lambda ag=ag, digest=digest:
               store.documents.put("agents", ag.id, ag.body, digest=digest, if_changed=True))
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
            if (isinstance(ref, str) and ref in pinned and raw.get(version_field) is None
                    and cls is not None and version_field in cls.model_fields):  # a field the step takes
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
