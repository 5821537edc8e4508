"""`collect_artifacts`: copy files out of a deployed sandbox into one stored file-bundle artifact.

Which files, first source that gives any (the reference's priority):
1. `manifest_step_id`: an earlier step's structured output `{"artifacts": {logical_name: path}}`
   (a prompt response's `structured_output` with that step or prompt id, else that step's
   `run_code` result in `metadata.script_results`);
2. the seed's `artifacts_key` entry (a comma-separated string, or a list);
3. `artifact_paths`;
4. none of these: every file under `base_path`.
Relative entries join `base_path`; absolute ones are read as given; a directory entry brings every
file under it. In the bundle a file is named by its path relative to `base_path` (or, outside
it, by its absolute path without the leading `/`).

Written only against the Sandbox interface (exec, read_file, exists, list_files), so it works
with any provider. The run records `metadata.collected_artifacts[step_id]` and an entry in
`metadata.artifacts`; `load_artifact` with `collected_artifacts_step_id` copies the files back in.
"""

from __future__ import annotations

import hashlib
import posixpath
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field, field_validator

from agentenv_local import artifacts as artifact_types
from agentenv_local.errors import AgentenvError, NotFoundError, StepError
from agentenv_local.tasks.step import Step

from . import join_path, resolve_sandbox_name, sandbox_or_container

if TYPE_CHECKING:
    from agentenv_local.sandbox_api import Sandbox
    from agentenv_local.tasks.context import StepContext

MiB = 1024 * 1024
DEFAULT_MAX_FILE_BYTES = 50 * MiB
# Prints each argument's size in bytes (or -1 when it is not a regular file, or is a link), one per line.
_SIZES_SCRIPT = ('for f in "$@"; do if [ -f "$f" ] && [ ! -L "$f" ]; then wc -c < "$f" | tr -d " "; '
                 'else echo -1; fi; done')
_SIZES_CHUNK = 256


class _Refused(StepError):
    """A StepError of this step's own (not one the sandbox raised while reading)."""


# -- shared with the unit-tests verifier ------------------------------------------------------
def bundle_name(base: str, path: str) -> str:
    """The name a sandbox file gets in a bundle: relative to `base` when under it, else the
    absolute path without its leading '/'. `path` is already normalized."""
    base = posixpath.normpath(base)
    if path == base:
        return posixpath.basename(path)
    if path.startswith(base.rstrip("/") + "/"):
        return path[len(base.rstrip("/")) + 1:]
    return path.lstrip("/")


def normalized(base: str, path: str) -> str:
    return posixpath.normpath(join_path(base, path))


async def file_sizes(sandbox: Sandbox, paths: list[str]) -> dict[str, int]:
    """{path: size} for the regular files among `paths`, asked with one command per chunk (best
    effort: a sandbox whose shell cannot answer gives {} and sizes are checked after reading)."""
    sizes: dict[str, int] = {}
    for start in range(0, len(paths), _SIZES_CHUNK):
        chunk = paths[start:start + _SIZES_CHUNK]
        try:
            result = await sandbox.exec(["bash", "-c", _SIZES_SCRIPT, "sizes", *chunk], timeout=60)
        except AgentenvError:
            return sizes
        lines = result.stdout.split()
        if not result.ok or len(lines) != len(chunk):
            return sizes
        for path, text in zip(chunk, lines):
            if text.lstrip("-").isdigit() and int(text) >= 0:
                sizes[path] = int(text)
    return sizes


def too_big(path: str, size: int, limit: int, field: str = "max_file_bytes") -> str:
    return f"{path} is {size:,} bytes, over the {limit:,}-byte limit ({field})"


async def read_capped(sandbox: Sandbox, path: str, limit: int, known_size: int | None = None,
                      field: str = "max_file_bytes") -> bytes:
    """The file's bytes; raises ValueError (its message ready to show) when it is over `limit`."""
    if known_size is not None and known_size > limit:
        raise ValueError(too_big(path, known_size, limit, field))
    data = await sandbox.read_file(path)
    if len(data) > limit:
        raise ValueError(too_big(path, len(data), limit, field))
    return data


def file_entry(path: str, data: bytes, **extra: Any) -> dict:
    return {"path": path, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(), **extra}


# -- the step ---------------------------------------------------------------------------------
class CollectArtifactsStep(Step):
    type: ClassVar[str] = "collect_artifacts"
    env_ref_fields: ClassVar[tuple[str, ...]] = ("env_id",)
    output_artifact_ref_fields: ClassVar[tuple[str, ...]] = ("artifact_id",)  # + universe_id_suffix

    sandbox_name: str | None = None  # None: the run's only deployed sandbox
    container_name: str | None = None  # the reference's container in a VM; for us a sandbox's name (wins)
    agent_name: str | None = None  # the sandbox a deployed agent runs in
    env_id: str | None = None  # a computer-use env: its files through its tools (steps/env_files.py)
    base_path: str = Field(default="/app/artifact", min_length=1)
    artifacts_key: str = "expected_artifacts"
    artifact_paths: list[str] | None = None
    manifest_step_id: str | None = None
    exclude_basenames: list[str] = Field(default_factory=list)
    artifact_id: str | None = None  # None: <run_id>__<step_id>-artifacts
    universe_id_suffix: str | None = None  # appended to the artifact id (the reference's: one per seed)
    allow_missing: bool = False
    max_file_bytes: int = Field(default=DEFAULT_MAX_FILE_BYTES, gt=0)

    @field_validator("artifact_paths", "exclude_basenames", mode="before")
    @classmethod
    def _lone_string(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    def config_problems(self) -> list[str]:
        problems = []
        targets = [f for f in ("sandbox_name", "agent_name", "env_id") if getattr(self, f)]
        if self.container_name and "sandbox_name" not in targets:
            targets.insert(0, "container_name")
        if len(targets) > 1:
            problems.append(f"{', '.join(targets)}: collect from one target per step")
        if self.artifact_paths is not None and not self.artifact_paths:
            problems.append("artifact_paths: the list is empty (leave it out to collect everything under base_path)")
        if any(not p for p in self.artifact_paths or []):
            problems.append("artifact_paths: entries must be non-empty paths")
        if any(not b or "/" in b for b in self.exclude_basenames):
            problems.append("exclude_basenames: entries are file names (non-empty, no '/')")
        if self.artifact_id is not None and not self.artifact_id.strip():
            problems.append("artifact_id: must not be empty")
        if self.manifest_step_id == self.id:
            problems.append("manifest_step_id: names this step itself")
        return problems

    def bundle_id(self, ctx: StepContext) -> str:
        return (self.artifact_id or f"{ctx.run_id}__{self.id}-artifacts") + (self.universe_id_suffix or "")

    async def execute(self, ctx: StepContext) -> None:
        problems = self.config_problems()
        if problems:
            raise StepError(f"step {self.id!r} is misconfigured: " + "; ".join(problems))
        if self.env_id:  # a computer-use env: its files through its cua_bash / cua_get_file tools
            from .env_files import EnvFiles
            from .env_gateway import EnvGateway

            async with EnvGateway(ctx, self.env_id, timeout=120) as gw:
                await self._collect(ctx, f"env {self.env_id}", EnvFiles(gw, self.id))
            return
        name, sandbox = await target_sandbox(ctx, sandbox_or_container(self.sandbox_name, self.container_name),
                                             self.agent_name)
        await self._collect(ctx, name, sandbox)

    async def _collect(self, ctx: StepContext, name: str, sandbox: Any) -> None:
        """Collect from `sandbox` (a Sandbox, or an env's EnvFiles) into the artifact; `name` says where."""
        source, entries = self._paths(ctx)
        base = posixpath.normpath(self.base_path)
        try:
            files, missing, excluded = await self._gather(sandbox, base, entries)
        except _Refused:
            raise
        except AgentenvError as exc:
            raise StepError(f"step {self.id!r}: cannot read from sandbox {name!r}: {exc.message}",
                            hint=exc.hint) from exc
        if missing and not self.allow_missing:
            raise StepError(f"step {self.id!r}: {len(missing)} listed path(s) missing in sandbox {name!r}: "
                            + ", ".join(missing), hint="set allow_missing: true to collect what is there")
        if missing:
            ctx.log(f"missing, skipped: {', '.join(missing)}", level="warning")
        if excluded:
            ctx.log(f"excluded by exclude_basenames: {', '.join(excluded)}")
        record: dict[str, Any] = {"id": None, "version": None, "artifact_type": artifact_types.BUNDLE,
                                  "sandbox_name": name, "base_path": base, "source": source,
                                  "files": {}, "missing": missing, "excluded": excluded}
        if self.agent_name:
            record["agent_name"] = self.agent_name
        if self.env_id:
            record.update(sandbox_name=None, env_id=self.env_id)
        if not files:
            where = f"under {base}" if source == "base_path" else f"from the {source} list"
            ctx.log(f"no files {where} in sandbox {name!r}; nothing stored", level="warning")
            ctx.metadata.setdefault("collected_artifacts", {})[self.id] = record
            return
        artifact_id = self.bundle_id(ctx)
        contents = {rel: data for rel, (data, _entry) in files.items()}
        try:
            doc = artifact_types.put_artifact(
                ctx.store, artifact_id, contents, artifact_type=artifact_types.BUNDLE,
                description=f"files collected from {name if self.env_id else f'sandbox {name}'} "
                            f"(run {ctx.run_id}, step {self.id})",
                extra={"collected": {"run_id": ctx.run_id, "step_id": self.id, "sandbox_name": name,
                                     "base_path": base, "source": source}})
        except AgentenvError as exc:
            raise StepError(f"step {self.id!r}: cannot store artifact {artifact_id!r}: {exc.message}") from exc
        record.update(id=doc["id"], version=doc["version"], files={rel: entry for rel, (_d, entry) in files.items()})
        ctx.metadata.setdefault("collected_artifacts", {})[self.id] = record
        add_run_artifact(ctx, doc, kind="collected")
        total = sum(len(d) for d, _e in files.values())
        ctx.log(f"collected {len(files)} file(s), {total:,} bytes, from {name} as {doc['id']} v{doc['version']}")

    # -- which paths ------------------------------------------------------------------------
    def _paths(self, ctx: StepContext) -> tuple[str, list[tuple[str, str | None]] | None]:
        """(source, [(path, logical name)]), or (\"base_path\", None) to enumerate base_path."""
        if self.manifest_step_id:
            manifest = find_manifest(ctx, self.manifest_step_id)
            if manifest:
                return "manifest", [(path, logical) for logical, path in manifest.items()]
            ctx.log(f"step {self.manifest_step_id!r} left no artifacts manifest; using the next path source",
                    level="warning")
        seeded = ctx.metadata.get("seed", {}).get(self.artifacts_key)
        if isinstance(seeded, str):
            seeded = [p.strip() for p in seeded.split(",")]
        if isinstance(seeded, list):
            paths = [p.strip() for p in seeded if isinstance(p, str) and p.strip()]
            if paths:
                return "seed", [(p, None) for p in paths]
        if self.artifact_paths:
            return "artifact_paths", [(p, None) for p in self.artifact_paths]
        return "base_path", None

    async def _gather(self, sandbox: Sandbox, base: str, entries: list[tuple[str, str | None]] | None):
        """({bundle name: (bytes, file entry)}, missing listed paths, excluded paths)."""
        wanted: list[tuple[str, str, str | None]] = []  # (sandbox path, bundle name, logical name)
        missing: list[str] = []
        if entries is None:
            if await sandbox.exists(base, "dir"):
                wanted = [(posixpath.join(base, rel), rel, None) for rel in await sandbox.list_files(base)]
        else:
            for raw, logical in entries:
                path = normalized(base, raw)
                if await sandbox.exists(path, "file"):
                    wanted.append((path, bundle_name(base, path), logical))
                elif await sandbox.exists(path, "dir"):
                    for rel in await sandbox.list_files(path):
                        full = posixpath.join(path, rel)
                        wanted.append((full, bundle_name(base, full), logical))
                else:
                    missing.append(raw)
        excluded = [p for p, _n, _l in wanted if posixpath.basename(p) in self.exclude_basenames]
        wanted = [w for w in wanted if posixpath.basename(w[0]) not in self.exclude_basenames]
        sizes = await file_sizes(sandbox, [p for p, _n, _l in wanted])
        over = [too_big(p, sizes[p], self.max_file_bytes) for p, _n, _l in wanted
                if sizes.get(p, 0) > self.max_file_bytes]
        if over:
            raise _Refused(f"step {self.id!r}: file(s) too big to collect: " + "; ".join(over),
                            hint="raise max_file_bytes, or leave the file out (exclude_basenames, artifact_paths)")
        files: dict[str, tuple[bytes, dict]] = {}
        for path, rel, logical in wanted:
            if rel in files:
                if files[rel][1]["path"] == path:
                    continue  # listed twice
                raise _Refused(f"step {self.id!r}: {files[rel][1]['path']} and {path} would both be "
                                f"named {rel!r} in the artifact", hint="collect them in separate steps")
            try:
                data = await read_capped(sandbox, path, self.max_file_bytes, sizes.get(path))
            except ValueError as exc:
                raise _Refused(f"step {self.id!r}: file too big to collect: {exc}",
                                hint="raise max_file_bytes, or leave the file out") from exc
            except NotFoundError:  # removed since it was listed
                missing.append(path)
                continue
            extra = {"logical_name": logical} if logical else {}
            files[rel] = (data, file_entry(path, data, **extra))
        return files, missing, excluded


# -- helpers ----------------------------------------------------------------------------------
async def target_sandbox(ctx: StepContext, sandbox_name: str | None, agent_name: str | None):
    """(name, Sandbox) for a step that names a sandbox, or the sandbox of a deployed agent."""
    if not agent_name:
        name = resolve_sandbox_name(ctx, sandbox_name)
        return name, await ctx.sandbox(name)
    for agent in reversed(ctx.state.get("deployed_agents", [])):
        if agent.get("agent_name") != agent_name or not agent.get("sandbox_id"):
            continue
        for record in ctx.state.get("deployed_sandboxes", []):
            if record.get("sandbox_id") == agent["sandbox_id"]:
                return record["sandbox_name"], await ctx.sandbox(record["sandbox_name"])
        provider = ctx.sandbox_provider(agent.get("sandbox_type"))
        try:
            return f"agent {agent_name}", await provider.get(agent["sandbox_id"])
        except NotFoundError as exc:
            raise StepError(f"step {ctx.step.id!r}: the sandbox of agent {agent_name!r} is gone: "
                            f"{exc.message}") from exc
    raise StepError(f"step {ctx.step.id!r}: no deployed agent named {agent_name!r} with a sandbox in this run "
                    "(agents that deploy_agent runs with runtime \"container\" have one)",
                    hint="deploy the agent with runtime \"container\", or name a sandbox with sandbox_name")


def find_manifest(ctx: StepContext, step_id: str) -> dict[str, str] | None:
    """The `artifacts` {logical name: path} an earlier step produced, or None when it left none."""
    output = None
    for response in reversed(ctx.state.get("prompt_responses", [])):
        if step_id in (response.get("step_id"), response.get("prompt_id")):
            output = response.get("structured_output")
            break
    if output is None:
        output = ctx.metadata.get("script_results", {}).get(step_id)
    if not isinstance(output, dict) or "artifacts" not in output:
        return None
    manifest = output["artifacts"]
    if not isinstance(manifest, dict) or not all(isinstance(k, str) and isinstance(v, str) and v
                                                 for k, v in manifest.items()):
        raise StepError(f"step {ctx.step.id!r}: the artifacts manifest of step {step_id!r} must be an object "
                        f"{{logical name: path}} of strings, not {manifest!r}"[:400])
    return manifest


def add_run_artifact(ctx: StepContext, doc: dict, kind: str) -> None:
    """List an artifact this step stored in `metadata.artifacts` (a re-run replaces its entry)."""
    listed = [a for a in ctx.metadata.get("artifacts", []) if a.get("step_id") != ctx.step.id]
    listed.append({"id": doc["id"], "version": doc["version"], "type": doc["body"].get("type"),
                   "step_id": ctx.step.id, "kind": kind})
    ctx.metadata["artifacts"] = listed
