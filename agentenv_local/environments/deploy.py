"""Deploying envs: a gateway in the hub in front of an env's servers, recorded in the store.

    manager = EnvManager(store, paths, loop)      # the hub makes one: services.envs
    record = await manager.deploy("mail")          # on the hub's loop
    ...                                            # record["mcp_url"] serves MCP, record["gateway_url"] REST
    await manager.teardown(record["instance_id"])

A deployed instance is a Gateway served by uvicorn as a task on the hub's loop (127.0.0.1, a free
port). Its children: a module env in the hub (the Env object, no HTTP hop) or as a subprocess, a
`command` subprocess told its port by MCP_PORT, a `url` as is, or an `image` started in a container by a
sandbox provider (`podman`: mode "container", its `container_port` published on 127.0.0.1, reached as a
URL child; the container is removed at teardown). Instances are recorded in the
`env_instances` records (running -> terminated); the gateway's RBAC rules, trigger state and clock
are saved in `env_instance_state` whenever they change, so `deploy(resume=INSTANCE)` after a hub
restart brings them back. Every gateway event is appended to the store's event log as
`env.<event_type>` with the instance id.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentenv_local.errors import AgentenvError, NotFoundError, ValidationError

from .records import McpServerEnv, MultiEnv, parse_env

ADMIN_TOKEN_ENV = "AGENTENV_ADMIN_TOKEN"  # read by agentenv_local.env.serve (env/app.py)

log = logging.getLogger(__name__)

INSTANCES = "env_instances"
STATE = "env_instance_state"
ADMIN = "env_instance_admin"  # {token}: the control plane's credential, apart from the listed records
READY_TIMEOUT_S = 60.0
CONTAINER_PORT = 8000  # where an image env serves in its container, unless it sets container_port
IMAGE_PROVIDER = "podman"  # the sandbox provider that runs image envs (deploy_env's sandbox_type may name another)
PODMAN_NOTE = "container images come with the Podman sandboxes"


class DeployError(AgentenvError):
    """An env could not be deployed (a child never got ready, an image env, a bad record)."""


def _utc_now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _free_socket() -> socket.socket:
    # One place makes listening sockets right (IPPROTO_TCP, so accepted connections get TCP_NODELAY).
    from agentenv_local.env.serve import bind_socket

    sock = bind_socket("127.0.0.1", 0)
    sock.setblocking(False)
    return sock


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_pid(pid: int) -> None:
    """SIGTERM the process group of `pid` (each child runs in its own session), then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            if not _pid_alive(pid):
                return
            time.sleep(0.02)


@dataclass
class _Proc:
    name: str
    proc: subprocess.Popen
    log_path: Path

    def last_output(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(nothing)"
        tail = text.strip().splitlines()[-lines:]
        return "\n".join(tail) or "(nothing)"


@dataclass
class _Instance:
    instance_id: str
    record: dict
    folder: Path
    gateway: Any = None
    server: Any = None
    serve_task: asyncio.Task | None = None
    procs: list[_Proc] = field(default_factory=list)
    sandboxes: list[Any] = field(default_factory=list)  # the containers of image children
    run_id: str | None = None
    options: dict = field(default_factory=dict)  # sandbox_type, cpu, memory_mb, services (image children)
    admin_token: str | None = field(default=None, repr=False)  # None: the reference's open control plane


class EnvManager:
    """Deployed env instances of one hub. Every coroutine runs on the hub's loop."""

    def __init__(self, store: Any, paths: Any, loop: asyncio.AbstractEventLoop | None = None,
                 ready_timeout: float = READY_TIMEOUT_S, services: Any = None):
        self.store = store
        self.paths = paths
        self.loop = loop
        self.ready_timeout = ready_timeout
        # The hub's RunServices, whose sandbox providers run image envs; without it (or a deploy's own
        # `services`) the manager makes its own provider and closes it with itself.
        self.services = services
        self._own_providers: dict[str, Any] = {}
        self.root = Path(paths.state_dir) / "envs"
        self._live: dict[str, _Instance] = {}
        self.swept_at_start = self._sweep_dead_hub()

    # -- what a dead hub left ---------------------------------------------------------------
    def _sweep_dead_hub(self) -> list[str]:
        from agentenv_local.query import Query

        swept = []
        for rec in self.store.records.query(Query(INSTANCES)):
            body = rec["body"]
            if body.get("status") != "running":
                continue
            _kill_children(body)
            body.update(status="terminated", status_reason="hub stopped", terminated_at_utc=_utc_now())
            self.store.records.save(INSTANCES, rec["id"], body)
            shutil.rmtree(self.root / rec["id"], ignore_errors=True)
            swept.append(rec["id"])
        return swept

    # -- reading ------------------------------------------------------------------------------
    def instances(self, status: str | None = None) -> list[dict]:
        from agentenv_local.query import Query

        out = []
        for rec in self.store.records.query(Query(INSTANCES)):
            if status is None or rec["body"].get("status") == status:
                out.append(rec["body"])
        return out

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
            from .records import ArtifactPin

            env.files = ArtifactPin(**files)
        return doc, env

    # -- deploying ----------------------------------------------------------------------------
    async def deploy(self, env_id: str | None = None, version: int | None = None, run_id: str | None = None,
                     gateway_mode: str | None = None, resume: str | None = None,
                     metadata: dict | None = None, *, sandbox_type: str | None = None, cpu: float | None = None,
                     memory_mb: int | None = None, services: Any = None,
                     control_plane_auth: bool | None = None) -> dict:
        """Deploy `env_id` (or, with `resume=INSTANCE`, an instance a stopped hub left, with its saved
        RBAC rules, triggers and clock) and return its record.

        `sandbox_type`, `cpu` and `memory_mb` apply to image envs' containers (provider `podman` by
        default); `services` (a run's RunServices) supplies the sandbox provider.
        `control_plane_auth=False` (else the env record's `control_plane_auth`, default true) serves the
        reference's open control plane instead of requiring the instance's admin token."""
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
        folder = self.root / instance_id
        inst = _Instance(instance_id, {}, folder, run_id=run_id,
                         options={"sandbox_type": sandbox_type, "cpu": cpu, "memory_mb": memory_mb,
                                  "services": services})
        if control_plane_auth is None:
            control_plane_auth = env.control_plane_auth is not False
        if control_plane_auth:  # kept apart from the instance record, which `env instances` lists
            inst.admin_token = saved_token or secrets.token_urlsafe(32)
            self.store.records.save(ADMIN, instance_id, {"token": inst.admin_token})
        try:
            return await self._deploy(inst, doc, env, run_id, gateway_mode, saved_state, metadata or {})
        except BaseException:
            await self._stop(inst)
            raise

    async def _deploy(self, inst: _Instance, doc: dict, env: McpServerEnv | MultiEnv, run_id: str | None,
                      gateway_mode: str | None, saved_state: dict | None, metadata: dict) -> dict:
        from agentenv_local.gateway.children import ChildError, ChildSpec
        from agentenv_local.gateway.server import Gateway

        env_id = doc["id"]
        if isinstance(env, MultiEnv):
            servers = []
            for ref in env.refs():
                sdoc, senv = self._env_doc(ref.env, ref.version)
                if not isinstance(senv, McpServerEnv):
                    raise DeployError(f"env {env_id}: mcp_server_envs: {ref.env!r} is a {senv.type} env, "
                                      "not an mcp_server env")
                servers.append((sdoc, senv))
            name = env.name or env_id.rsplit("/", 1)[-1]
            mode = gateway_mode or env.gateway_mode
            prefix_tools = env.prefix_tools
        else:
            servers = [(doc, env)]
            name = env.environment_name or env_id.rsplit("/", 1)[-1]
            mode = gateway_mode or "performance"
            prefix_tools = False
        children_info: list[dict] = []
        specs = []
        for sdoc, senv in servers:
            child_name = senv.environment_name or sdoc["id"].rsplit("/", 1)[-1]
            target, info = await self._child(inst, child_name, sdoc, senv)
            # a server we started (a subprocess or a container) requires the admin token on its data plane;
            # the gateway sends it
            token = inst.admin_token if info.get("kind") in ("subprocess", "container") else None
            specs.append(ChildSpec(child_name, target, token=token))
            children_info.append(info)

        if isinstance(env, McpServerEnv) and env.env_provider_type == "server":
            return await self._deploy_server(inst, doc, env, specs[0].target, children_info[0], name, run_id,
                                             metadata)
        instance_id = inst.instance_id
        store = self.store
        options: dict[str, Any] = {}
        if saved_state:
            from agentenv_local.gateway.clock import VirtualClock
            from agentenv_local.gateway.rbac import ToolAccess

            if saved_state.get("rbac"):
                options["access"] = ToolAccess.from_dict(saved_state["rbac"])
            if saved_state.get("clock"):
                options["clock"] = VirtualClock.from_dict(saved_state["clock"])
            if saved_state.get("triggers"):
                options["triggers_state"] = saved_state["triggers"]

        def on_event(event: dict) -> None:
            kind = str(event.get("event_type") or "event")
            store.events.append(f"env.{kind}", {**event, "instance_id": instance_id}, run_id=run_id)

        gateway_ref: dict[str, Any] = {}

        def on_state_change(what: str) -> None:
            gw = gateway_ref.get("gw")
            if gw is None:
                return
            self._save_state(instance_id, gw)

        gateway = Gateway(name, specs, mode=mode, prefix_tools=prefix_tools, on_event=on_event,
                          on_state_change=on_state_change, ready_timeout=self.ready_timeout,
                          control_plane_auth=inst.admin_token is not None, admin_token=inst.admin_token,
                          guard=self._guard(), **options)
        gateway_ref["gw"] = gateway
        inst.gateway = gateway
        try:
            await gateway.start()
        except ChildError as e:
            raise DeployError(f"env {env_id}: {e}") from None
        if gateway.clashes:
            from agentenv_local.gateway.server import CLASH_FIX, clash_text

            raise DeployError(f"env {env_id}: {clash_text(gateway.clashes)}", hint=f"{CLASH_FIX}; in a multi "
                              "env's env.toml: prefix_tools = true")

        gateway_url = await self._serve(inst, gateway)
        card_url = gateway_url + "/.well-known/agent-env.json"
        card = await self._fetch_card(card_url, gateway)
        record = {
            "env_id": env_id, "env_version": doc["version"], "env_provider_type": "gateway",
            "instance_id": instance_id, "gateway_url": gateway_url, "mcp_url": gateway_url + "/mcp",
            "mcp_server_name": name, "environment_card": card, "environment_card_url": card_url,
            "environment_card_read_at_utc": _utc_now(), "created_at_utc": _utc_now(), "run_id": run_id,
            "children": children_info, "gateway_mode": mode, "metadata": metadata,
            "control_plane_auth": inst.admin_token is not None, **_sandbox_fields(children_info), "status": "running",
        }
        inst.record = record
        self._live[instance_id] = inst
        self.store.records.save(INSTANCES, instance_id, record)
        self._save_state(instance_id, gateway)
        return dict(record)

    async def _deploy_server(self, inst: _Instance, doc: dict, env: McpServerEnv, target: Any, child: dict,
                             name: str, run_id: str | None, metadata: dict) -> dict:
        """The `server` topology: one MCP server on its own, no gateway (so no clock, RBAC or
        triggers); its own card is the env's card."""
        if isinstance(target, str):  # a subprocess, command or url child: it serves itself
            mcp_url = target
            base = target[: -len(env.mcp_path)] if target.endswith(env.mcp_path) else target.rsplit("/", 1)[0]
        else:  # an in-process Env: serve its own app in the hub
            from agentenv_local.env.app import build_app

            app = build_app(target._ae_runtime(), admin_token=inst.admin_token, guard=self._guard())
            base = await self._serve(inst, None, app=app)
            mcp_url = base + "/mcp"
        card_url = base + "/.well-known/agent-env.json"
        card = await self._fetch_card(card_url, None)
        record = {
            "env_id": doc["id"], "env_version": doc["version"], "env_provider_type": "server",
            "instance_id": inst.instance_id, "gateway_url": None, "server_url": base, "mcp_url": mcp_url,
            "mcp_server_name": name, "environment_card": card, "environment_card_url": card_url,
            "environment_card_read_at_utc": _utc_now(), "created_at_utc": _utc_now(), "run_id": run_id,
            "children": [child], "gateway_mode": None, "metadata": metadata,
            "control_plane_auth": inst.admin_token is not None, **_sandbox_fields([child]), "status": "running",
        }
        inst.record = record
        self._live[inst.instance_id] = inst
        self.store.records.save(INSTANCES, inst.instance_id, record)
        return dict(record)

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

    def admin_token(self, instance_id: str) -> str | None:
        """The instance's control-plane credential (None: it serves the reference's open control plane, or it
        is unknown). For the hub, the task's steps and `agentenv env instances ID --admin-token`; never logged."""
        inst = self._live.get(instance_id)
        if inst is not None:
            return inst.admin_token
        rec = self.store.records.find(ADMIN, instance_id)
        token = rec["body"].get("token") if rec else None
        return token if isinstance(token, str) and token else None

    def _guard(self) -> Any:
        """The HTTP guard's policy for the servers this hub starts: the project's [security] settings."""
        from agentenv_local.http_guard import GuardPolicy

        config = None
        with contextlib.suppress(Exception):  # unreadable: the defaults, which only narrow
            from agentenv_local.config import load_config

            config = load_config(Path(self.paths.state_dir).parent)
        return GuardPolicy.from_settings(config=config) if config is not None else GuardPolicy()

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
            body = {"rbac": gateway.access.to_dict(), "triggers": gateway.engine.to_dict(),
                    "clock": gateway.clock.to_dict(), "saved_at_utc": _utc_now()}
            self.store.records.save(STATE, instance_id, body)
        except Exception:
            log.exception("env instance %s: could not save its gateway state", instance_id)

    def _materialize(self, inst: _Instance, child_name: str, senv: McpServerEnv) -> Path:
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

    async def _child(self, inst: _Instance, child_name: str, sdoc: dict, senv: McpServerEnv) -> tuple[Any, dict]:
        where = f"env {sdoc['id']}"
        if senv.image:
            return await self._image_child(inst, child_name, where, senv)
        if senv.url:
            return senv.url, {"name": child_name, "kind": "url", "url": senv.url}
        folder = self._materialize(inst, child_name, senv)
        if senv.module and (senv.run_as or "in_process") == "in_process":
            target = self._module_target(folder, senv.module)
            alone = ("load it on its own to see why: python -m agentenv_local.env "
                     f"{senv.module.rpartition(':')[0] or senv.module} (in the env's folder)")
            try:
                env_obj = await asyncio.wait_for(asyncio.get_running_loop().run_in_executor(
                    None, lambda: _load_with_env(target, senv.env_vars, folder)), self.ready_timeout)
            except TimeoutError:  # the import never returns (a loop at import time); its thread is left
                raise DeployError(f"{where}: loading {senv.module} did not finish within {self.ready_timeout:g}s",
                                  hint=alone) from None
            except SystemExit as e:  # sys.exit() at import: never let it reach (and stop) the hub's loop
                raise DeployError(f"{where}: {senv.module} exited while it was imported (sys.exit({e.code!r}))",
                                  hint=alone) from None
            except Exception as e:  # the author's import error, shown as it is
                raise DeployError(f"{where}: cannot load {senv.module}: {type(e).__name__}: {e}",
                                  hint=alone) from None
            return env_obj, {"name": child_name, "kind": "in_process"}
        port = _free_port()
        if senv.module:
            argv = [sys.executable, "-m", "agentenv_local.env", self._module_target(folder, senv.module),
                    "--port", str(port), "--host", "127.0.0.1"]
        else:
            argv = list(senv.command or [])
            if argv and argv[0] in ("python", "python3"):
                argv[0] = sys.executable
        from agentenv_local.procs import host_env  # a minimal environment, not our secrets

        env = {**host_env(), **senv.env_vars, "MCP_PORT": str(port), "MCP_HOST": "127.0.0.1",
               "ENVIRONMENT_NAME": child_name, "PYTHONUNBUFFERED": "1"}
        env.pop(ADMIN_TOKEN_ENV, None)
        if inst.admin_token:  # its data plane requires it (the server takes it out of its environment)
            env[ADMIN_TOKEN_ENV] = inst.admin_token
        log_path = inst.folder / f"{child_name}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            proc = _spawn(argv, folder, env, log_path)
        except OSError as e:
            raise DeployError(f"{where}: cannot start {argv[0]!r}: {e}") from None
        p = _Proc(child_name, proc, log_path)
        inst.procs.append(p)
        url = f"http://127.0.0.1:{port}{senv.mcp_path}"
        await self._wait_ready(where, p, f"http://127.0.0.1:{port}", url)
        return url, {"name": child_name, "kind": "subprocess", "url": url, "pid": proc.pid}

    # -- image envs: a container from a sandbox provider ----------------------------------------
    def _provider(self, inst: _Instance, where: str, image: str) -> Any:
        name = inst.options.get("sandbox_type") or IMAGE_PROVIDER
        services = inst.options.get("services") or self.services
        try:
            if services is not None and hasattr(services, "sandbox_provider"):
                provider = services.sandbox_provider(name)
            elif name in self._own_providers:
                provider = self._own_providers[name]
            else:
                provider = self._own_providers[name] = self._make_provider(name)
        except AgentenvError as e:
            raise DeployError(f"{where}: is an image env ({image}), and {PODMAN_NOTE}, but its sandbox provider "
                              f"{name!r} is not available: {e.message}", hint=e.hint) from None
        if "container" not in getattr(provider, "supported_modes", ()):
            raise DeployError(f"{where}: is an image env ({image}); the {name!r} sandbox provider cannot run "
                              "container images", hint=f'use sandbox_type "{IMAGE_PROVIDER}" (the default)')
        return provider

    def _make_provider(self, name: str) -> Any:
        from agentenv_local.errors import ConfigError
        from agentenv_local.plugins import registry

        cls = registry().get("sandbox_providers", name)
        if cls is None:
            reason = registry().failure("sandbox_providers", name)
            raise ConfigError(f"no sandbox provider named {name!r}" + (f" ({reason})" if reason else ""),
                              hint="check `agentenv plugin list`")
        config: dict = {}
        with contextlib.suppress(Exception):  # the project's [sandbox.providers.NAME], when it can be read
            from agentenv_local.config import load_config

            config = load_config(Path(self.paths.state_dir).parent).get(f"sandbox.providers.{name}") or {}
        return cls(self.paths.state_dir, dict(config))

    async def _image_child(self, inst: _Instance, child_name: str, where: str, senv: McpServerEnv) -> tuple[Any, dict]:
        from agentenv_local.sandbox_api import SandboxSpec

        image = str(senv.image)
        provider = self._provider(inst, where, image)
        port = senv.container_port or CONTAINER_PORT
        fields: dict[str, Any] = {}
        for key in ("cpu", "memory_mb"):
            if inst.options.get(key):
                fields[key] = inst.options[key]
        spec = SandboxSpec(name=f"env-{child_name}"[:120], mode="container", image=image, exposed_ports=[port],
                           env_vars={**senv.env_vars, "MCP_HOST": "0.0.0.0", "MCP_PORT": str(port),
                                     "ENVIRONMENT_NAME": child_name,
                                     # its published data plane on 127.0.0.1 takes the admin token too
                                     **({ADMIN_TOKEN_ENV: inst.admin_token} if inst.admin_token else {})},
                           run_id=inst.run_id, labels={"agentenv.env-instance": inst.instance_id}, **fields)
        image_for = getattr(provider, "image_for", None)
        try:
            if image_for is not None:  # a missing image fails here, before any container or service starts
                await asyncio.to_thread(image_for, spec)
            sandbox = await provider.create(spec)
        except AgentenvError as e:
            raise DeployError(self._container_problem(where, image, e), hint=e.hint) from None
        inst.sandboxes.append(sandbox)
        base = (getattr(sandbox, "tunnel_urls", None) or {}).get(str(port))
        if not base:
            raise DeployError(f"{where}: its container ({sandbox.sandbox_id}) has no published port {port}")
        url = base.rstrip("/") + senv.mcp_path
        await self._wait_container(where, provider, sandbox, base.rstrip("/"), url)
        return url, {"name": child_name, "kind": "container", "url": url, "image": image,
                     "sandbox_id": sandbox.sandbox_id, "sandbox_type": provider.name, "container_port": port}

    @staticmethod
    def _container_problem(where: str, image: str, e: AgentenvError) -> str:
        if isinstance(e, NotFoundError) and "local storage" in e.message:
            return (f"{where}: its image {image} is not in Podman's local storage ({PODMAN_NOTE}, which never "
                    "pull from a registry)")
        if type(e).__name__ == "PodmanUnavailable":
            return f"{where}: is an image env ({image}), and {PODMAN_NOTE}, which cannot run here: {e.message}"
        return f"{where}: cannot start its container from {image}: {e.message}"

    async def _wait_container(self, where: str, provider: Any, sandbox: Any, base: str, url: str) -> None:
        """Until the server in the container answers (`/ready`, else its MCP path below 500); a container
        that stops, or a server that never answers, fails with the container's logs."""
        import httpx2

        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.ready_timeout
        checked = loop.time()

        async def logs() -> str:
            try:
                text = (await asyncio.to_thread(provider.logs, sandbox.sandbox_id, 40)).strip()
            except Exception as e:
                text = f"(cannot read its logs: {e})"
            return text or "(nothing)"

        async with httpx2.AsyncClient(timeout=2.0) as http:
            while True:
                if await _answers(http, base, url):
                    return
                if loop.time() - checked > 0.5:
                    checked = loop.time()
                    try:
                        await provider.get(sandbox.sandbox_id)
                    except NotFoundError:
                        raise DeployError(f"{where}: its container ({sandbox.sandbox_id}) stopped before its "
                                          f"server was ready; its logs:\n{await logs()}") from None
                if loop.time() > deadline:
                    raise DeployError(f"{where}: its server did not answer at {url} within {self.ready_timeout:g}s "
                                      f"(container {sandbox.sandbox_id}); its logs:\n{await logs()}",
                                      hint="the image must serve MCP over HTTP on 0.0.0.0:$MCP_PORT "
                                           f"(the env's container_port, default {CONTAINER_PORT})")
                await asyncio.sleep(0.05)

    @staticmethod
    def _module_target(folder: Path, module: str) -> str:
        ref, _, cls = module.rpartition(":")
        if ref.endswith(".py"):
            return f"{folder / ref}:{cls}"
        return module

    async def _wait_ready(self, where: str, p: _Proc, base: str, url: str) -> None:
        import httpx2

        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.ready_timeout
        async with httpx2.AsyncClient(timeout=2.0) as http:
            while True:
                if p.proc.poll() is not None:
                    raise DeployError(f"{where}: its server exited with code {p.proc.returncode} before it "
                                      f"was ready; its last output:\n{p.last_output()}")
                if await _answers(http, base, url):
                    return
                if loop.time() > deadline:
                    raise DeployError(f"{where}: its server did not answer at {url} within "
                                      f"{self.ready_timeout:g}s; its last output:\n{p.last_output()}")
                await asyncio.sleep(0.05)

    async def _serve(self, inst: _Instance, gateway: Any, app: Any = None) -> str:
        """Serve `app` (default: the gateway's) with uvicorn on the hub loop; its base URL."""
        import uvicorn

        sock = _free_socket()
        port = sock.getsockname()[1]
        options: dict[str, Any] = {}
        if app is None:  # the gateway's own HTTP protocol answers 2026-revision tools/call off the socket
            from agentenv_local.gateway.fastpath import protocol_class

            options["http"] = protocol_class(gateway)
        config = uvicorn.Config(app if app is not None else gateway.app(), log_level="warning", lifespan="on",
                                timeout_graceful_shutdown=2, access_log=False, **options)
        server = uvicorn.Server(config)
        inst.server = server
        inst.serve_task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]),
                                                                 name=f"gateway-{inst.instance_id}")
        deadline = asyncio.get_running_loop().time() + 30
        while not server.started:
            if inst.serve_task.done():
                exc = inst.serve_task.exception() if not inst.serve_task.cancelled() else None
                raise DeployError(f"the gateway of {inst.instance_id} did not start: {exc!r}")
            if asyncio.get_running_loop().time() > deadline:
                raise DeployError(f"the gateway of {inst.instance_id} did not start in 30s")
            await asyncio.sleep(0.01)
        return f"http://127.0.0.1:{port}"

    async def _fetch_card(self, card_url: str, gateway: Any) -> dict | None:
        import httpx2

        try:
            async with httpx2.AsyncClient(timeout=10.0) as http:
                r = await http.get(card_url)
            if r.status_code == 200:
                return r.json()
        except Exception as e:
            log.warning("env card %s: %r", card_url, e)
        if gateway is not None:
            with contextlib.suppress(Exception):
                return await gateway.card()
        return None

    # -- teardown -----------------------------------------------------------------------------
    async def _stop(self, inst: _Instance) -> None:
        if inst.server is not None:
            inst.server.should_exit = True
            if inst.serve_task is not None:
                try:
                    await asyncio.wait_for(asyncio.shield(inst.serve_task), 8)
                except (TimeoutError, Exception):
                    inst.server.force_exit = True
                    inst.serve_task.cancel()
                    with contextlib.suppress(BaseException):
                        await inst.serve_task
        if inst.gateway is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(inst.gateway.aclose(), 10)
        loop = asyncio.get_running_loop()
        for p in inst.procs:
            if p.proc.poll() is None:
                await loop.run_in_executor(None, _kill_pid, p.proc.pid)
            with contextlib.suppress(Exception):
                p.proc.wait(timeout=1)
        for sandbox in inst.sandboxes:
            try:
                await asyncio.wait_for(sandbox.terminate(), 60)
            except Exception:  # `agentenv sandbox prune` finds what is left
                log.exception("env instance %s: could not remove container %s", inst.instance_id,
                              sandbox.sandbox_id)
        inst.sandboxes.clear()
        shutil.rmtree(inst.folder, ignore_errors=True)
        inside = str(inst.folder) + os.sep  # in-process envs put their folder on sys.path when loaded
        sys.path[:] = [p for p in sys.path if not (p + os.sep).startswith(inside)]

    async def teardown(self, instance_id: str, reason: str | None = None) -> dict:
        """Stop an instance (its uvicorn server, gateway and subprocesses), remove its folder, record it
        terminated. Tearing down one that already is answers its record."""
        inst = self._live.pop(instance_id, None)
        if inst is None:
            body = self.instance(instance_id)
            if body.get("status") == "running":  # recorded by this hub but not live: a leftover
                await asyncio.get_running_loop().run_in_executor(None, _kill_children, body)
                shutil.rmtree(self.root / instance_id, ignore_errors=True)
                body.update(status="terminated", terminated_at_utc=_utc_now())
                self.store.records.save(INSTANCES, instance_id, body)
            return body
        await self._stop(inst)
        self._save_state(instance_id, inst.gateway)
        body = {**inst.record, "status": "terminated", "terminated_at_utc": _utc_now()}
        if reason:
            body["status_reason"] = reason
        self.store.records.save(INSTANCES, instance_id, body)
        return body

    async def aclose(self, reason: str = "hub stopped") -> None:
        for instance_id in list(self._live):
            try:
                await self.teardown(instance_id, reason=reason)
            except Exception:
                log.exception("env instance %s: teardown failed", instance_id)
        providers, self._own_providers = list(self._own_providers.values()), {}
        for provider in providers:  # only the ones this manager made (a run's providers close with it)
            close = getattr(provider, "aclose", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    await close()

    def close(self, timeout: float = 30) -> None:
        """From another thread (the hub's close): tear down every live instance on the loop."""
        if not (self._live or self._own_providers) or self.loop is None or not self.loop.is_running():
            return
        future = asyncio.run_coroutine_threadsafe(self.aclose(), self.loop)
        with contextlib.suppress(Exception):
            future.result(timeout)


async def _answers(http: Any, base: str, url: str) -> bool:
    """Is an env server up: its `/ready` says so, or its MCP URL answers without a server error?"""
    with contextlib.suppress(Exception):  # not listening yet
        if (await http.get(base + "/ready")).status_code == 200:
            return True
        return (await http.get(url)).status_code < 500
    return False


def _sandbox_fields(children: list[dict]) -> dict:
    """The record's sandbox_id / sandbox_type: the (first) container child's, else None."""
    boxed = [c for c in children if c.get("sandbox_id")]
    return {"sandbox_id": boxed[0]["sandbox_id"] if boxed else None,
            "sandbox_type": boxed[0].get("sandbox_type") if boxed else None}


def _kill_children(body: dict) -> None:
    """What a recorded instance left: kill its subprocesses, remove its containers (podman rm)."""
    for child in body.get("children") or []:
        pid = child.get("pid")
        if pid and _pid_alive(int(pid)):
            _kill_pid(int(pid))
        if child.get("sandbox_id") and child.get("sandbox_type") == "podman":
            with contextlib.suppress(Exception):  # no podman here: nothing of ours can be running
                from sandboxes.podman.engine import run_podman

                run_podman(["rm", "--force", "--time", "1", str(child["sandbox_id"])], timeout=60)


def _spawn(argv: list[str], folder: Path, env: dict[str, str], log_path: Path) -> subprocess.Popen:
    """Start a server in its own session (its process group is killed at teardown), output to a file."""
    with open(log_path, "wb") as out:
        return subprocess.Popen(argv, cwd=folder, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)


def _load_with_env(target: str, env_vars: dict[str, str], folder: Path) -> Any:
    """Load the Env with its env_vars set while it is built (an in-process env reads them in __init__)."""
    from agentenv_local.env import load_env

    saved = {k: os.environ.get(k) for k in env_vars}
    os.environ.update(env_vars)
    try:
        return load_env(target)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
