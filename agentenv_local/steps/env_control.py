"""Env-control steps: they drive a deployed env through its gateway's REST control plane, over HTTP only.

- `reset_env`: `data/reset` on every child that advertises it.
- `modify_env_tool_access`: `POST /tools/disable|enable` (RBAC).
- `sync_env_clock`: `PUT /clock/set-time`, then `sync_time` on each child advertising `urn:agentenv:clock/v1`.
- `apply_server_config`: call the children's behaviour-config extensions (found on their cards).

Each finds the env's record (left by `deploy_env`) with `ctx.deployed_env(env_id)` and sends the instance's admin
token (held by the hub's env manager, never in the record) on every request, through `EnvGateway`
(env_gateway.py). The other env steps: `register_env_triggers` (env_triggers.py), `snapshot_env`
(env_snapshot.py). See docs/tasks/steps.md.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentenv_local.errors import StepError
from agentenv_local.tasks.step import Step

from .env_gateway import EnvGateway, RpcError

if TYPE_CHECKING:
    from agentenv_local.tasks.context import StepContext

CLOCK_EXT = "urn:agentenv:clock/v1"
BROADCAST = ("environment", "*")
RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


class EnvStep(Step):
    """The env steps' shared fields and checks."""

    env_ref_fields: ClassVar[tuple[str, ...]] = ("env_id",)

    env_id: str = Field(min_length=1)


# --- reset_env ---------------------------------------------------------------------------------------------

class ResetEnvStep(EnvStep):
    type: ClassVar[str] = "reset_env"

    timeout_seconds: float = Field(default=120, gt=0)

    async def execute(self, ctx: StepContext) -> None:
        async with EnvGateway(ctx, self.env_id, self.timeout_seconds) as gw:
            done, skipped = [], []
            for child in await gw.children():
                if "data/reset" not in await gw.operations(child):
                    skipped.append(child)
                    continue
                try:
                    await gw.rpc(child, "data/reset")
                except RpcError as exc:
                    raise StepError(f"step {self.id!r}: data/reset on {gw.where(child)} failed: {exc.message}") \
                        from exc
                done.append(child)
        if skipped:
            ctx.log(f"reset_env: skipped {', '.join(skipped)} (no data/reset on their cards)")
        ctx.metadata.setdefault("env_resets", []).append({"env_id": self.env_id, "step_id": self.id,
                                                          "reset": done, "skipped": skipped})
        ctx.log(f"reset {len(done)} server(s) of env {self.env_id}: {', '.join(done) or 'none'}")


# --- modify_env_tool_access --------------------------------------------------------------------------------

class ModifyEnvToolAccessStep(EnvStep):
    type: ClassVar[str] = "modify_env_tool_access"

    action: Literal["enable", "disable"]
    role: str = Field(min_length=1)
    tools: list[str] | str

    def config_problems(self) -> list[str]:
        if isinstance(self.tools, str) and self.tools != "*":
            return [f"tools: a list of tool names or \"*\", not {self.tools!r}"]
        if isinstance(self.tools, list) and (not self.tools or not all(self.tools)):
            return ["tools: name at least one tool (or \"*\" for every tool)"]
        return []

    async def execute(self, ctx: StepContext) -> None:
        async with EnvGateway(ctx, self.env_id) as gw:
            answer = await gw.call("POST", f"/tools/{self.action}", f"{self.action} tools for role {self.role!r}",
                                   body={"role": self.role, "tools": self.tools})
        if isinstance(answer, dict) and answer.get("error"):  # the gateway may answer 200 {"error"} to a bad body
            raise StepError(f"step {self.id!r}: {self.action} tools on env {self.env_id!r} was refused: "
                            f"{answer['error']}")
        ctx.metadata.setdefault("tool_access_changes", []).append({
            "env_id": self.env_id, "step_id": self.id, "action": self.action, "role": self.role,
            "tools": self.tools, "result": answer})
        ctx.log(f"{self.action}d {self.tools if self.tools == '*' else ', '.join(self.tools)} for role "
                f"{self.role!r} on env {self.env_id}")


# --- sync_env_clock ----------------------------------------------------------------------------------------

class SyncEnvClockStep(EnvStep):
    type: ClassVar[str] = "sync_env_clock"

    virtual_time: str
    virtual_seconds_per_real_second: float = Field(default=1.0, ge=0, le=86400)
    mode: Literal["wall", "frozen", "stepped", "schedule"] | None = None
    step_seconds: float | None = Field(default=None, gt=0)
    schedule: list[str] | None = None  # mode "schedule" (what replay arms): the time of each tool call in turn
    tolerate_missing_sync_time: bool = True
    timeout_seconds: float = Field(default=30, gt=0)

    def config_problems(self) -> list[str]:
        problems = []
        if not RFC3339.match(self.virtual_time):
            problems.append(f"virtual_time: {self.virtual_time!r} is not RFC3339 "
                            "(YYYY-MM-DDThh:mm:ss[.fff](Z|+hh:mm))")
        if self.step_seconds is not None and self.mode != "stepped":
            problems.append("step_seconds: only goes with mode \"stepped\"")
        if (self.schedule is not None) != (self.mode == "schedule"):
            problems.append("schedule: goes with mode \"schedule\", which needs it (a list of RFC3339 times)")
        problems.extend(f"schedule[{i}]: {t!r} is not RFC3339" for i, t in enumerate(self.schedule or [])
                        if not RFC3339.match(t))
        return problems

    async def execute(self, ctx: StepContext) -> None:
        body: dict[str, Any] = {"virtual_time": self.virtual_time,
                                "virtual_seconds_per_real_second": self.virtual_seconds_per_real_second}
        if self.mode:
            body["mode"] = self.mode
        if self.step_seconds is not None:
            body["step_seconds"] = self.step_seconds
        if self.schedule is not None:
            body["schedule"] = self.schedule
        async with EnvGateway(ctx, self.env_id, self.timeout_seconds) as gw:
            armed = await gw.call("PUT", "/clock/set-time", "arming the virtual clock", body=body)
            state = await gw.call("GET", "/clock/state", "reading the clock state")
            time_url = (state or {}).get("env_get_time_url") or f"{gw.base}/clock/time"
            synced, skipped = [], []
            for child in await gw.children():
                ext = await gw.extension(child, CLOCK_EXT)
                if ext is None:
                    skipped.append(child)
                    continue
                methods = (ext.get("params") or {}).get("methods") or {}
                op = "sync_time" if "sync_time" in methods else None
                await gw.call_extension(child, ext, {"env_get_time_url": time_url}, op)
                synced.append(child)
        if skipped and not self.tolerate_missing_sync_time:
            raise StepError(f"step {self.id!r}: {', '.join(skipped)} of env {self.env_id!r} do not advertise "
                            f"{CLOCK_EXT} (sync_time)", hint="set tolerate_missing_sync_time: true to skip them")
        if skipped:
            ctx.log(f"sync_env_clock: {', '.join(skipped)} have no {CLOCK_EXT}; skipped"
                    + ("" if synced else " (no server synced: they read the gateway's get_time only)"))
        ctx.metadata.setdefault("clock_configurations", []).append({
            "env_id": self.env_id, "step_id": self.id, "virtual_time": self.virtual_time,
            "virtual_seconds_per_real_second": self.virtual_seconds_per_real_second, "mode": self.mode,
            "step_seconds": self.step_seconds, "t0": (armed or {}).get("t0"),
            **({"schedule_length": len(self.schedule)} if self.schedule is not None else {}),
            "env_get_time_url": time_url,
            "synced_services": synced, "skipped_services": skipped})
        ctx.log(f"armed the clock of env {self.env_id} at {self.virtual_time}; synced {len(synced)} server(s)")


# --- apply_server_config -----------------------------------------------------------------------------------

class Directive(BaseModel):
    model_config = ConfigDict(extra="forbid")

    service: str = Field(min_length=1)
    uri: str = Field(min_length=1)
    args: dict = Field(default_factory=dict)
    op: str | None = None  # which of the extension's methods, when it advertises several


class ApplyServerConfigStep(EnvStep):
    type: ClassVar[str] = "apply_server_config"

    directives: list[Directive]
    timeout_seconds: float = Field(default=30, gt=0)
    tolerate_unadvertised: bool = False

    def config_problems(self) -> list[str]:
        return [] if self.directives else ["directives: list at least one {service, uri, args}"]

    async def execute(self, ctx: StepContext) -> None:
        applied, skipped = [], []
        async with EnvGateway(ctx, self.env_id, self.timeout_seconds) as gw:
            children = await gw.children()
            for i, d in enumerate(self.directives):
                if d.service in BROADCAST:
                    targets = children
                elif d.service in children:
                    targets = [d.service]
                else:
                    raise StepError(f"step {self.id!r}: directives[{i}]: env {self.env_id!r} has no service "
                                    f"{d.service!r} (its services: {', '.join(children)})",
                                    hint="use \"environment\" to apply to every service")
                hits = 0
                for child in targets:
                    ext = await gw.extension(child, d.uri)
                    if ext is None:
                        if d.service not in BROADCAST:
                            if not self.tolerate_unadvertised:
                                raise StepError(f"step {self.id!r}: directives[{i}]: {gw.where(child)} does not "
                                                f"advertise {d.uri}",
                                                hint="set tolerate_unadvertised: true to skip it")
                            skipped.append({"service": child, "uri": d.uri})
                        continue
                    answer = await gw.call_extension(child, ext, d.args, d.op)
                    applied.append({"service": child, "uri": d.uri, "args": d.args, "result": answer})
                    hits += 1
                if d.service in BROADCAST and not hits:
                    if not self.tolerate_unadvertised:
                        raise StepError(f"step {self.id!r}: directives[{i}]: no service of env {self.env_id!r} "
                                        f"advertises {d.uri}", hint="set tolerate_unadvertised: true to skip it")
                    skipped.append({"service": d.service, "uri": d.uri})
        ctx.metadata.setdefault("server_configs", {})[self.id] = {"env_id": self.env_id, "applied": applied,
                                                                  "skipped": skipped}
        ctx.log(f"applied {len(applied)} directive call(s) on env {self.env_id}"
                + (f"; skipped {len(skipped)} unadvertised" if skipped else ""))
