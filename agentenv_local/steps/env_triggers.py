"""`register_env_triggers`: `POST /triggers/register` on a deployed env's gateway, optionally with a deployed
agent as the triggers' executor, and optionally waiting for one-shots to fire. See docs/tasks/steps.md."""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from agentenv_local.errors import StepError

from .env_control import EnvStep
from .env_gateway import EnvGateway

if TYPE_CHECKING:
    from agentenv_local.tasks.context import StepContext


class TriggerExecutor(BaseModel):
    model_config = ConfigDict(extra="forbid")

    a2a_url: str = Field(min_length=1)
    role: str | None = None
    timeout_seconds: float | None = Field(default=None, gt=0)


class RegisterEnvTriggersStep(EnvStep):
    type: ClassVar[str] = "register_env_triggers"

    triggers: list[dict]
    watch_roles: list[str] | None = None
    executor: TriggerExecutor | None = None
    executor_agent_name: str | None = None
    executor_timeout_seconds: float = Field(default=120, gt=0)
    executor_hours: dict | None = None
    await_fired: list[str] | None = None
    await_timeout_seconds: float = Field(default=120, gt=0)
    poll_interval_seconds: float = Field(default=0.2, gt=0)

    def config_problems(self) -> list[str]:
        problems = []
        if not self.triggers:
            problems.append("triggers: list at least one trigger")
        for i, spec in enumerate(self.triggers):
            if not isinstance(spec.get("when"), dict):
                problems.append(f"triggers[{i}]: needs a \"when\" object")
        if self.executor and self.executor_agent_name:
            problems.append("executor, executor_agent_name: give one of them")
        if self.await_fired is not None:
            ids = {t.get("id") for t in self.triggers}
            missing = [i for i in self.await_fired if i not in ids]
            if not self.await_fired:
                problems.append("await_fired: the list is empty")
            elif missing:
                problems.append(f"await_fired: {', '.join(map(repr, missing))} not among this step's trigger ids")
        return problems

    def body(self) -> dict:
        body: dict[str, Any] = {"triggers": self.triggers}
        if self.watch_roles is not None:
            body["watch_roles"] = self.watch_roles
        if self.executor is not None:
            executor = self.executor.model_dump(exclude_none=True)
            executor.setdefault("timeout_seconds", self.executor_timeout_seconds)
            if self.executor_hours:
                # a single executor takes one hours spec: {"start", "end", ...} or {name: hours} with one entry
                hours = self.executor_hours
                if "start" not in hours and len(hours) == 1:
                    hours = next(iter(hours.values()))
                executor["hours"] = hours
            body["executor"] = executor
        return body

    def agent_executor(self, ctx: StepContext) -> dict:
        """The deployed agent `executor_agent_name` as the triggers' executor, with the reference's rules: it needs
        a role of its own, outside watch_roles, or its own tool calls would fire the triggers again."""
        from .deployed_agents import deployed_agent

        name = str(self.executor_agent_name)
        agent = deployed_agent(ctx, name)
        role = agent.get("role")
        if not role:
            raise StepError(f"step {self.id!r}: executor agent {name!r} was deployed without a role; its own tool "
                            "calls would run under the default role and fire the triggers",
                            hint="give its deploy_agent step a role outside watch_roles")
        if self.watch_roles is not None and role in self.watch_roles:
            raise StepError(f"step {self.id!r}: executor agent {name!r} has role {role!r}, which is in watch_roles "
                            f"{self.watch_roles}: its own tool calls would fire the triggers")
        executor = {"a2a_url": agent["a2a_url"], "role": role, "timeout_seconds": self.executor_timeout_seconds}
        if name in (self.executor_hours or {}):
            executor["hours"] = (self.executor_hours or {})[name]
        return executor

    async def execute(self, ctx: StepContext) -> None:
        body = self.body()
        if self.executor_agent_name:
            body["executor"] = self.agent_executor(ctx)
        async with EnvGateway(ctx, self.env_id) as gw:
            answer = await gw.call("POST", "/triggers/register", "registering triggers", body=body)
            ctx.metadata.setdefault("registered_env_triggers", {}).setdefault(self.env_id, []).extend(
                (answer or {}).get("added") or [t.get("id") for t in self.triggers])
            ctx.log(f"registered {len(self.triggers)} trigger(s) on env {self.env_id}: "
                    f"added {(answer or {}).get('added')}")
            if self.await_fired:
                await self._await(ctx, gw)

    async def _await(self, ctx: StepContext, gw: EnvGateway) -> None:
        waiting = list(self.await_fired or [])
        deadline = time.monotonic() + self.await_timeout_seconds
        statuses: dict[str, str] = {}
        while True:
            state = await gw.call("GET", "/triggers/state", "reading trigger state")
            statuses = {t.get("id"): t.get("status") for t in (state or {}).get("triggers") or []}
            for tid in waiting:
                if tid not in statuses:
                    raise StepError(f"step {self.id!r}: trigger {tid!r} is not registered on env {self.env_id!r}")
                if statuses[tid] in ("failed", "cancelled"):
                    events = [e for e in (state or {}).get("events") or [] if e.get("trigger_id") == tid]
                    last = events[-1] if events else {}
                    raise StepError(f"step {self.id!r}: trigger {tid!r} on env {self.env_id!r} ended "
                                    f"{statuses[tid]} instead of firing"
                                    + (f": {json.dumps(last, default=str)[:400]}" if last else ""))
            pending = [t for t in waiting if statuses.get(t) != "fired"]
            if not pending:
                ctx.metadata.setdefault("awaited_env_triggers", {})[self.id] = {t: "fired" for t in waiting}
                ctx.log(f"trigger(s) {', '.join(waiting)} fired")
                return
            if ctx.cancelled.is_set():
                raise asyncio.CancelledError()
            if time.monotonic() >= deadline:
                raise StepError(f"step {self.id!r}: trigger(s) {', '.join(repr(t) for t in pending)} on env "
                                f"{self.env_id!r} did not fire within {self.await_timeout_seconds:g}s "
                                f"(status: {', '.join(f'{t}={statuses.get(t)}' for t in pending)})",
                                hint="raise await_timeout_seconds, or check the trigger's `when` with "
                                     "GET /triggers/state")
            await asyncio.sleep(self.poll_interval_seconds)
