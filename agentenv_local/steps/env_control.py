"""Env-control steps: they drive a deployed env through its gateway's REST control plane, over HTTP only.

- `reset_env`: `data/reset` on every child that advertises it.
- `modify_env_tool_access`: `POST /tools/disable|enable` (RBAC).
- `sync_env_clock`: `PUT /clock/set-time`, then `sync_time` on each child advertising `urn:agentenv:clock/v1`.
- `register_env_triggers`: `POST /triggers/register`, optionally waiting for one-shots to fire.
- `apply_server_config`: call the children's behaviour-config extensions (found on their cards).
- `snapshot_env`: `data/get` on every child -> an `environment_universe` artifact (one `environment` per child,
  its file `<child>.json`); the file-bundle snapshots earlier versions stored still load.

Each finds the env's record (left by `deploy_env`) with `ctx.deployed_env(env_id)` and sends the instance's admin
token (held by the hub's env manager, never in the record) on every request. See docs/tasks/steps.md.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field

from agentenv_local import artifacts as artifact_types
from agentenv_local import jsonrpc
from agentenv_local import typed_artifacts as typed
from agentenv_local.errors import AgentenvError, StepError
from agentenv_local.tasks.step import Step

from . import tail

if TYPE_CHECKING:
    from agentenv_local.tasks.context import StepContext

CLOCK_EXT = "urn:agentenv:clock/v1"
SNAPSHOT_FORMAT = "agentenv-env-snapshot/v1"
BROADCAST = ("environment", "*")
RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


class RpcError(Exception):
    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.message = message
        self.code = code


def deployment(ctx: StepContext, env_id: str, env_step_id: str | None = None) -> dict:
    """The run's deployment of `env_id`: the latest, or (the reference's `env_step_id`) the one that deploy_env step
    made; a step id that made none of them is an error naming the ones that did."""
    if env_step_id is None:
        return ctx.deployed_env(env_id)
    matches = [r for r in ctx.state.get("deployed_envs", [])
               if env_id in (r.get("env_id"), r.get("instance_id")) and not r.get("torn_down")]
    for record in reversed(matches):
        if record.get("step_id") == env_step_id:
            return record
    if not matches:
        return ctx.deployed_env(env_id)  # its error: not deployed at all
    raise StepError(f"step {ctx.step.id!r}: env_step_id {env_step_id!r} names no deployment of env {env_id!r} "
                    f"(deployed by: {', '.join(str(r.get('step_id')) for r in matches)})",
                    hint="name the deploy_env step whose deployment this step is for")


class EnvGateway:
    """A small HTTP client for one deployed env's gateway (used by the env steps and load_artifact)."""

    def __init__(self, ctx: StepContext, env_id: str, timeout: float = 30.0, env_step_id: str | None = None):
        self.ctx = ctx
        self.env_id = env_id
        self.record = deployment(ctx, env_id, env_step_id)
        url = self.record.get("gateway_url")
        if not url:
            raise StepError(f"step {ctx.step.id!r}: env {env_id!r} has no gateway_url in its deploy record",
                            hint="the env's topology has no gateway; these steps need one")
        self.base = str(url).rstrip("/")
        self.timeout = timeout
        self._http: Any = None
        self._cards: dict[str, dict] = {}

    async def __aenter__(self) -> Self:
        import httpx2

        from agentenv_local.http_clients import shared_tls_context

        self._http = httpx2.AsyncClient(base_url=self.base, timeout=httpx2.Timeout(self.timeout, connect=10),
                                        headers=admin_headers(self.ctx, self.record), verify=shared_tls_context())
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._http.aclose()

    def where(self, child: str | None = None) -> str:
        return f"env {self.env_id!r}" + (f" child {child!r}" if child else "")

    async def request(self, method: str, path: str, *, body: Any = None, params: dict | None = None,
                      child: str | None = None) -> tuple[int, Any]:
        """(status, decoded JSON body or text); a transport failure is a StepError."""
        try:
            r = await self._http.request(method, path, json=body, params=params)
        except Exception as exc:
            raise StepError(f"step {self.ctx.step.id!r}: cannot reach the gateway of {self.where(child)} at "
                            f"{self.base}{path}: {type(exc).__name__}: {exc}",
                            hint="is the env still deployed? (agentenv env instances)") from exc
        try:
            return r.status_code, r.json()
        except ValueError:
            return r.status_code, r.text

    async def call(self, method: str, path: str, what: str, *, body: Any = None, child: str | None = None) -> Any:
        """A REST call that must succeed (2xx, and no `ok: false`); otherwise the gateway's message, as a StepError."""
        status, answer = await self.request(method, path, body=body, child=child)
        if status >= 300 or (isinstance(answer, dict) and answer.get("ok") is False):
            raise StepError(f"step {self.ctx.step.id!r}: {what} on {self.where(child)} failed "
                            f"({method} {path} -> {status}): {message_of(answer)}")
        return answer

    # -- children and cards ----------------------------------------------------------------------------
    async def children(self) -> list[str]:
        names = [c if isinstance(c, str) else c["name"] for c in self.record.get("children") or []
                 if isinstance(c, str) or (isinstance(c, dict) and c.get("name"))]
        if names:
            return names
        card = self.record.get("environment_card") or {}
        if not card.get("children_environments"):
            card = await self.call("GET", "/.well-known/agent-env.json", "reading the env card")
        return [c["name"] for c in card.get("children_environments") or [] if c.get("name")]

    async def child_card(self, child: str) -> dict:
        if child not in self._cards:
            status, card = await self.request("GET", f"/svc/mcp-{child}/.well-known/agent-env.json", child=child)
            if status >= 300 or not isinstance(card, dict):
                raise StepError(f"step {self.ctx.step.id!r}: cannot read the card of {self.where(child)} "
                                f"({status}): {message_of(card)}")
            self._cards[child] = card
        return self._cards[child]

    async def operations(self, child: str) -> list[str]:
        return list(((await self.child_card(child)).get("capabilities") or {}).get("operations") or [])

    async def extension(self, child: str, uri: str) -> dict | None:
        for ext in ((await self.child_card(child)).get("capabilities") or {}).get("extensions") or []:
            if isinstance(ext, dict) and ext.get("uri") == uri:
                return ext
        return None

    async def call_extension(self, child: str, ext: dict, args: dict, op: str | None = None) -> Any:
        """Call the endpoint an extension advertises (params.methods.<op> or params.endpoint), child-rooted
        endpoints made gateway-rooted under /svc/mcp-<child>."""
        params = ext.get("params") or {}
        methods = params.get("methods")
        if not isinstance(methods, dict):
            methods = {}
        entry: dict = {}
        if op is not None:
            if op not in methods:
                raise StepError(f"step {self.ctx.step.id!r}: extension {ext.get('uri')!r} of {self.where(child)} "
                                f"has no op {op!r}" + (f" (it has: {', '.join(methods)})" if methods else ""))
            entry = methods[op] or {}
        elif len(methods) == 1:
            entry = next(iter(methods.values())) or {}
        endpoint = entry.get("endpoint") or params.get("endpoint")
        if op is not None and not entry.get("endpoint") and endpoint and len(methods) > 1:
            endpoint = endpoint.rstrip("/") + "/" + op
        if not endpoint:
            raise StepError(f"step {self.ctx.step.id!r}: extension {ext.get('uri')!r} of {self.where(child)} "
                            "advertises no endpoint to call")
        if not endpoint.startswith("/svc/"):
            endpoint = f"/svc/mcp-{child}/" + endpoint.lstrip("/")
        method = str(entry.get("method") or "POST").upper()
        if method == "GET":
            status, answer = await self.request("GET", endpoint, params=args, child=child)
        else:
            status, answer = await self.request(method, endpoint, body=args, child=child)
        if status >= 300 or (isinstance(answer, dict) and answer.get("ok") is False):
            raise StepError(f"step {self.ctx.step.id!r}: {ext.get('uri')} on {self.where(child)} failed "
                            f"({method} {endpoint} -> {status}): {message_of(answer)}")
        return answer

    # -- data plane ------------------------------------------------------------------------------------
    async def rpc(self, child: str | None, method: str, params: dict | None = None) -> Any:
        """JSON-RPC on a child's data plane (/svc/mcp-<child>/agentenv), or the env-level one (child None)."""
        path = f"/svc/mcp-{child}/agentenv" if child else "/agentenv"
        body = jsonrpc.request(method, params or {})
        status, answer = await self.request("POST", path, body=body, child=child)
        if isinstance(answer, dict) and answer.get("error"):
            err = answer["error"]
            if isinstance(err, dict):
                data = err.get("data")
                if isinstance(data, dict):  # the SDK's structured error: code, message, hint, ...
                    extra = f" (hint: {data['hint']})" if data.get("hint") else ""
                else:
                    extra = f" ({json.dumps(data, default=str)[:300]})" if data else ""
                raise RpcError(f"{err.get('message')}{extra}", err.get("code"))
            raise RpcError(str(err))
        if status >= 300 or not isinstance(answer, dict) or "result" not in answer:
            raise RpcError(f"HTTP {status}: {message_of(answer)}")
        return answer["result"]


def admin_token(ctx: StepContext, record: dict) -> str | None:
    """The control-plane credential of a deployed env instance (None when it has none: an opted-out instance)."""
    manager = getattr(ctx.services, "envs", None)
    return manager.admin_token(record["instance_id"]) if manager is not None and record.get("instance_id") else None


def admin_headers(ctx: StepContext, record: dict) -> dict[str, str]:
    """The control-plane credential of a deployed env instance, as request headers ({} when it has none)."""
    token = admin_token(ctx, record)
    return {"Authorization": f"Bearer {token}"} if token else {}


def message_of(answer: Any) -> str:
    if isinstance(answer, dict):
        for key in ("error", "message", "detail"):
            value = answer.get(key)
            if isinstance(value, dict):
                value = value.get("message") or json.dumps(value)
            if value:
                return str(value)
        return json.dumps(answer, default=str)[:500]
    return tail(str(answer), 500) or "(empty answer)"


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
    mode: Literal["wall", "frozen", "stepped"] | None = None
    step_seconds: float | None = Field(default=None, gt=0)
    tolerate_missing_sync_time: bool = True
    timeout_seconds: float = Field(default=30, gt=0)

    def config_problems(self) -> list[str]:
        problems = []
        if not RFC3339.match(self.virtual_time):
            problems.append(f"virtual_time: {self.virtual_time!r} is not RFC3339 "
                            "(YYYY-MM-DDThh:mm:ss[.fff](Z|+hh:mm))")
        if self.step_seconds is not None and self.mode != "stepped":
            problems.append("step_seconds: only goes with mode \"stepped\"")
        return problems

    async def execute(self, ctx: StepContext) -> None:
        body: dict[str, Any] = {"virtual_time": self.virtual_time,
                                "virtual_seconds_per_real_second": self.virtual_seconds_per_real_second}
        if self.mode:
            body["mode"] = self.mode
        if self.step_seconds is not None:
            body["step_seconds"] = self.step_seconds
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
            "step_seconds": self.step_seconds, "t0": (armed or {}).get("t0"), "env_get_time_url": time_url,
            "synced_services": synced, "skipped_services": skipped})
        ctx.log(f"armed the clock of env {self.env_id} at {self.virtual_time}; synced {len(synced)} server(s)")


# --- register_env_triggers ---------------------------------------------------------------------------------

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
        from .agent import deployed_agent

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


# --- snapshot_env ------------------------------------------------------------------------------------------

class SnapshotEnvStep(EnvStep):
    type: ClassVar[str] = "snapshot_env"
    artifact_ref_fields: ClassVar[tuple[str, ...]] = ("original_universe_artifact_id",)
    output_artifact_ref_fields: ClassVar[tuple[str, ...]] = ("snapshot_id",)

    snapshot_id: str | None = None
    include_env_trajectory: bool = False
    include_env_changes: bool = False
    export_timeout_seconds: float = Field(default=600, gt=0)
    # The reference's, accepted (cloud_only_fields says why each has no local meaning).
    env_step_id: str | None = None  # which deploy_env step's deployment of env_id (the latest when unset)
    env_instance_id: str | None = None
    gateway_url: str | None = None
    original_universe_artifact_id: str | None = None

    cloud_only_fields: ClassVar[dict[str, str]] = {
        "env_instance_id": "the reference snapshots an instance outside the run; a local run snapshots its "
                           "deployment of env_id",
        "gateway_url": "the reference snapshots a gateway outside the run; a local run snapshots its deployment "
                       "of env_id",
        "original_universe_artifact_id": "the reference's provenance link to the universe an env was seeded from",
    }

    def artifact_id(self, ctx: StepContext) -> str:
        return self.snapshot_id or f"{ctx.run_id}__{self.id}-env-snapshot"

    async def execute(self, ctx: StepContext) -> None:
        exported: dict[str, bytes] = {}  # service -> its <service>.json
        records: dict[str, tuple[str, bytes]] = {}  # metadata key -> (file name, bytes): not state
        async with EnvGateway(ctx, self.env_id, self.export_timeout_seconds, self.env_step_id) as gw:
            children = await gw.children()
            if not children:
                raise StepError(f"step {self.id!r}: env {self.env_id!r} lists no services to snapshot")
            for child in children:
                try:
                    result = await gw.rpc(child, "data/get")
                except RpcError as exc:
                    raise StepError(f"step {self.id!r}: {gw.where(child)} failed to export its data "
                                    f"(data/get): {exc.message}") from exc
                parts = (result or {}).get("parts") if isinstance(result, dict) else None
                if not isinstance(parts, list):
                    raise StepError(f"step {self.id!r}: data/get on {gw.where(child)} returned no parts list")
                exported[child] = snapshot_file(child, parts)
            if self.include_env_trajectory:
                status, text = await gw.request("GET", "/trajectory")
                if status >= 300:
                    raise StepError(f"step {self.id!r}: reading the trajectory of env {self.env_id!r} failed "
                                    f"({status}): {message_of(text)}")
                records["trajectory"] = ("trajectory.jsonl",
                                         (text if isinstance(text, str) else json.dumps(text)).encode())
            if self.include_env_changes:
                rows = await self._changes(ctx, gw)
                if rows is not None:
                    records["changes"] = ("changes.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n"
                                                                   for r in rows).encode())
        artifact_id = self.artifact_id(ctx)
        try:
            doc = store_snapshot(ctx.store, artifact_id, self.env_id, exported, records,
                                 origin={"run_id": ctx.run_id, "step_id": self.id},
                                 where=f"run {ctx.run_id}, step {self.id}")
        except AgentenvError as exc:
            raise StepError(f"step {self.id!r}: cannot store the snapshot {artifact_id!r}: {exc.message}") from exc
        ctx.metadata.setdefault("env_snapshotted_universes", {})[self.id] = {"id": doc["id"],
                                                                             "version": doc["version"]}
        ctx.log(f"snapshot of env {self.env_id} ({', '.join(children)}) stored as environment_universe "
                f"{doc['id']} v{doc['version']}")

    async def _changes(self, ctx: StepContext, gw: EnvGateway) -> list | None:
        """Every change row the gateway keeps (`GET /changes`, page by page); None when it keeps no changelog."""
        from agentenv_local.gateway.changes import PAGE_MAX_LIMIT

        rows: list = []
        after = 0
        while True:
            status, page = await gw.request("GET", "/changes", params={"after_id": after, "limit": PAGE_MAX_LIMIT})
            if status == 404 and not rows:
                ctx.log(f"env {self.env_id} keeps no changelog: the snapshot has no changes.jsonl")
                return None
            if status >= 300 or not isinstance(page, dict) or not isinstance(page.get("changes"), list):
                raise StepError(f"step {self.id!r}: reading the changes of env {self.env_id!r} failed "
                                f"({status}): {message_of(page)}")
            rows += page["changes"]
            if not page.get("has_more") or not page["changes"]:
                return rows
            after = page["changes"][-1]["id"]


def snapshot_file(service: str, parts: list) -> bytes:
    """A service's file in a snapshot: what its data/get returned, as `data/add` takes it back."""
    return json.dumps({"service": service, "parts": parts}, indent=1, ensure_ascii=False).encode()


def store_snapshot(store: Any, artifact_id: str, env_id: str, exported: dict[str, bytes],
                   records: dict[str, tuple[str, bytes]], *, origin: dict[str, Any], where: str) -> dict:
    """Store an env's exported state as the reference's snapshot does: one `environment` artifact per service
    (`<artifact_id>__<service>`, its file `<service>.json`), bundled in the `environment_universe` `artifact_id`
    (`records`, e.g. the trajectory, as its metadata). Used by snapshot_env and `agentenv env snapshot`."""
    marker = {"format": SNAPSHOT_FORMAT, "env_id": env_id, "services": list(exported), **origin}
    refs = [typed.ref_of(typed.put_environment(
        store, typed.derived_id(artifact_id, service), f"{service}.json", data, environment_name=service,
        description=f"{service} of env {env_id} ({where})", extra={"env_snapshot": marker}))
        for service, data in exported.items()]
    return typed.put_environment_universe(store, artifact_id, refs, metadata=records,
                                          description=f"snapshot of env {env_id} ({where})",
                                          extra={"env_snapshot": marker})


# --- load_artifact into an env (called by the load_artifact step) ------------------------------------------

def _file_part(rel: str, data: bytes) -> dict:
    import base64
    import mimetypes

    mime = mimetypes.guess_type(rel)[0] or "application/octet-stream"
    return {"kind": "file", "file": {"bytes": base64.b64encode(data).decode("ascii"), "mimeType": mime, "name": rel}}


def _snapshot_parts(doc: dict, rel: str, data: bytes) -> tuple[str, list] | None:
    """(service, parts) when `rel` is a service file of a snapshot_env artifact, else None."""
    snap = doc["body"].get("env_snapshot")
    if not isinstance(snap, dict) or not rel.endswith(".json") or "/" in rel:
        return None
    try:
        content = json.loads(data)
    except ValueError:
        return None
    if isinstance(content, dict) and isinstance(content.get("parts"), list):
        return str(content.get("service") or rel[:-5]), content["parts"]
    return None


ENVIRONMENT_KINDS = (artifact_types.ENVIRONMENT, artifact_types.ENVIRONMENT_UNIVERSE)


def _environment_plan(step: Any, ctx: StepContext, doc: dict, children: list[str]) -> list[tuple[dict, str, str, list]]:
    """An environment (universe) artifact's plan: each member's file to the server its environment_name names
    (a snapshot's `<service>.json` as the parts that server exported; any other file as one FilePart)."""
    try:
        if artifact_types.canonical_type(doc["body"].get("type")) == artifact_types.ENVIRONMENT_UNIVERSE:
            members = artifact_types.universe_members(ctx.store, doc)
        else:
            members = [artifact_types.environment_file(ctx.store, doc)]
    except AgentenvError as exc:
        raise StepError(f"step {step.id!r}: cannot read artifact {doc['id']!r} v{doc['version']}: {exc.message}",
                        hint=exc.hint) from exc
    plan: list[tuple[dict, str, str, list]] = []
    for m in members:
        if step.environment_name and m.environment_name != step.environment_name:
            continue
        if m.environment_name not in children:
            raise StepError(f"step {step.id!r}: artifact {m.artifact_id!r} seeds {m.environment_name!r}, which env "
                            f"{step.env_id!r} does not have (its services: {', '.join(children)})",
                            hint="put the environment artifact again with --environment-name set to one of them")
        snap = _snapshot_parts(doc, m.filename, m.data)
        parts = snap[1] if snap is not None else [_file_part(m.filename, m.data)]
        plan.append((doc, f"{m.environment_name}/{m.filename}", m.environment_name, parts))
    return plan


async def _accepts(gw: EnvGateway, child: str, mime: str) -> bool:
    """Whether a child takes a file part of this type on data/add (its card's operations and intake/v1)."""
    if "data/add" not in await gw.operations(child):
        return False
    intake = await gw.extension(child, "urn:agentenv:intake/v1")
    adds = ((intake or {}).get("params") or {}).get("add")
    if not isinstance(adds, list):
        return True
    for entry in adds:
        if isinstance(entry, dict) and entry.get("part") == "file":
            types = entry.get("mimeTypes")
            if not types or mime in types:
                return True
    return False


async def load_into_env(step: Any, ctx: StepContext, loads: list[tuple[dict, str, dict[str, bytes]]]) -> None:
    """Each artifact file -> `data/add` on the env's services.

    A `snapshot_env` artifact goes back service by service (`<service>.json` holds the parts that service
    exported). Any other file becomes an inline FilePart sent to: `environment_name`'s service if set; the
    service a file is named after (`<service>.json` or `<service>/...`); the env-level data plane when the env
    has one service; else every service whose card accepts that file type.
    """
    async with EnvGateway(ctx, step.env_id, step.timeout_seconds, getattr(step, "env_step_id", None)) as gw:
        children = await gw.children()
        if step.environment_name and step.environment_name not in children:
            raise StepError(f"step {step.id!r}: env {step.env_id!r} has no service {step.environment_name!r} "
                            f"(its services: {', '.join(children)})")
        plan: list[tuple[dict, str, str | None, list]] = []  # (doc, rel, child or None = env-level, parts)
        for doc, _kind, files in loads:
            if artifact_types.canonical_type(_kind) in ENVIRONMENT_KINDS:
                plan += _environment_plan(step, ctx, doc, children)
                continue
            for rel, data in sorted(files.items()):
                snap = _snapshot_parts(doc, rel, data)
                if snap is not None:
                    service, parts = snap
                    if step.environment_name and service != step.environment_name:
                        continue
                    if service not in children:
                        raise StepError(f"step {step.id!r}: snapshot {doc['id']!r} holds service {service!r}, "
                                        f"which env {step.env_id!r} does not have (its services: "
                                        f"{', '.join(children)})")
                    plan.append((doc, rel, service, parts))
                    continue
                if isinstance(doc["body"].get("env_snapshot"), dict):
                    continue  # a snapshot's other files (trajectory.jsonl) are records, not state
                part = _file_part(rel, data)
                stem = rel.split("/", 1)[0].removesuffix(".json")
                if step.environment_name:
                    targets: list[str | None] = [step.environment_name]
                elif stem in children and len(children) > 1:
                    targets = [stem]
                elif len(children) == 1:
                    targets = [None]
                else:
                    mime = part["file"]["mimeType"]
                    targets = [c for c in children if await _accepts(gw, c, mime)]
                    if not targets:
                        raise StepError(f"step {step.id!r}: no service of env {step.env_id!r} accepts {rel!r} "
                                        f"({mime}) on data/add", hint="set environment_name to pick the service")
                for target in targets:
                    plan.append((doc, rel, target, [part]))
        if not plan:
            raise StepError(f"step {step.id!r}: nothing in the artifact(s) goes to env {step.env_id!r}"
                            + (f" service {step.environment_name!r}" if step.environment_name else ""))
        if step.reset_first:
            reset = sorted({c for _, _, c, _ in plan}, key=lambda c: c or "")
            for child in reset:
                try:
                    await gw.rpc(child, "data/reset")
                except RpcError as exc:
                    raise StepError(f"step {step.id!r}: data/reset on {gw.where(child)} failed: {exc.message}") \
                        from exc
        for doc, rel, child, parts in plan:
            try:
                await gw.rpc(child, "data/add", {"parts": parts})
            except RpcError as exc:
                raise StepError(f"step {step.id!r}: data/add of {rel!r} (artifact {doc['id']!r} v{doc['version']}) "
                                f"into {gw.where(child)} failed: {exc.message}") from exc
    for doc, kind, files in loads:
        services = sorted({c or children[0] for d, _, c, _ in plan if d is doc})
        ctx.metadata.setdefault("loaded_file_artifact_universes", []).append({
            "id": doc["id"], "version": doc["version"], "artifact_type": kind, "env_id": step.env_id,
            "environment_name": step.environment_name, "services": services, "files": sorted(files)})
        ctx.log(f"loaded {len(files)} file(s) of {doc['id']} v{doc['version']} into env {step.env_id} "
                f"({', '.join(services) or 'none'})")
