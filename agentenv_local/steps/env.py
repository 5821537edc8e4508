"""`deploy_env`: deploy an env (a gateway in the hub in front of its servers) for the run.

The record (the reference's DeployedEnv shape, plus `children` and `step_id`) goes to the run's
`deployed_envs`; later steps find it with `ctx.deployed_env(env_id)` and talk to its `gateway_url`
and `mcp_url`. The instance is also in the store's `env_instances` records from the moment it
serves, so a hub that dies mid-run leaves nothing unaccounted for. Teardown stops it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field

from agentenv_local import jsonrpc
from agentenv_local.errors import AgentenvError, StepError
from agentenv_local.tasks.step import Step

if TYPE_CHECKING:
    from agentenv_local.tasks.context import StepContext


class DeployEnvStep(Step):
    """Deploy an env (mcp_server or multi) and record it in the run's deployed_envs."""

    type: ClassVar[str] = "deploy_env"
    deploys: ClassVar[bool] = True
    env_ref_fields: ClassVar[tuple[str, ...]] = ("env_id",)
    artifact_ref_fields: ClassVar[tuple[str, ...]] = ("artifact_id",)

    env_id: str = Field(min_length=1)
    env_version: int | None = Field(default=None, ge=1)
    ttl_seconds: int = Field(default=7200, ge=60)
    disk_size_gb: float = Field(default=10, gt=0)  # a float, as the reference's
    cloud_only_fields: ClassVar[dict[str, str]] = {
        "disk_size_gb": "the reference's VM disk; a local env's processes and containers get no disk quota",
        "env_state_type": "the reference's external env state store; a local env keeps its own state",
        "env_state_instance_id": "the reference's external env state store; a local env keeps its own state",
    }
    gateway_mode: Literal["performance", "consistent"] | None = None
    cpu: float | None = Field(default=None, gt=0)
    memory_mb: int | None = Field(default=None, gt=0)
    sandbox_type: str | None = None
    env_state_type: str | None = None
    env_state_instance_id: str | None = None
    artifact_id: str | None = None
    artifact_version: int | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    pool: bool = True  # false: a cold instance, never kept in the hub's env pools (hosting/envs/pool.py)

    def config_problems(self) -> list[str]:
        problems = []
        if self.artifact_version is not None and not self.artifact_id:
            problems.append("artifact_version: give artifact_id too")
        return problems

    def lost_on_resume(self, state: dict, services: Any) -> bool:
        """Its instance is gone: a hub that stops (or dies) takes its env instances with it."""
        for record in state.get("deployed_envs", []):
            if record.get("step_id") == self.id and not record.get("torn_down"):
                try:
                    return services.envs is None or services.envs.instance(record["instance_id"]).get(
                        "status") != "running"
                except AgentenvError:
                    return True
        return False

    async def execute(self, ctx: StepContext) -> None:
        manager = ctx.services.envs
        if manager is None:
            raise StepError(f"step {self.id!r}: this runner has no env manager (envs deploy inside the hub)")
        for record in ctx.state.get("deployed_envs", []):  # a retry of this step replaces its instance
            if record.get("step_id") == self.id and not record.get("torn_down"):
                await self._teardown_record(ctx, record)
        try:
            # sandbox_type (the run's --sandbox overrides it), cpu and memory_mb apply to the containers of
            # image envs (the run's providers); None leaves the provider to the env manager.
            sandbox_type = ctx.chosen_sandbox_type(self.sandbox_type, "container")
            record = await manager.deploy(self.env_id, self.env_version, run_id=ctx.run_id,
                                          gateway_mode=self.gateway_mode, metadata=dict(self.metadata),
                                          sandbox_type=sandbox_type, cpu=self.cpu, memory_mb=self.memory_mb,
                                          services=ctx.services, pool=None if self.pool else False)
        except AgentenvError as exc:
            raise StepError(f"step {self.id!r}: could not deploy env {self.env_id!r}: {exc.message}",
                            hint=exc.hint) from exc
        created = datetime.now(UTC)
        record.pop("status", None)
        record.update(step_id=self.id, expires_at_utc=(created + timedelta(seconds=self.ttl_seconds))
                      .isoformat().replace("+00:00", "Z"))
        ctx.state.setdefault("deployed_envs", []).append(record)
        ctx.emit("env.deployed", {"env_id": self.env_id, "instance_id": record["instance_id"],
                                  "mcp_url": record["mcp_url"], "gateway_url": record["gateway_url"]})
        ctx.log(f"deployed env {self.env_id!r} v{record['env_version']} as {record['instance_id']} "
                f"at {record['mcp_url']}", instance_id=record["instance_id"])
        if self.artifact_id:
            await self._load_artifact(ctx, record)

    async def _load_artifact(self, ctx: StepContext, record: dict) -> None:
        """Load an artifact into the env's data plane (the env-level data/add of every child)."""
        import base64

        assert self.artifact_id is not None  # only called with one
        doc = ctx.artifact(self.artifact_id, self.artifact_version)
        files = ctx.artifact_files(doc)
        parts = [{"kind": "file", "file": {"name": rel, "bytes": base64.b64encode(data).decode()}}
                 for rel, data in files.items()]
        from agentenv_local.http_clients import async_client

        from .env_gateway import admin_headers

        async with async_client(timeout=120, headers=admin_headers(ctx, record)) as http:
            for child in record.get("children") or []:
                r = await http.post(f"{record['gateway_url']}/svc/mcp-{child['name']}/agentenv",
                                    json=jsonrpc.request("data/add", {"parts": parts}))
                body = r.json() if r.status_code < 500 else {"error": r.text}
                if "error" in body:
                    raise StepError(f"step {self.id!r}: loading artifact {self.artifact_id!r} into "
                                    f"{child['name']!r} failed: {body['error']}")

    async def _teardown_record(self, ctx: StepContext, record: dict) -> None:
        assert ctx.services.envs is not None  # the env was deployed by the hub's env instances
        await ctx.services.envs.teardown(record["instance_id"])
        record["torn_down"] = True
        ctx.emit("env.terminated", {"env_id": record.get("env_id"), "instance_id": record["instance_id"]})

    async def teardown(self, ctx: StepContext) -> None:
        if ctx.services.envs is None:
            return
        for record in list(ctx.state.get("deployed_envs", [])):
            if record.get("step_id") == self.id and not record.get("torn_down"):
                await self._teardown_record(ctx, record)
                ctx.log(f"tore down env {record.get('env_id')!r} ({record['instance_id']})")
