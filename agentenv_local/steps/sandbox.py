"""`deploy_sandbox` and `teardown_sandboxes`: bare sandboxes for a run.

A deployed sandbox is recorded twice: in the run's `deployed_sandboxes` (the reference's
`DeployedSandbox` shape) and in the store's `sandboxes` records *before* the step returns, so a
sweep after a crash can find what a run left behind. The runner calls `teardown` of every executed
step at the end of the run; a sandbox already torn down (its id in
`metadata.torn_down_sandbox_ids`) is skipped.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field

from agentenv_local.errors import AgentenvError, StepError
from agentenv_local.sandbox_api import NetworkPolicy, SandboxSpec
from agentenv_local.tasks.step import Step

from . import live_sandbox_records

if TYPE_CHECKING:
    from agentenv_local.tasks.context import StepContext


def _utc(ts: datetime) -> str:
    return ts.isoformat().replace("+00:00", "Z")


async def terminate_record(ctx: "StepContext", record: dict) -> bool:
    """Terminate the sandbox a run record names, mark it terminated; False if it already was."""
    sandbox_id = record.get("sandbox_id")
    torn_down = ctx.metadata.setdefault("torn_down_sandbox_ids", [])
    if not sandbox_id or sandbox_id in torn_down:
        return False
    provider = ctx.sandbox_provider(record.get("sandbox_type"))
    await provider.terminate(sandbox_id)
    stored = ctx.store.records.find("sandboxes", sandbox_id)
    body = dict(stored["body"]) if stored else {**record, "run_id": ctx.run_id}
    body.update(status="terminated", terminated_at_utc=_utc(datetime.now(timezone.utc)),
                terminated_by_step_id=ctx.step.id)
    ctx.store.records.save("sandboxes", sandbox_id, body)
    torn_down.append(sandbox_id)
    ctx.emit("sandbox.terminated", {"sandbox_id": sandbox_id, "sandbox_name": record.get("sandbox_name")})
    return True


class DeploySandboxStep(Step):
    """Deploy a bare sandbox (a VM-like machine or a container) for later steps to use."""

    type: ClassVar[str] = "deploy_sandbox"
    deploys: ClassVar[bool] = True

    sandbox_name: str = Field(default="sandbox", min_length=1)
    sandbox_mode: Literal["vm", "container"] = "vm"
    image: str | None = None
    cpu: float = Field(default=1.0, gt=0)
    memory_mb: int = Field(default=8192, gt=0)
    disk_size_gb: float = Field(default=10, gt=0)  # a float, as the reference's
    cloud_only_fields: ClassVar[dict[str, str]] = {
        "disk_size_gb": "the reference's VM disk; local sandboxes get no disk quota",
        "boot_mode": "how the reference boots its cloud VMs; a local sandbox starts as its provider does",
        "port": "the port of the reference's booted VM service (boot_mode); expose ports with exposed_ports",
    }
    ttl_seconds: int = Field(default=7200, ge=60, le=1_209_600)
    exposed_ports: list[int] = Field(default_factory=list)
    boot_mode: str | None = None
    port: int | None = None
    env_vars: dict[str, str] = Field(default_factory=dict)
    # The run's --sandbox overrides it; None: the configured `sandbox.default`. The reference's "local" is ours
    # by sandbox_mode (vm: process, container: podman).
    sandbox_type: str | None = None
    network_policy: NetworkPolicy | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    def config_problems(self) -> list[str]:
        problems = []
        for p in self.exposed_ports:
            if not 1 <= p <= 65535:
                problems.append(f"exposed_ports: {p} is not a TCP port (1-65535)")
        if self.port is not None and not 1 <= self.port <= 65535:
            problems.append(f"port: {self.port} is not a TCP port (1-65535)")
        if self.network_policy is not None and "*" in self.network_policy.allow_hosts:
            problems.append("network_policy.allow_hosts: a bare '*' is refused; use mode \"allow_all\"")
        if self.sandbox_mode == "container" and not self.image:
            problems.append("image: a container sandbox needs an image")
        return problems

    async def execute(self, ctx: "StepContext") -> None:
        provider_name = ctx.sandbox_type_for(self.sandbox_type, self.sandbox_mode)
        provider = ctx.sandbox_provider(provider_name)
        if self.sandbox_mode not in provider.supported_modes:
            raise StepError(
                f"step {self.id!r}: sandbox provider {provider_name!r} cannot deploy sandbox_mode "
                f"{self.sandbox_mode!r} (it supports: {', '.join(provider.supported_modes)})",
                hint=_mode_hint(self.sandbox_mode, provider),
            )
        for record in live_sandbox_records(ctx):
            if record.get("sandbox_name") != self.sandbox_name:
                continue
            if record.get("step_id") == self.id:  # this step runs again (a retry): replace its sandbox
                await terminate_record(ctx, record)
            else:
                raise StepError(
                    f"step {self.id!r}: a sandbox named {self.sandbox_name!r} is already deployed in this run "
                    f"(by step {record.get('step_id')!r})",
                    hint="give this one another sandbox_name",
                )
        spec = SandboxSpec(
            name=self.sandbox_name, mode=self.sandbox_mode, image=self.image, cpu=self.cpu,
            memory_mb=self.memory_mb, ttl_seconds=self.ttl_seconds, exposed_ports=list(self.exposed_ports),
            env_vars=dict(self.env_vars), network_policy=self.network_policy, run_id=ctx.run_id,
            labels={"agentenv.run": ctx.run_id, "agentenv.step": self.id},
        )
        try:
            sandbox = await provider.create(spec)
        except AgentenvError as exc:
            raise StepError(f"step {self.id!r}: sandbox provider {provider_name!r} could not deploy "
                            f"{self.sandbox_name!r}: {exc.message}", hint=exc.hint) from exc
        created = datetime.now(timezone.utc)
        record = {
            "sandbox_name": self.sandbox_name,
            "sandbox_id": sandbox.sandbox_id,
            "sandbox_mode": self.sandbox_mode,
            "sandbox_type": provider_name,
            "tunnel_urls": dict(getattr(sandbox, "tunnel_urls", {}) or {}),
            "created_at_utc": _utc(created),
            "expires_at_utc": _utc(created + timedelta(seconds=self.ttl_seconds)),
            "network_policy": self.network_policy.model_dump(mode="json") if self.network_policy else None,
            "step_id": self.id,
        }
        try:  # in the store before anything else, so a crash right after still finds it
            ctx.store.records.save("sandboxes", sandbox.sandbox_id, {
                **record, "run_id": ctx.run_id, "status": "running", "metadata": self.metadata,
                "isolation": provider.isolation})
        except BaseException:
            await sandbox.terminate()
            raise
        ctx.state.setdefault("deployed_sandboxes", []).append(record)
        ctx.log(f"deployed {provider_name} sandbox {self.sandbox_name!r} ({sandbox.sandbox_id})",
                sandbox_id=sandbox.sandbox_id, isolation=provider.isolation)

    async def teardown(self, ctx: "StepContext") -> None:
        for record in list(ctx.state.get("deployed_sandboxes", [])):
            if record.get("step_id") == self.id and await terminate_record(ctx, record):
                ctx.log(f"terminated sandbox {record['sandbox_name']!r} ({record['sandbox_id']})")


def _mode_hint(mode: str, provider) -> str:
    from agentenv_local.plugins import registry

    others = sorted(name for name, cls in registry().available("sandbox_providers").items()
                    if mode in getattr(cls, "supported_modes", ()) and name != provider.name)
    use = f"sandbox_type {' or '.join(repr(o) for o in others)}" if others else "a provider that supports it"
    return f"use sandbox_mode {provider.supported_modes[0]!r}, or {use} for {mode!r} sandboxes"


class TeardownSandboxesStep(Step):
    """Tear sandboxes down early, best effort. Nothing named: every sandbox of the run."""

    type: ClassVar[str] = "teardown_sandboxes"
    env_ref_fields: ClassVar[tuple[str, ...]] = ("env_ids",)

    fail_task_on_error: bool = False
    agent_names: list[str] = Field(default_factory=list)
    env_ids: list[str] = Field(default_factory=list)
    sandbox_names: list[str] = Field(default_factory=list)

    def config_problems(self) -> list[str]:
        if self.fail_task_on_error:
            return ["fail_task_on_error: must stay false for teardown_sandboxes (teardown is best effort; "
                    "the run's own teardown retries whatever is left)"]
        return []

    async def execute(self, ctx: "StepContext") -> None:
        live = live_sandbox_records(ctx)
        if not (self.sandbox_names or self.agent_names or self.env_ids):
            targets = live
        else:
            targets = []
            for name in self.sandbox_names:
                found = [r for r in live if r.get("sandbox_name") == name]
                if not found:
                    ctx.log(f"no live sandbox named {name!r} (already torn down, or never deployed)", level="warning")
                targets += found
            # Deployed agents and envs name the sandbox they run in (sandbox_id, sandbox_type).
            targets += self._owned(ctx, "deployed_agents", "agent_name", self.agent_names)
            targets += self._owned(ctx, "deployed_envs", "env_id", self.env_ids)
        failures = []
        done = 0
        for record in targets:
            try:
                done += await terminate_record(ctx, record)
            except Exception as exc:  # best effort: keep going, report at the end
                failures.append(f"{record.get('sandbox_name')} ({record.get('sandbox_id')}): {exc}")
        ctx.log(f"tore down {done} sandbox(es)", sandbox_ids=[r.get("sandbox_id") for r in targets])
        if failures:
            raise StepError(f"step {self.id!r}: could not tear down {len(failures)} sandbox(es): "
                            + "; ".join(failures))

    @staticmethod
    def _owned(ctx: "StepContext", key: str, name_field: str, names: list[str]) -> list[dict]:
        out = []
        for name in names:
            found = [d for d in ctx.state.get(key, []) if d.get(name_field) == name and d.get("sandbox_id")]
            if not found:
                ctx.log(f"no {name_field} {name!r} with a sandbox in this run", level="warning")
            out += [{"sandbox_id": d["sandbox_id"], "sandbox_type": d.get("sandbox_type"),
                     "sandbox_name": d.get("sandbox_name") or f"{name_field}:{name}"} for d in found]
        return out
