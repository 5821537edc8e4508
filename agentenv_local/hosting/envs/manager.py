"""Deploying envs: a gateway in the hub in front of an env's servers, recorded in the store.

    manager = EnvManager(store, paths, loop)      # the hub makes one: services.envs
    record = await manager.deploy("mail")          # on the hub's loop
    ...                                            # record["mcp_url"] serves MCP, record["gateway_url"] REST
    await manager.teardown(record["instance_id"])

A deployed instance is a Gateway served by uvicorn as a task on the hub's loop (127.0.0.1, a free
port). The env's type (env_types.py, the `agentenv_local.env_types` plugin group) says which servers stand
behind it and which env provider (providers.py, the `agentenv_local.env_providers` group) runs each: a module
env in the hub (the Env object, no HTTP hop; in_hub.py) or as a subprocess, a `command` subprocess told its
port by MCP_PORT (subprocesses.py), a `url` as is, or an `image` started in a container by a sandbox provider
(containers.py). Instances are recorded in the `env_instances` records
(running -> terminated; sweep.py ends what a dead hub left); the gateway's RBAC rules, trigger state and clock
are saved in `env_instance_state` whenever they change, so `deploy(resume=INSTANCE)` after a hub
restart brings them back. Every gateway event is appended to the store's event log as
`env.<event_type>` with the instance id.

Env pools (pool.py): a deploy whose servers all run in the hub keeps them, with their clean state, as a pool
slot (an `envp-` record: `leased` to the instance, `pooled` while idle); when the instance is torn down they are
reset and put back, and the next deploy with the same pool key takes them (a new instance id, record and gateway
each time). Never pooled: a resumed instance, the server topology, a subprocess, command, url or image server,
an env (or one of a multi env's servers) with `pool = false`, a deploy with `pool=False`, `[envs.pool] size = 0`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from agentenv_local.errors import NotFoundError, ValidationError

from .env_types import EnvType, env_type
from .gateway import deploy_gateway, gateway_state
from .instance import ADMIN, INSTANCES, READY_TIMEOUT_S, STATE, DeployError, Instance, utc_now
from .pool import (
    LEASED,
    POOLED,
    SLOT_PREFIX,
    SLOTS,
    EnvPool,
    Slot,
    capture_clean,
    pool_key,
    pool_settings,
    reset_slot,
    sweep_slots,
    watch_misbehaving,
)
from .providers import EnvProvider, make_provider
from .records import ArtifactPin, McpServerEnv, MultiEnv, parse_env
from .server_topology import deploy_server
from .serving import guard_policy, stop_serving
from .sweep import kill_children, sweep_dead_hub

log = logging.getLogger(__name__)


class EnvManager:
    """Deployed env instances of one hub. Every coroutine runs on the hub's loop."""

    def __init__(self, store: Any, paths: Any, loop: asyncio.AbstractEventLoop | None = None,
                 ready_timeout: float = READY_TIMEOUT_S, services: Any = None, sweep_at_start: bool = True):
        self.store = store
        self.paths = paths
        self.loop = loop
        self.ready_timeout = ready_timeout
        # The hub's RunServices, whose sandbox providers run image envs; without it (or a deploy's own
        # `services`) the container provider makes its own sandbox provider and closes it with itself. The
        # manager is the EnvHost of the env providers it makes (providers.py).
        self.services = services
        self.root = Path(paths.state_dir) / "envs"
        self._live: dict[str, Instance] = {}
        self._providers: dict[str, EnvProvider] = {}  # one per env provider name, made when first needed
        self._used: dict[str, list[EnvProvider]] = {}  # instance id -> the providers that started its servers
        # What a dead hub left is this hub's to sweep; a Ray worker's manager (sweep_at_start=False) shares its
        # hub's records through the hub and must leave the hub's live instances alone.
        self.swept_at_start = sweep_dead_hub(self.store, self.root) if sweep_at_start else []
        if sweep_at_start:
            self.swept_at_start += sweep_slots(self.store, self.root)
        self.pool = EnvPool(pool_settings(paths.state_dir))
        self._closing = False  # aclose runs: nothing goes back to the pool
        self._idle_timer: asyncio.TimerHandle | None = None
        self._background: set[asyncio.Task] = set()  # idle slots being stopped

    # -- reading ------------------------------------------------------------------------------
    def instances(self, status: str | None = None) -> list[dict]:
        from agentenv_local.query import Query

        if status == POOLED:  # the idle pool slots (pool.py), kept apart from the instances
            return [rec["body"] for rec in self.store.records.query(Query(SLOTS).where("status", "eq", POOLED))]
        query = Query(INSTANCES)
        if status is not None:  # in SQL: the hub's sweep asks every 5 s, and torn-down records pile up
            query.where("status", "eq", status)
        return [rec["body"] for rec in self.store.records.query(query)]

    def instance(self, instance_id: str) -> dict:
        rec = self.store.records.find(INSTANCES, instance_id)
        if rec is None:
            raise NotFoundError(f"no env instance {instance_id!r}",
                                hint="list them with `agentenv env instances`")
        return rec["body"]

    def _env_doc(self, env_id: str, version: int | None) -> tuple[dict, McpServerEnv | MultiEnv]:
        doc = self.store.documents.find("envs", env_id, version)
        if doc is None:
            raise NotFoundError(f"env {env_id!r}" + (f" v{version}" if version else "") + " is not in the store",
                                hint="store it with `agentenv env put FOLDER --id ID`, or run a bundle with envs/")
        body = {k: v for k, v in doc["body"].items()}
        files = body.pop("files", None)
        if isinstance(body.get("type"), str) and body["type"] == "mcp_server" and "name" in body:
            body.pop("name")
        env = parse_env(body, f"env {env_id} v{doc['version']}")
        if isinstance(env, McpServerEnv) and files:
            env.files = ArtifactPin(**files)
        return doc, env

    # -- deploying ----------------------------------------------------------------------------
    async def deploy(self, env_id: str | None = None, version: int | None = None, run_id: str | None = None,
                     gateway_mode: str | None = None, resume: str | None = None,
                     metadata: dict | None = None, *, sandbox_type: str | None = None, cpu: float | None = None,
                     memory_mb: int | None = None, services: Any = None,
                     control_plane_auth: bool | None = None, ttl_seconds: int | None = None,
                     pool: bool | None = None) -> dict:
        """Deploy `env_id` (or, with `resume=INSTANCE`, an instance a stopped hub left, with its saved
        RBAC rules, triggers and clock) and return its record.

        `sandbox_type`, `cpu` and `memory_mb` apply to image envs' containers (provider `podman` by
        default); `services` (a run's RunServices) supplies the sandbox provider.
        `control_plane_auth=False` (else the env record's `control_plane_auth`, default true) serves the
        reference's open control plane instead of requiring the instance's admin token. `ttl_seconds` records
        `expires_at_utc`: the hub's sweep tears the instance down then (hosting/expiry.py). `pool=False` keeps
        the instance out of the env pools (it neither takes a pooled slot nor becomes one)."""
        from agentenv_local.hosting.expiry import expiry_fields

        lifetime = expiry_fields(ttl_seconds)  # a bad TTL is refused before anything starts
        saved_state = None
        saved_token = None
        if resume:
            old = self.instance(resume)
            if resume in self._live:
                raise DeployError(f"env instance {resume} is running; nothing to resume")
            env_id = env_id or old["env_id"]
            version = version or old.get("env_version")
            gateway_mode = gateway_mode or old.get("gateway_mode")
            run_id = run_id or old.get("run_id")
            state_rec = self.store.records.find(STATE, resume)
            saved_state = state_rec["body"] if state_rec else None
            if control_plane_auth is None and old.get("control_plane_auth") is not None:
                control_plane_auth = bool(old["control_plane_auth"])
            saved_token = self.admin_token(resume)
            instance_id = resume
        else:
            instance_id = f"envi-{secrets.token_hex(6)}"
        if not env_id:
            raise ValidationError("give the env to deploy (its id)")
        if gateway_mode not in (None, "performance", "consistent"):
            raise ValidationError(f"gateway_mode must be 'performance' or 'consistent', got {gateway_mode!r}")
        doc, env = self._env_doc(env_id, version)
        options = {"sandbox_type": sandbox_type, "cpu": cpu, "memory_mb": memory_mb, "services": services}
        if control_plane_auth is None:
            control_plane_auth = env.control_plane_auth is not False
        key = None
        if not resume and pool is not False and _pool_allowed(env) and self.pool.settings.size > 0:
            key = pool_key(doc, gateway_mode=gateway_mode, control_plane_auth=control_plane_auth, options=options)
        slot = self.pool.take(key) if key is not None else None
        folder = slot.folder if slot is not None else self.root / instance_id  # a slot keeps its cold deploy's
        inst = Instance(instance_id, {}, folder, run_id=run_id, options=options)
        if control_plane_auth:  # kept apart from the instance record, which `env instances` lists
            inst.admin_token = saved_token or secrets.token_urlsafe(32)
            self.store.records.save(ADMIN, instance_id, {"token": inst.admin_token})
        try:
            record = await self._deploy(inst, doc, env, gateway_mode, saved_state, metadata or {}, key, slot)
        except BaseException:
            await self._stop(inst)
            leased = self.pool.release(instance_id) or slot
            if leased is not None:
                await self._stop_slot(leased, f"a deploy on it failed ({instance_id})")
            raise
        if lifetime:
            inst.record.update(lifetime)
            self.store.records.save(INSTANCES, instance_id, inst.record)
            record = dict(inst.record)
        return record

    async def _deploy(self, inst: Instance, doc: dict, env: McpServerEnv | MultiEnv, gateway_mode: str | None,
                      saved_state: dict | None, metadata: dict, key: tuple | None = None,
                      slot: Slot | None = None) -> dict:
        from agentenv_local.gateway.children import ChildSpec

        env_id = doc["id"]
        etype = self._type_of(env, f"env {env_id}")
        servers = etype.servers(env_id, doc, env, self._env_doc)
        name, mode, prefix_tools = etype.gateway_options(env_id, env, gateway_mode)
        topology = etype.topology(env)
        chosen = etype.servers_provider(env)  # a plugin's env provider the env.toml names for all its servers
        if topology not in ("gateway", "server"):
            raise DeployError(f"env {env_id}: its env type {env.type!r} asks for the topology {topology!r}; "
                              "there are 'gateway' and 'server'")
        if topology == "server" and (len(servers) != 1 or not isinstance(env, McpServerEnv)):
            raise DeployError(f"env {env_id}: the server topology serves one mcp_server env on its own; this "
                              f"{env.type} env has {len(servers)} server(s)",
                              hint='deploy it with env_provider_type = "gateway" (the default)')
        if topology != "gateway" or not all(_pool_allowed(senv) for _sdoc, senv in servers):
            key = None  # never pooled (a slot only ever comes with a key)
        children_info: list[dict] = []
        specs = []
        targets = []
        for sdoc, senv in servers:
            child_name = senv.environment_name or sdoc["id"].rsplit("/", 1)[-1]
            if slot is not None:  # the pooled, reset Env: nothing to load
                clean = next(c for c in slot.children if c.name == child_name)
                target, info = clean.env, dict(clean.info)
            else:
                target, info = await self._child(inst, child_name, sdoc, senv, chosen)
            targets.append((child_name, target, info))
            # a server we started (a subprocess or a container) requires the admin token on its data plane;
            # the gateway sends it
            token = inst.admin_token if info.get("kind") in ("subprocess", "container") else None
            specs.append(ChildSpec(child_name, target, token=token))
            children_info.append(info)

        if topology == "server":
            assert isinstance(env, McpServerEnv)  # checked before its server started
            record = await deploy_server(inst, doc, env, specs[0].target, children_info[0], name, metadata,
                                         self._guard())
            self._register(inst, record)
            return dict(record)
        instance_id = inst.instance_id
        record = await deploy_gateway(inst, doc, name, specs, children_info, mode=mode, prefix_tools=prefix_tools,
                                      saved_state=saved_state, metadata=metadata, store=self.store,
                                      guard=self._guard(), ready_timeout=self.ready_timeout,
                                      on_state_change=lambda gw: self._save_state(instance_id, gw))
        if key is not None:
            await self._lease(inst, doc, key, slot, targets, record)
        self._register(inst, record)
        self._save_state(instance_id, inst.gateway)
        return dict(record)

    async def _lease(self, inst: Instance, doc: dict, key: tuple, slot: Slot | None, targets: list[tuple],
                     record: dict) -> None:
        """Lease the deploy's pool slot to it: the one it took, or (a cold deploy whose servers all run in the
        hub) a new one holding its Envs and their clean state. Notes the slot in the record."""
        if slot is None:
            if not all(info.get("kind") == "in_process" for _name, _target, info in targets):
                return  # a subprocess, command, url or container server: its state is not ours to reset
            children = []
            for name, target, info in targets:
                clean = await capture_clean(name, target, info)
                if isinstance(clean, str):
                    log.info("env instance %s is not pooled: %s", inst.instance_id, clean)
                    return
                children.append(clean)
            slot_id = SLOT_PREFIX + inst.instance_id.removeprefix("envi-")
            slot = Slot(slot_id, key, doc["id"], doc["version"], inst.folder, children, origin=inst,
                        providers=list(self._used.get(inst.instance_id, [])))
            watch_misbehaving(slot)
            record.update(pool_slot=slot.slot_id, from_pool=False)
        else:
            slot.uses += 1
            record.update(pool_slot=slot.slot_id, from_pool=True)
        self.pool.lease(slot, inst.instance_id)
        self.store.records.save(SLOTS, slot.slot_id, slot.record(LEASED))

    def _register(self, inst: Instance, record: dict) -> None:
        inst.record = record
        self._live[inst.instance_id] = inst
        self.store.records.save(INSTANCES, inst.instance_id, record)

    async def _child(self, inst: Instance, child_name: str, sdoc: dict, senv: McpServerEnv,
                     chosen: str | None = None) -> tuple[Any, dict]:
        """Start one server of the instance through the env provider `chosen` (the one the deployed env's
        env.toml names), else the one its type picks: (the gateway's target for it, its entry in the record's
        children)."""
        where = f"env {sdoc['id']}"
        provider_name = chosen or self._type_of(senv, where).provider(senv, where)
        provider = self._providers.get(provider_name)
        if provider is None:
            provider = self._providers[provider_name] = make_provider(provider_name, self, where)
        used = self._used.setdefault(inst.instance_id, [])
        if provider not in used:  # before it starts anything, so a failed start is stopped too
            used.append(provider)
        return await provider.start(inst, child_name, where, senv)

    @staticmethod
    def _type_of(env: McpServerEnv | MultiEnv, where: str) -> EnvType:
        etype = env_type(env.type)
        if etype is None:  # parse_env found it moments ago: its plugin is gone or broken since
            raise DeployError(f"{where}: its env type {env.type!r} is not available",
                              hint="check `agentenv plugin list`")
        return etype

    def materialize(self, inst: Instance, child_name: str, senv: McpServerEnv) -> Path:
        """The child's folder in the instance's, with the env version's pinned files written into it."""
        from agentenv_local.artifacts import read_files

        folder = inst.folder / child_name
        folder.mkdir(parents=True, exist_ok=True)
        if senv.files is not None:
            adoc = self.store.documents.get("artifacts", senv.files.id, senv.files.version)
            for rel, data in read_files(self.store, adoc).items():
                path = (folder / rel).resolve()
                if not str(path).startswith(str(folder.resolve())):
                    raise DeployError(f"env file {rel!r} points outside the env's folder")
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
        return folder

    def _guard(self) -> Any:
        """The HTTP guard's policy for the servers this hub starts: the project's [security] settings."""
        return guard_policy(self.paths.state_dir)

    # -- a running instance's gateway ------------------------------------------------------------
    def bind_role(self, instance_id: str, role: str) -> str:
        """Bind `role` on a running instance to a new bearer token and return the token.

        From then on a request can act as `role` only with `Authorization: Bearer <token>`; a bare
        `AgentEnv-Role` header claiming it is refused. Only a digest of the token is saved.
        """
        from agentenv_local.gateway.rbac import RbacError

        gateway = self._live_gateway(instance_id, "so no roles")
        try:
            token = gateway.access.bind_token(role)
        except RbacError as exc:
            raise DeployError(f"cannot bind role {role!r}: {exc}") from exc
        self._save_state(instance_id, gateway)
        return token

    def is_live(self, instance_id: str) -> bool:
        """Whether this manager runs `instance_id` (a worker's manager runs its own runs' instances)."""
        return instance_id in self._live

    def admin_token(self, instance_id: str) -> str | None:
        """The instance's control-plane credential (None: it serves the reference's open control plane, or it
        is unknown). For the hub, the task's steps and `agentenv env instances ID --admin-token`; never logged."""
        inst = self._live.get(instance_id)
        if inst is not None:
            return inst.admin_token
        rec = self.store.records.find(ADMIN, instance_id)
        token = rec["body"].get("token") if rec else None
        return token if isinstance(token, str) and token else None

    async def advance_clock(self, instance_id: str, seconds: float | str) -> dict:
        """Move a running instance's frozen or stepped clock forward, then let its time triggers fire; the
        clock's state (saved, like every change to it)."""
        from agentenv_local.gateway.clock import ClockError

        gateway = self._live_gateway(instance_id, "so no virtual clock")
        try:
            return {"instance_id": instance_id, **await gateway.advance_clock(seconds)}
        except ClockError as exc:
            raise DeployError(f"cannot advance the clock of {instance_id}: {exc}") from None

    def _live_gateway(self, instance_id: str, so_what: str) -> Any:
        """The gateway of a running instance, or a DeployError saying why there is none."""
        inst = self._live.get(instance_id)
        if inst is None:
            raise DeployError(f"env instance {instance_id!r} is not running in this hub",
                              hint="see the running ones with `agentenv env instances`")
        if inst.gateway is None:
            raise DeployError(f"env instance {instance_id!r} has no gateway (server topology), {so_what}",
                              hint='deploy it with env_provider_type = "gateway" (the default)')
        return inst.gateway

    def _save_state(self, instance_id: str, gateway: Any) -> None:
        try:
            self.store.records.save(STATE, instance_id, gateway_state(gateway))
        except Exception:
            log.exception("env instance %s: could not save its gateway state", instance_id)

    # -- teardown -----------------------------------------------------------------------------
    async def _stop(self, inst: Instance) -> None:
        await self._stop_gateway(inst)
        await self._stop_providers(inst, self._used.pop(inst.instance_id, []))
        _remove_folder(inst.folder)

    @staticmethod
    async def _stop_gateway(inst: Instance) -> None:
        await stop_serving(inst)
        if inst.gateway is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(inst.gateway.aclose(), 10)

    @staticmethod
    async def _stop_providers(inst: Instance, providers: list[EnvProvider]) -> None:
        for provider in providers:
            try:
                await provider.stop(inst)
            except Exception:  # a plugin's failure must not keep the others from stopping theirs
                log.exception("env instance %s: env provider %s could not stop", inst.instance_id, provider.name)

    # -- pool slots ----------------------------------------------------------------------------
    async def _return_slot(self, inst: Instance, slot: Slot) -> None:
        """The instance on `slot` is torn down: stop its gateway, reset the slot's Envs and pool it; a slot that
        cannot be reset to its clean state (or finds the pool full, or the hub closing) is stopped."""
        await self._stop_gateway(inst)
        self._used.pop(inst.instance_id, None)  # a cold deploy's providers: the slot stops them with its origin
        if self._closing:
            reason: str | None = "the hub is closing"
        elif not self.pool.has_room(slot.key):
            reason = f"the pool of {slot.env_id} v{slot.env_version} is full ({self.pool.settings.size})"
        else:
            reason = await reset_slot(slot)
            if reason is None and self._closing:  # the hub began closing meanwhile: its drain is done or under way
                reason = "the hub is closing"
        if reason is not None:
            await self._stop_slot(slot, reason)
            return
        self.pool.put_back(slot)
        self.store.records.save(SLOTS, slot.slot_id, slot.record(POOLED, pooled_at_utc=utc_now()))
        self._schedule_idle_check()

    async def _stop_slot(self, slot: Slot, reason: str) -> None:
        await self._stop_providers(slot.origin, slot.providers)
        _remove_folder(slot.folder)
        self.store.records.save(SLOTS, slot.slot_id, slot.record("terminated", status_reason=reason,
                                                                     terminated_at_utc=utc_now()))

    def _schedule_idle_check(self) -> None:
        """Stop idle slots once they have been idle for `[envs.pool] idle_seconds` (one timer at a time)."""
        idle = self.pool.idle()
        if self._idle_timer is not None or not idle:
            return
        loop = asyncio.get_running_loop()
        due = min(s.idle_since for s in idle) + self.pool.settings.idle_seconds
        self._idle_timer = loop.call_later(max(0.0, due - time.monotonic()) + 0.01, self._idle_check)

    def _idle_check(self) -> None:
        self._idle_timer = None
        task = asyncio.ensure_future(self._stop_expired())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _stop_expired(self) -> None:
        for slot in self.pool.expired():
            try:
                await self._stop_slot(slot, "idle")
            except Exception:
                log.exception("env pool slot %s: could not stop", slot.slot_id)
        self._schedule_idle_check()

    async def teardown(self, instance_id: str, reason: str | None = None) -> dict:
        """Stop an instance (its uvicorn server, gateway and subprocesses), remove its folder, record it
        terminated. Tearing down one that already is answers its record."""
        if instance_id.startswith(SLOT_PREFIX):  # a pool slot: stopped if idle, else left to its instance
            return await self._teardown_slot(instance_id, reason)
        inst = self._live.pop(instance_id, None)
        if inst is None:
            body = self.instance(instance_id)
            if body.get("status") == "running":  # recorded by this hub but not live: a leftover
                await asyncio.get_running_loop().run_in_executor(None, kill_children, body)
                shutil.rmtree(self.root / instance_id, ignore_errors=True)
                body.update(status="terminated", terminated_at_utc=utc_now())
                self.store.records.save(INSTANCES, instance_id, body)
            return body
        slot = self.pool.release(instance_id)
        if slot is None:
            await self._stop(inst)
        else:
            await self._return_slot(inst, slot)
        self._save_state(instance_id, inst.gateway)
        body = {**inst.record, "status": "terminated", "terminated_at_utc": utc_now()}
        if reason:
            body["status_reason"] = reason
        self.store.records.save(INSTANCES, instance_id, body)
        return body

    async def _teardown_slot(self, slot_id: str, reason: str | None) -> dict:
        idle = self.pool.remove(slot_id)
        if idle is not None:
            await self._stop_slot(idle, reason or "torn down")
        rec = self.store.records.find(SLOTS, slot_id)
        if rec is None:
            raise NotFoundError(f"no env pool slot {slot_id!r}", hint="list them with `agentenv env instances`")
        return rec["body"]

    async def aclose(self, reason: str = "hub stopped") -> None:
        self._closing = True  # what the instances leave is stopped, not pooled
        for instance_id in list(self._live):
            try:
                await self.teardown(instance_id, reason=reason)
            except Exception:
                log.exception("env instance %s: teardown failed", instance_id)
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        for slot in self.pool.drain():
            try:
                await self._stop_slot(slot, reason)
            except Exception:
                log.exception("env pool slot %s: could not stop", slot.slot_id)
        self._closing = False
        for provider in list(self._providers.values()):
            try:
                await provider.aclose()
            except Exception:
                log.exception("env provider %s: could not close", provider.name)

    def close(self, timeout: float = 30) -> None:
        """From another thread (the hub's close): tear down every live instance on the loop."""
        holding = any(p.holds_resources() for p in self._providers.values())
        if not (self._live or holding or self.pool.idle()) or self.loop is None or not self.loop.is_running():
            return
        future = asyncio.run_coroutine_threadsafe(self.aclose(), self.loop)
        with contextlib.suppress(Exception):
            future.result(timeout)


def _pool_allowed(env: McpServerEnv | MultiEnv) -> bool:
    """The env's record does not say `pool = false` (an env type's record model may not have the key)."""
    return getattr(env, "pool", None) is not False


def _remove_folder(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    inside = str(folder) + os.sep  # in-process envs put their folder on sys.path when loaded
    sys.path[:] = [p for p in sys.path if not (p + os.sep).startswith(inside)]
