"""`load_artifact`: copy the files of stored artifacts into a deployed sandbox.

A `file_artifact_universe` lands under `destination_path` with its relative paths; a `file`
artifact lands as its filename under `destination_path` (an `environment` as its file, an `environment_universe`
as `<environment_name>/<file>`, a `cli` as its tree). Each load is recorded in
`metadata.loaded_file_artifact_universes` (the reference's shape). With `env_id`, the files go
into the deployed env's data plane instead (see `env_loading.load_into_env`); with `agent_name`, into the
sandbox a deployed agent runs in. `collected_artifacts_step_id` (or the reference's `artifact_from_step_id`)
loads what an earlier `collect_artifacts` (or `snapshot_env`) step stored instead of a named artifact; `urls`
fetches files (see url_loads.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentenv_local import artifacts as artifact_types
from agentenv_local import typed_artifacts as typed
from agentenv_local.errors import AgentenvError, StepError
from agentenv_local.tasks.step import Step

from . import join_path, sandbox_or_container, url_loads
from .collect_artifacts import target_sandbox
from .url_loads import url_problems

if TYPE_CHECKING:
    from agentenv_local.tasks.context import StepContext

# environment artifacts land in a sandbox as their files (a universe's under <environment_name>/); with env_id
# each goes to the server it names (env_loading.load_into_env); a cli lands as its tree.
LOADABLE_TYPES = (artifact_types.FILE, artifact_types.BUNDLE, artifact_types.ENVIRONMENT,
                  artifact_types.ENVIRONMENT_UNIVERSE, typed.CLI)


class ArtifactRef(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    version: int | None = Field(default=None, ge=1)


class LoadArtifactStep(Step):
    type: ClassVar[str] = "load_artifact"
    # Bare artifact names are resolved by the bundle loader in these fields. The ids inside the
    # `artifacts` list (artifacts[].id) are refs too: a loader rewriting names must also call
    # `rewrite_artifact_refs` (below), which handles both places.
    artifact_ref_fields: ClassVar[tuple[str, ...]] = ("artifact_id",)
    env_ref_fields: ClassVar[tuple[str, ...]] = ("env_id",)

    artifact_id: str | None = None
    artifact_version: int | None = Field(default=None, ge=1)
    artifacts: list[ArtifactRef] | None = None
    collected_artifacts_step_id: str | None = None  # the files a collect_artifacts step stored
    sandbox_name: str | None = None  # None: the run's only deployed sandbox
    destination_path: str = "/app"
    env_id: str | None = None
    environment_name: str | None = None  # with env_id: the one service (child) to load into
    reset_first: bool = False  # with env_id: data/reset the target services before loading
    timeout_seconds: float = Field(default=600, gt=0)  # with env_id: per data-plane call
    agent_name: str | None = None
    urls: list[str | dict[str, str]] | None = None  # files fetched into the sandbox (steps/url_loads.py)
    artifact_from_step_id: str | None = None  # what an earlier collect_artifacts or snapshot_env step stored
    container_name: str | None = None  # the reference's container in a VM; for us a sandbox's name (wins)
    env_step_id: str | None = None  # with env_id: which deploy_env step's deployment (the latest when unset)
    # The reference's, accepted (cloud_only_fields says why it has no local meaning).
    snapshot_after_load: bool | None = None

    cloud_only_fields: ClassVar[dict[str, str]] = {
        "snapshot_after_load": "the reference snapshots its cloud VM after a load; local sandboxes are not snapshotted",
    }

    @field_validator("artifacts", mode="before")
    @classmethod
    def _bare_ids(cls, value: Any) -> Any:
        # ["a", {"id": "b", "version": 2}] is fine: a bare string is a ref to the latest version.
        if isinstance(value, list):
            return [{"id": v} if isinstance(v, str) else v for v in value]
        return value

    @classmethod
    def rewrite_artifact_refs(cls, raw: dict, resolve: Callable[[str], str]) -> dict:
        """A copy of a raw step dict with every artifact id (artifact_id and artifacts[].id) resolved."""
        out = dict(raw)
        for field in cls.artifact_ref_fields:
            if isinstance(out.get(field), str):
                out[field] = resolve(out[field])
        if isinstance(out.get("artifacts"), list):
            out["artifacts"] = [
                resolve(a) if isinstance(a, str)
                else {**a, "id": resolve(a["id"])} if isinstance(a, dict) and isinstance(a.get("id"), str) else a
                for a in out["artifacts"]
            ]
        return out

    def refs(self) -> list[ArtifactRef]:
        if self.artifact_id:
            return [ArtifactRef(id=self.artifact_id, version=self.artifact_version)]
        return list(self.artifacts or [])

    def step_refs(self, ctx: "StepContext") -> list[ArtifactRef]:
        """The artifact `artifact_from_step_id` names: what a collect_artifacts or snapshot_env step stored (none
        when it found nothing), as the reference's."""
        step_id = self.artifact_from_step_id
        collected = (ctx.metadata.get("collected_artifacts") or {}).get(step_id)
        if collected is not None:
            return self.collected_refs(ctx, step_id)
        snapshot = (ctx.metadata.get("env_snapshotted_universes") or {}).get(step_id)
        if isinstance(snapshot, dict) and snapshot.get("id"):
            return [ArtifactRef(id=snapshot["id"], version=snapshot.get("version"))]
        raise StepError(f"step {self.id!r}: step {step_id!r} recorded no artifact in this run",
                        hint=f"name a collect_artifacts or snapshot_env step that ran, and list {step_id!r} in "
                             "depends_on")

    def collected_refs(self, ctx: "StepContext", step_id: str | None = None) -> list[ArtifactRef]:
        """The artifact a collect_artifacts step stored (none when it found no files)."""
        step_id = step_id or self.collected_artifacts_step_id
        collected = ctx.metadata.get("collected_artifacts", {})
        entry = collected.get(step_id)
        if not isinstance(entry, dict):
            known = ", ".join(sorted(collected)) or "none yet"
            raise StepError(f"step {self.id!r}: step {step_id!r} has collected no artifacts in this run "
                            f"(collect_artifacts steps done: {known})",
                            hint=f"name a collect_artifacts step, and list {step_id!r} in depends_on")
        if not entry.get("id"):
            ctx.log(f"step {step_id!r} collected no files; nothing to load", level="warning")
            return []
        return [ArtifactRef(id=entry["id"], version=entry.get("version"))]

    def config_problems(self) -> list[str]:
        problems = []
        if self.artifact_from_step_id is not None:
            given = [f for f in ("artifact_id", "artifacts", "urls", "collected_artifacts_step_id")
                     if getattr(self, f) is not None]
            if given:
                problems.append(f"artifact_from_step_id, {', '.join(given)}: give one source, not both")
            if not self.artifact_from_step_id:
                problems.append("artifact_from_step_id: must not be empty")
        elif self.urls is not None and self.artifact_id is None and self.artifacts is None:
            if self.collected_artifacts_step_id is not None:
                problems.append("collected_artifacts_step_id, urls: give one source, not both")
            if not self.urls:
                problems.append("urls: the list is empty")
        elif self.collected_artifacts_step_id is not None:
            given = [f for f in ("artifact_id", "artifacts") if getattr(self, f) is not None]
            if given:
                problems.append(f"collected_artifacts_step_id, {', '.join(given)}: give one source, not both")
            if not self.collected_artifacts_step_id:
                problems.append("collected_artifacts_step_id: must not be empty")
        elif self.artifact_id and self.artifacts is not None:
            problems.append("artifact_id, artifacts: give one of them, not both")
        elif not self.artifact_id and self.artifacts is None:
            problems.append("artifact_id: name the artifact to load (or list several in artifacts)")
        elif self.artifacts is not None and not self.artifacts:
            problems.append("artifacts: the list is empty")
        if self.artifact_version is not None and not self.artifact_id:
            problems.append("artifact_version: only goes with artifact_id (pin versions inside artifacts instead)")
        targets = [f for f in ("sandbox_name", "env_id", "agent_name") if getattr(self, f)]
        if len(targets) > 1:
            problems.append(f"{', '.join(targets)}: load into one target per step")
        if self.urls:
            problems += url_problems(self.urls)
            if self.env_id:
                problems.append("urls, env_id: urls load into a sandbox, not an env")
        if not self.destination_path:
            problems.append("destination_path: must not be empty")
        if (self.environment_name or self.reset_first) and not self.env_id:
            problems.append("environment_name, reset_first: only go with env_id")
        return problems

    async def execute(self, ctx: "StepContext") -> None:
        if self.artifact_from_step_id or self.collected_artifacts_step_id:
            refs = self.step_refs(ctx) if self.artifact_from_step_id else self.collected_refs(ctx)
            if not refs:
                return
        else:
            refs = self.refs()
        if not refs and not self.urls:
            raise StepError(f"step {self.id!r}: nothing to load", hint="set artifact_id, artifacts or urls")
        # Resolve every artifact first, so a missing one fails the step before anything is written.
        loads = []
        for ref in refs:
            doc = ctx.artifact(ref.id, ref.version)
            kind = artifact_types.canonical_type(doc["body"].get("type"))
            if kind not in LOADABLE_TYPES:
                raise StepError(f"step {self.id!r}: artifact {ref.id!r} v{doc['version']} is a {kind!r} artifact; "
                                f"a sandbox takes {' or '.join(LOADABLE_TYPES)} artifacts")
            try:
                files = ctx.artifact_files(doc)
            except AgentenvError as exc:
                raise StepError(f"step {self.id!r}: cannot read artifact {ref.id!r} v{doc['version']}: {exc.message}",
                                hint=exc.hint) from exc
            loads.append((doc, kind, files))
        if self.env_id:
            from .env_loading import load_into_env

            await load_into_env(self, ctx, loads)
            return
        fetched = await self._fetch_urls()  # every URL read before anything is written
        # agent_name: the sandbox the agent runs in (the reference loads into the agent's workspace)
        name, sandbox = await target_sandbox(ctx, sandbox_or_container(self.sandbox_name, self.container_name),
                                             self.agent_name)
        for doc, kind, files in loads:
            for rel, data in sorted(files.items()):
                try:
                    await sandbox.write_file(join_path(self.destination_path, rel), data)
                except AgentenvError as exc:
                    raise StepError(f"step {self.id!r}: cannot write {rel!r} of artifact {doc['id']!r} into "
                                    f"sandbox {name!r}: {exc.message}", hint=exc.hint) from exc
            ctx.metadata.setdefault("loaded_file_artifact_universes", []).append({
                "id": doc["id"], "version": doc["version"], "artifact_type": kind, "sandbox_name": name,
                "destination_path": self.destination_path, "files": sorted(files),
            })
            ctx.log(f"loaded {len(files)} file(s) of {doc['id']} v{doc['version']} into {name}:{self.destination_path}")
        for url, filename, data in fetched:
            try:
                await sandbox.write_file(join_path(self.destination_path, filename), data)
            except AgentenvError as exc:
                raise StepError(f"step {self.id!r}: cannot write {filename!r} (from {url}) into sandbox {name!r}: "
                                f"{exc.message}", hint=exc.hint) from exc
            ctx.metadata.setdefault("loaded_urls", []).append({
                "url": url, "filename": filename, "bytes": len(data), "sandbox_name": name,
                "destination_path": self.destination_path, "step_id": self.id})
            ctx.log(f"loaded {url} into {name}:{join_path(self.destination_path, filename)} ({len(data)} bytes)")

    async def _fetch_urls(self) -> list[tuple[str, str, bytes]]:
        """(url, file name, bytes) for each of `urls`."""
        out = []
        try:
            for url, filename in url_loads.downloads(self.urls or []):
                out.append((url, filename, await url_loads.fetch(url, self.timeout_seconds)))
        except url_loads.UrlLoadError as exc:
            raise StepError(f"step {self.id!r}: urls: {exc.message}", hint=exc.hint) from None
        return out
