"""`run_docker_container`: build a task image from a Dockerfile and its context (a stored artifact's files) and run
it as a container for the task, the way the reference's Harbor-style tasks do.

The reference builds and runs with `docker` inside a VM sandbox. Here the sandbox named by `sandbox_name` must be a
Podman sandbox: the image is built into the local Podman image store (sandboxes/podman/images.py, no registry:
a `FROM` must name a local image, and the build argument `BASE` is agentenv's base image) and the container runs
beside that sandbox as a container-mode sandbox of its own, hardened like every Podman sandbox (read-only root,
capabilities dropped, no network unless ports are exposed). It is recorded in `deployed_sandboxes` under
`container_name`, so later steps (run_container_unit_tests_verifier, verify_sandbox, load_artifact, run_code)
reach it by that name, and this step's teardown removes it. `metadata.deployed_docker_containers` gets
`{container_name, sandbox_name, sandbox_id, image_tag, ports, network}` as in the reference.

Fields the local machine cannot honour are refused before the run, never silently granted: `privileged`,
`devices`, `cap_add`, `volumes`, `extra_networks`, `network`, `shm_size`, and `docker_context_url` (a download:
cloud-only here; store the context as an artifact); `keep_alive_with_base_command` is not supported yet.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from agentenv_local.errors import AgentenvError, StepError
from agentenv_local.sandbox_api import SandboxSpec
from agentenv_local.tasks.step import Step

from . import live_sandbox_records, tail

if TYPE_CHECKING:
    from agentenv_local.tasks.context import StepContext

READY_PAUSE_S = 2.0  # the reference's: a try every 2 s, for 120 s
TTL_SECONDS = 7200
# field -> why the local machine does not grant it
REFUSED = {
    "privileged": "a privileged container gets every capability and the host's devices; Podman sandboxes run "
                  "with every capability dropped",
    "devices": "host devices are not passed into sandboxes",
    "cap_add": "sandboxes run with every capability dropped",
    "volumes": "host folders are not mounted into sandboxes (only their own /app)",
    "extra_networks": "a sandbox has one network of its own; user networks are not created",
    "network": "a sandbox's network is its own (none, or a bridge when ports are exposed)",
    "shm_size": "the shared-memory size of a sandbox is not settable",
}


class RunDockerContainerStep(Step):
    """Build a Dockerfile from an artifact and run it as the task's container (Podman)."""

    type: ClassVar[str] = "run_docker_container"
    deploys: ClassVar[bool] = True
    artifact_ref_fields: ClassVar[tuple[str, ...]] = ("docker_context_artifact_id",)

    sandbox_name: str = Field(min_length=1)
    docker_context_artifact_id: str | None = None
    docker_context_artifact_version: int | None = None
    docker_context_url: str | None = None
    dockerfile_path: str = Field(default="Dockerfile", min_length=1)
    container_name: str = Field(default="task-container", min_length=1)
    image_tag: str | None = None
    ports: list[int] | None = None
    env_vars: dict[str, str] | None = None
    build_args: dict[str, str] | None = None
    command_override: str | None = None
    keep_alive_with_base_command: bool = False
    network: str | None = None
    extra_networks: list[str] | None = None
    ready_command: str | None = None
    devices: list[str] | None = None
    cap_add: list[str] | None = None
    privileged: bool = False
    volumes: list[str] | None = None
    shm_size: str | None = None
    ready_timeout_seconds: float = Field(default=120, gt=0)  # ours: how long ready_command may take to pass

    def config_problems(self) -> list[str]:
        problems = []
        if self.docker_context_artifact_id is None and self.docker_context_url is None:
            problems.append("docker_context_artifact_id: names no build context; set it (the artifact holding the "
                            "Dockerfile and its context)")
        if self.docker_context_artifact_id is not None and self.docker_context_url is not None:
            problems.append("docker_context_artifact_id, docker_context_url: give one, not both")
        elif self.docker_context_url is not None:
            problems.append("docker_context_url: downloading a build context is cloud-only here; put the context "
                            "in an artifact (a bundle's artifacts/<name>/ folder) and name it in "
                            "docker_context_artifact_id")
        if self.keep_alive_with_base_command:
            problems.append("keep_alive_with_base_command: not supported yet (the image's own command runs as it is; "
                            "to keep a container whose command exits alive, set command_override, e.g. "
                            "\"<its command> & exec sleep infinity\")")
        for name, why in REFUSED.items():
            if getattr(self, name):
                problems.append(f"{name}: not granted on this machine ({why}); drop it")
        rel = PurePosixPath(self.dockerfile_path)
        if rel.is_absolute() or ".." in rel.parts:
            problems.append(f"dockerfile_path: {self.dockerfile_path!r} must be a path inside the build context")
        if self.container_name == self.sandbox_name:
            problems.append("container_name: must differ from sandbox_name (the container is a sandbox of its own)")
        for port in self.ports or []:
            if not 1 <= port <= 65535:
                problems.append(f"ports: {port} is not a TCP port")
        return problems

    async def execute(self, ctx: StepContext) -> None:
        host = ctx.deployed_sandbox(self.sandbox_name)
        provider = ctx.sandbox_provider(host.get("sandbox_type"))
        if "container" not in provider.supported_modes:
            raise StepError(f"step {self.id!r}: run_docker_container needs Podman: sandbox {self.sandbox_name!r} is "
                            f"a {host.get('sandbox_type')!r} sandbox, which cannot build or run images",
                            hint="deploy the sandbox with sandbox_type \"podman\" (or run with --sandbox podman)")
        for record in live_sandbox_records(ctx):
            if record.get("sandbox_name") == self.container_name and record.get("step_id") != self.id:
                raise StepError(f"step {self.id!r}: a sandbox named {self.container_name!r} is already deployed in "
                                f"this run (by step {record.get('step_id')!r})",
                                hint="give container_name another name")
        from .sandbox import terminate_record

        for record in live_sandbox_records(ctx):  # a retry of this step replaces its container
            if record.get("step_id") == self.id:
                await terminate_record(ctx, record)
        doc = ctx.artifact(self.docker_context_artifact_id or "", self.docker_context_artifact_version)
        files = ctx.artifact_files(doc)
        if self.dockerfile_path not in files:
            raise StepError(f"step {self.id!r}: no {self.dockerfile_path!r} in artifact {doc['id']!r} "
                            f"v{doc['version']} (it has: {', '.join(sorted(files)[:10]) or 'no files'})",
                            hint="add the Dockerfile to the artifact, or set dockerfile_path")
        image = await self._build(ctx, provider, doc, files)
        command = ["/bin/sh", "-c", self.command_override] if self.command_override else None
        spec = SandboxSpec(name=self.container_name, mode="container", image=image["ref"], command=command,
                           exposed_ports=list(self.ports or []), env_vars=dict(self.env_vars or {}),
                           run_id=ctx.run_id, ttl_seconds=TTL_SECONDS,
                           labels={"agentenv.run": ctx.run_id, "agentenv.step": self.id,
                                   "agentenv.host-sandbox": host["sandbox_id"]})
        try:
            sandbox = await provider.create(spec)
        except AgentenvError as exc:
            raise StepError(f"step {self.id!r}: container {self.container_name!r} from {image['ref']} did not start: "
                            f"{exc.message}", hint=exc.hint) from exc
        created = datetime.now(timezone.utc)
        record = {"sandbox_name": self.container_name, "sandbox_id": sandbox.sandbox_id, "sandbox_mode": "container",
                  "sandbox_type": host.get("sandbox_type"), "tunnel_urls": dict(sandbox.tunnel_urls or {}),
                  "created_at_utc": _utc(created), "expires_at_utc": _utc(created + timedelta(seconds=TTL_SECONDS)),
                  "network_policy": None, "step_id": self.id, "image": image["ref"],
                  "host_sandbox_name": self.sandbox_name}
        try:  # in the store before anything else, so a sweep after a crash still finds it
            ctx.store.records.save("sandboxes", sandbox.sandbox_id, {
                **record, "run_id": ctx.run_id, "status": "running", "isolation": provider.isolation})
        except BaseException:
            await sandbox.terminate()
            raise
        ctx.state.setdefault("deployed_sandboxes", []).append(record)
        if self.ready_command:
            await self._wait_ready(ctx, sandbox)
        ctx.metadata.setdefault("deployed_docker_containers", []).append({
            "container_name": self.container_name, "sandbox_name": self.sandbox_name, "sandbox_id": sandbox.sandbox_id,
            "image_tag": image["ref"], "ports": self.ports, "network": self.network,
            "tunnel_urls": record["tunnel_urls"]})
        ctx.log(f"container {self.container_name!r} runs {image['ref']} ({sandbox.sandbox_id})"
                + (" (built)" if image.get("built") else " (image unchanged, not rebuilt)"))

    async def _build(self, ctx: StepContext, provider: Any, doc: dict, files: dict[str, bytes]) -> dict[str, Any]:
        """Write the context to a fresh folder of ours and build it; {ref, image_id, built}."""
        name = "task/" + _slug(self.image_tag or self.container_name)
        version = hashlib.sha256(json.dumps([doc["id"], doc["version"], self.dockerfile_path,
                                             sorted((self.build_args or {}).items())]).encode()).hexdigest()[:16]
        with tempfile.TemporaryDirectory(prefix="agentenv-docker-context-") as tmp:
            root = Path(tmp)
            for rel, data in files.items():
                parts = PurePosixPath(rel).parts
                if PurePosixPath(rel).is_absolute() or ".." in parts or not parts:
                    raise StepError(f"step {self.id!r}: artifact {doc['id']!r} has a file {rel!r} outside its own "
                                    "folder; it cannot be a build context")
                target = root.joinpath(*parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            lines: list[str] = []
            try:
                return await asyncio.to_thread(provider.build_image, name, version, root,
                                               containerfile=root.joinpath(*PurePosixPath(self.dockerfile_path).parts),
                                               build_args=dict(self.build_args or {}), on_line=lines.append)
            except AgentenvError as exc:
                problems = getattr(exc, "problems", None) or lines[-15:]
                raise StepError(f"step {self.id!r}: building {self.dockerfile_path!r} of artifact {doc['id']!r} "
                                f"failed: {exc.message}" + (f": {tail(chr(10).join(problems))}" if problems else ""),
                                hint="a FROM must name a local image (no registry is reached): use ARG BASE / "
                                     "FROM ${BASE} for agentenv's base image") from exc

    async def _wait_ready(self, ctx: StepContext, sandbox: Any) -> None:
        last = None
        for attempt in range(max(1, math.ceil(self.ready_timeout_seconds / READY_PAUSE_S))):
            if attempt:
                await asyncio.sleep(READY_PAUSE_S)
            last = await sandbox.exec(["sh", "-c", self.ready_command or ""], timeout=30)
            if last.ok:
                return
        raise StepError(f"step {self.id!r}: container {self.container_name!r} failed its ready_command within "
                        f"{self.ready_timeout_seconds:g}s (exit {last.exit_code if last else '?'}: "
                        f"{tail((last.stderr or last.stdout) if last else '', 200)})",
                        hint="check the image's startup with `agentenv sandbox logs`")

    async def teardown(self, ctx: StepContext) -> None:
        from .sandbox import terminate_record

        for record in list(ctx.state.get("deployed_sandboxes", [])):
            if record.get("step_id") == self.id and await terminate_record(ctx, record):
                ctx.log(f"removed container {record['sandbox_name']!r} ({record['sandbox_id']})")


def _slug(name: str) -> str:
    out = "".join(c if c.isalnum() or c in "._-" else "-" for c in name.lower()).strip("-.")
    return out[:64] or "container"


def _utc(ts: datetime) -> str:
    return ts.isoformat().replace("+00:00", "Z")
