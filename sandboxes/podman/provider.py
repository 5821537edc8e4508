"""The `podman` sandbox provider: each sandbox is a hardened container on the local Podman.

Isolation defaults (all settable per step or in `[sandbox.providers.podman]`):
- network `none` (no interface but its own loopback) unless the step exposes ports or sets
  network_policy `allow_all`; an `allowlist` is refused, since plain Podman cannot enforce one;
- read-only root filesystem with tmpfs on /tmp and /run, and `/app` a writable folder bind-mounted
  `nosuid,nodev` from `<state_dir>/sandboxes/podman/<id>/app` (so files move in and out without a copy
  into the container); the host reads and writes that folder without following any link in it (the
  container may swap a folder for a link at any moment: see agentenv_local/nofollow.py);
- every capability dropped, no-new-privileges, an init process, cpu / memory / pids limits (the CPU
  quota is read back from the container's cgroup: a limit that is not applied refuses the sandbox);
- rootful Podman: a user namespace (`userns`, default "auto"), so the container's root is an unprivileged
  uid on this machine (USERNS_BASE and up) and a setuid file it leaves in /app is not root's. Where
  user namespaces do not work the container runs without one, and the provider says so once.

A `vm`-mode sandbox runs our exec agent as its main process, listening on a unix socket in a second
bind-mounted folder: commands go over that socket (see channel.py). A `container`-mode sandbox boots its
image's own command; commands reach it over one kept-open `podman exec`.

Containers carry the labels `agentenv.project` (this project), `agentenv.sandbox`, `agentenv.run` and
`agentenv.owner` (the process that made it), and a `meta.json` beside the work folder says which run a
sandbox from the warm pool went to; `prune()` uses both to find what a dead run left behind.

Terminating a plain `vm` sandbox marks it `terminating` and hands the `podman rm` and the work folder's
deletion to a detached process (its own session): the run's result does not wait ~0.2 s for the removal,
and a one-shot command that exits right after still leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import hashlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Literal

from agentenv_local.errors import AgentenvError, NotFoundError, StepError
from agentenv_local.procs import pid_alive
from agentenv_local.sandbox_api import (
    app_relative,
    host_kind,
    list_host_files,
    read_host_file,
    write_host_file,
)

from ..base import ExecResult, Sandbox, SandboxProvider, SandboxSpec
from . import images
from .channel import Channel, ChannelError, agent_argv, decode, encode
from .engine import (
    configure,
    podman_binary,
    podman_env,
    run_podman,
)
from .libpod import LibpodClient, LibpodError, create_spec
from .pool import WarmPool
from .readiness import SETUP_HINT, mark_set_up, marker_path, not_ready_reason
from .service import PodmanService

APP = "/app"
CTL = "/.agentenv"
AGENT_SOCKET = "agent.sock"
L_PROJECT, L_SANDBOX, L_NAME, L_RUN, L_OWNER, L_POOL = (
    "agentenv.project", "agentenv.sandbox", "agentenv.sandbox-name", "agentenv.run", "agentenv.owner", "agentenv.pool")
READY_TIMEOUT_S = 30.0
START_GRACE_S = 0.3  # a container-mode image that dies at once is reported, with its logs
DEFAULT_PIDS = 512
# slirp4netns with allow_host_loopback shows the host's 127.0.0.1 at this address inside the container.
HOST_LOOPBACK = "10.0.2.2"
HOST_ACCESS_NETWORK = ("slirp4netns", {"slirp4netns": ["allow_host_loopback=true"]})
PUBLISHED_PORTS_NETWORK = "slirp4netns"  # its own stack with outbound access; the host's loopback out of reach
# Rootful Podman maps the container's uids 0..65535 to these host uids (far above any real account).
USERNS_BASE = 1_000_000_000
USERNS_SIZE = 65536
CPU_PERIOD_US = 100_000
REMOVER_NICENESS = 10  # the detached `podman rm` of a terminated sandbox (see _remove_detached)
CPU_RECHECK_S = 0.2  # only when a container's cgroup shows no CPU quota (see _create_and_start_as)


# -- who made a container ------------------------------------------------------------------
def _start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def owner_token(pid: int | None = None) -> str:
    pid = pid or os.getpid()
    return f"{socket.gethostname()}:{pid}:{_start_time(pid) or '?'}"


def owner_alive(token: str | None) -> bool:
    """Is the process that made a container still running? Unknown (another host, no token): yes."""
    if not token:
        return False
    host, _, rest = token.partition(":")
    pid_text, _, started = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return True
    pid = int(pid_text)
    return pid_alive(pid) and started in ("?", _start_time(pid))


def _still_running(api: LibpodClient, container_id: str) -> bool:
    try:
        attrs = api.inspect_container(container_id)
    except Exception:  # removed meanwhile: not running
        return False
    return bool((attrs.get("State") or {}).get("Running"))


def cgroup_cpu_limit(pid: int) -> float | None:
    """The CPUs the cgroup of process `pid` may use (0.0: no limit), or None when it cannot be read."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _hid, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        try:
            if not controllers:  # cgroups v2
                quota, period = Path(f"/sys/fs/cgroup{path}/cpu.max").read_text().split()
                return 0.0 if quota == "max" else int(quota) / int(period)
            if "cpu" in controllers.split(","):  # cgroups v1: cpu alone, or mounted as cpu,cpuacct
                for mount in (controllers, "cpu", "cpu,cpuacct"):
                    folder = Path(f"/sys/fs/cgroup/{mount}{path}")
                    if (folder / "cpu.cfs_quota_us").is_file():
                        quota_us = int((folder / "cpu.cfs_quota_us").read_text())
                        return 0.0 if quota_us < 0 else quota_us / int((folder / "cpu.cfs_period_us").read_text())
        except (OSError, ValueError):
            continue
    return None


class CpuNotEnforced(StepError):
    """The container runs without the CPU quota asked for."""


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(f"{path.name}.{secrets.token_hex(4)}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
    os.replace(tmp, path)


class PodmanSandbox(Sandbox):
    type: ClassVar[str] = "podman"
    python_executable: ClassVar[str] = "python3"

    def __init__(self, provider: PodmanSandboxProvider, sandbox_id: str, spec: SandboxSpec, meta: dict):
        super().__init__(sandbox_id, spec)
        self.provider = provider
        self.meta = meta
        self.folder = provider.root / sandbox_id
        self.app_dir = self.folder / "app"

    @property
    def tunnel_urls(self) -> dict[str, str]:
        return dict(self.meta.get("ports") or {})

    @property
    def container(self) -> str:
        return self.meta.get("container") or self.sandbox_id

    @property
    def host_address(self) -> str | None:
        """Where this machine's 127.0.0.1 is, seen from inside (with host_access), else None."""
        return HOST_LOOPBACK if self.spec.host_access else None

    # -- paths ------------------------------------------------------------------------------
    @property
    def app_owner(self) -> tuple[int, int] | None:
        """Who owns what the host makes in /app: the container's root (mapped), else whoever we are."""
        owner = self.meta.get("app_owner")
        return (int(owner[0]), int(owner[1])) if isinstance(owner, list) and len(owner) == 2 else None

    def _require_alive(self) -> None:
        if not self.app_dir.is_dir():
            raise NotFoundError(f"sandbox {self.sandbox_id} is gone (terminated)")

    async def _request(self, op: str, wait: float | None = 120.0, **fields: Any) -> dict:
        channel = await self.provider.channel(self)
        try:
            reply = await channel.request(op, wait=wait, **fields)
        except ChannelError:
            await self.provider.forget_channel(self.sandbox_id)
            raise
        return reply

    # -- commands ---------------------------------------------------------------------------
    async def exec(self, command: str | list[str], *, timeout: float | None = 120.0,
                   env: dict[str, str] | None = None, cwd: str = APP) -> ExecResult:
        self._require_alive()
        if isinstance(command, str):
            argv = ["bash", "-c", command]
        else:
            argv = [str(a) for a in command]
            if not argv:
                raise StepError(f"sandbox {self.sandbox_id}: empty command")
        merged = {**self.spec.env_vars, **(env or {})}
        started = time.monotonic()
        try:
            reply = await self._request("exec", wait=None if timeout is None else timeout + 30, argv=argv,
                                        cwd=cwd or APP, env=merged, timeout=timeout)
        except TimeoutError:
            return ExecResult(-1, "", "no answer from the sandbox's exec agent", timed_out=True,
                              duration_s=time.monotonic() - started)
        if "error" in reply:
            if reply.get("errno") == "ENOENT":
                raise NotFoundError(f"working directory {cwd!r} does not exist in sandbox {self.sandbox_id}")
            raise StepError(f"sandbox {self.sandbox_id}: {reply['error']}")
        result = ExecResult(reply["exit_code"], decode(reply.get("stdout")).decode("utf-8", "replace"),
                            decode(reply.get("stderr")).decode("utf-8", "replace"),
                            timed_out=bool(reply.get("timed_out")), duration_s=float(reply.get("duration_s") or 0))
        if reply.get("oom_killed"):
            result.killed_reason = (f"killed: out of memory (the sandbox's memory limit is "
                                    f"{self.spec.memory_mb} MiB; raise memory_mb)")
        elif reply.get("signal") == 9 and not result.timed_out:
            result.killed_reason = "killed by SIGKILL (often the sandbox's memory or pids limit)"
        return result

    # -- files ------------------------------------------------------------------------------
    async def write_file(self, path: str, data: bytes) -> None:
        self._require_alive()
        rel = app_relative(path)
        if rel is None:
            reply = await self._request("write", path=path, data=encode(bytes(data)))
            if "error" in reply:
                raise StepError(f"cannot write {path!r} in sandbox {self.sandbox_id}: {reply['error']}")
            return
        await write_host_file(self.app_dir, rel, data, path, self.sandbox_id, owner=self.app_owner)

    async def read_file(self, path: str) -> bytes:
        self._require_alive()
        rel = app_relative(path)
        if rel is None:
            reply = await self._request("read", path=path)
            if "error" in reply:
                if reply.get("errno") in ("ENOENT", "EISDIR"):
                    raise NotFoundError(f"no file {path!r} in sandbox {self.sandbox_id}")
                raise StepError(f"cannot read {path!r} in sandbox {self.sandbox_id}: {reply['error']}")
            return decode(reply.get("data"))
        return await read_host_file(self.app_dir, rel, path, self.sandbox_id)

    async def exists(self, path: str, kind: Literal["any", "file", "dir"] = "any") -> bool:
        self._require_alive()
        rel = app_relative(path)
        if rel is None:
            found = (await self._request("stat", path=path)).get("kind")
        else:
            found = await asyncio.to_thread(host_kind, self.app_dir, rel, path, self.sandbox_id)
        return found is not None if kind == "any" else found == kind

    async def list_files(self, path: str) -> list[str]:
        self._require_alive()
        rel = app_relative(path)
        if rel is None:
            return list((await self._request("list", path=path)).get("files") or [])
        return await list_host_files(self.app_dir, rel, path, self.sandbox_id)

    # -- lifecycle --------------------------------------------------------------------------
    async def logs(self, tail: int = 200) -> str:
        return await asyncio.to_thread(self.provider.logs, self.sandbox_id, tail)

    async def terminate(self) -> None:
        await self.provider.remove(self.sandbox_id, wait=self.provider.removal_waits(self.spec))

    def to_record(self) -> dict[str, Any]:
        return {**super().to_record(), "status": self.meta.get("status", "running"), "container": self.container,
                "image": self.meta.get("image"), "created_at": self.meta.get("created_at"),
                "expires_at": self.meta.get("expires_at"), "tunnel_urls": self.tunnel_urls,
                "isolation": "container"}


class PodmanSandboxProvider(SandboxProvider):
    """Sandboxes that are hardened Podman containers. See the module docstring for the defaults.

    Settings (`[sandbox.providers.podman]`): socket, podman, containers_conf, base_image, base_mirror,
    pool_size (warm containers per image, default 2; 0 turns the pool off), pool_fill_after (how many
    sandboxes of an image are asked for before the pool warms more, default 2), read_only (default true),
    pids (default 512), channel ("auto" | "socket" | "exec"), userns ("auto": a user namespace under
    rootful Podman; "host": none), userns_base (the first host uid of that namespace, default 1e9),
    service_idle_s (how long the project's Podman service stays up unused, default 120: see service.py),
    remove_in_background (default true: a plain `vm` sandbox's container is removed by a detached process,
    off the run's critical path).
    """

    name: ClassVar[str] = "podman"
    isolation: ClassVar[str] = "container"
    supported_modes: ClassVar[tuple[str, ...]] = ("vm", "container")
    supports_network_policy: ClassVar[bool] = True

    def __init__(self, state_dir: Path, config: dict[str, Any] | None = None):
        super().__init__(state_dir, config)
        self.service = PodmanService(self.state_dir, self.config)
        self.root = Path(self.config.get("root") or (self.state_dir / "sandboxes" / "podman")).expanduser()
        self.project = hashlib.sha256(str(Path(self.state_dir).resolve()).encode()).hexdigest()[:12]
        self.pool = WarmPool(self, int(self.config.get("pool_size", 2)), int(self.config.get("pool_fill_after", 2)))
        self._channels: dict[str, Channel] = {}
        self._ready_done = False
        self._base_image: str | None = None
        self._known_images: set[str] = set()
        self._userns_failed: str | None = None  # why user namespaces do not work here, once found out
        self._removers: dict[str, subprocess.Popen] = {}  # sandbox id -> the detached removal of its container
        self.on_progress: Callable[[str], None] | None = None

    # -- availability and setup -------------------------------------------------------------
    def unusable_reason(self) -> str | None:
        """None when Podman answers here; else why not (for `sandbox.default = "auto"`)."""
        try:
            podman_binary(self.config)
            # From files alone (no service, no container): a Podman that is not set up would be found out
            # only by a failing container start, after the base image was built.
            reason = not_ready_reason(self.config)
            if reason is not None:
                return reason
            self.service.api()
        except AgentenvError as exc:
            return exc.message
        return None

    def _say(self, line: str) -> None:
        if self.on_progress is not None:
            self.on_progress(line)
        else:
            print(line, file=sys.stderr, flush=True)

    def ready(self) -> Any:
        """Make sure the base image exists, this machine's fixes are known and the service answers; its
        podman-py client."""
        self._set_up()
        return self.service.client()

    def api(self) -> LibpodClient:
        """As ready(), with the small client making a sandbox needs (no podman-py import: see libpod.py)."""
        self._set_up()
        return self.service.api()

    def _set_up(self) -> None:
        if not self._ready_done:
            if not self.config.get("containers_conf") and not marker_path().exists():
                # built (or found) with the podman CLI: no service is started before the fixes are known
                base = images.ensure_base_image(self.config, on_line=self._say)
                configure(base, self.config, log=self._say)
                mark_set_up(self.config)
                # A service we started before the fixes were written (say, to list containers) runs without
                # them: every container it starts would fail (`error setting rlimit ...`). Restart it.
                self.service.stop()
            self._ready_done = True

    def image_for(self, spec: SandboxSpec) -> str:
        """The image a spec runs: its own (which must be local), else the base image."""
        known = spec.image or self._base_image
        if known is not None and known in self._known_images:  # a `podman image exists` costs ~40 ms
            return known
        if spec.image:
            ref = spec.image
            if not self._image_exists(spec.image):
                raise NotFoundError(
                    f"image {spec.image!r} is not in Podman's local storage (nothing is pulled from a registry)",
                    hint="build it (`agentenv image build NAME PATH`), or load it with `podman load`")
        else:
            ref = images.base_image_ref(self.config)
            if not self._image_exists(ref):
                ref = images.ensure_base_image(self.config, on_line=self._say)
            self._base_image = ref
        self._known_images.add(ref)
        return ref

    def _image_exists(self, ref: str) -> bool:
        """Asked of the service once it runs (a few ms) rather than of a `podman` process (~40 ms); before
        that, of the CLI (a missing image is found out without starting the service)."""
        if not self._ready_done:
            return images.exists(ref, self.config)
        try:
            return self.api().image_exists(ref)
        except AgentenvError:
            raise
        except Exception:  # the API failed in a way the CLI may not: let the CLI answer
            return images.exists(ref, self.config)

    def _check_spec(self, spec: SandboxSpec) -> None:
        if spec.mode not in self.supported_modes:
            raise StepError(f"the podman provider cannot create a {spec.mode!r} sandbox")
        policy = spec.network_policy
        if policy is not None and policy.mode == "allowlist":
            raise StepError(
                "the podman provider cannot enforce a network allowlist (network_policy mode 'allowlist')",
                hint="use mode \"none\" (the default) or \"allow_all\", or a provider that supports allowlists")
        missing = [host for host in spec.read_only_mounts.values() if not os.path.exists(host)]
        if missing:
            raise StepError(f"cannot mount {', '.join(missing)} into the sandbox: not on this machine")

    # -- creating -----------------------------------------------------------------------------
    async def create(self, spec: SandboxSpec) -> PodmanSandbox:
        self._check_spec(spec)
        if not self._ready_done:
            await asyncio.to_thread(self.api)
        image = await asyncio.to_thread(self.image_for, spec)
        if self.pool.eligible(spec):
            sandbox = await self.pool.acquire(spec, image)
            if sandbox is not None:
                return sandbox
        return await self.start_container(spec, image)

    def _network(self, spec: SandboxSpec) -> str:
        if spec.host_access:  # its own network stack, plus the host's loopback at HOST_LOOPBACK
            return HOST_ACCESS_NETWORK[0]
        if spec.exposed_ports:
            # Published through slirp4netns, whose port forwarder listens on the host port: the port is taken
            # while the container runs and free once it is gone. On the bridge, rootful Podman publishes with a
            # NAT rule only: nothing holds the port, so a server that later binds it on 127.0.0.1 (any port-0
            # server: ours, a test's) has its local clients sent to the container instead (refused once the
            # container is gone), and a container removed without its network torn down leaves the rule behind
            # for good. Seen in the test suite as rare "connection refused" from servers just started.
            return PUBLISHED_PORTS_NETWORK
        if spec.network_policy is not None and spec.network_policy.mode == "allow_all":
            return "bridge"
        return "none"

    def use_socket_channel(self, spec: SandboxSpec) -> bool:
        wanted = self.config.get("channel", "auto")
        if spec.mode != "vm" or wanted == "exec":
            return False
        return wanted == "socket" or sys.platform.startswith("linux")

    async def start_container(self, spec: SandboxSpec, image: str, *, pooled: bool = False) -> PodmanSandbox:
        sandbox_id = f"podman-{secrets.token_hex(6)}"
        folder = self.root / sandbox_id
        (folder / "app").mkdir(parents=True)
        (folder / "ctl").mkdir()
        os.chmod(folder, 0o700)  # nothing a container leaves in /app is reachable by other users here
        now = time.time()
        socket_channel = self.use_socket_channel(spec)
        meta: dict[str, Any] = {"sandbox_id": sandbox_id, "container": sandbox_id, "sandbox_type": self.name,
                "status": "pooled" if pooled else "starting", "image": image, "run_id": spec.run_id,
                "created_at": now, "expires_at": now + spec.ttl_seconds, "owner": owner_token(),
                "channel": "socket" if socket_channel else "exec", "spec": spec.model_dump(mode="json")}
        _write_json(folder / "meta.json", meta)
        try:
            ports, owner = await asyncio.to_thread(self._create_and_start, sandbox_id, spec, image, folder,
                                                   socket_channel, pooled)
            meta["ports"], meta["app_owner"] = ports, list(owner) if owner else None
            sandbox = PodmanSandbox(self, sandbox_id, spec, meta)
            if socket_channel:
                await self._await_agent(sandbox)
            elif spec.mode == "container":
                await self._check_still_running(sandbox_id)
            meta["status"] = "pooled" if pooled else "running"
            _write_json(folder / "meta.json", meta)
            return sandbox
        except BaseException:
            await asyncio.shield(self.remove(sandbox_id))
            raise

    def _userns(self) -> tuple[int, int] | None:
        """The host uid/gid of the container's root when it gets a user namespace of ours, else None
        (rootless Podman: the container already runs in your own user namespace)."""
        if self.config.get("userns", "auto") == "host" or self._userns_failed or os.geteuid() != 0:
            return None
        base = int(self.config.get("userns_base", USERNS_BASE))
        return base, base

    def _create_and_start(self, sandbox_id: str, spec: SandboxSpec, image: str, folder: Path, socket_channel: bool,
                          pooled: bool) -> tuple[dict[str, str], tuple[int, int] | None]:
        owner = self._userns()
        try:
            return self._create_and_start_as(owner, sandbox_id, spec, image, folder, socket_channel, pooled), owner
        except StepError as exc:
            if owner is None or isinstance(exc, CpuNotEnforced):
                raise
            with contextlib.suppress(Exception):
                self.ready().containers.get(sandbox_id).remove(force=True)  # rare: podman-py is fine here
            # Without a user namespace it may still run: then this machine cannot map uids; say so once.
            ports = self._create_and_start_as(None, sandbox_id, spec, image, folder, socket_channel, pooled)
            self._userns_failed = exc.message
            self._say(f"podman: user namespaces do not work here ({exc.message}); containers run without one "
                      "(capabilities dropped, no-new-privileges, /app nosuid); set userns = \"host\" to silence this")
            return ports, None

    def _create_and_start_as(self, owner: tuple[int, int] | None, sandbox_id: str, spec: SandboxSpec, image: str,
                             folder: Path, socket_channel: bool, pooled: bool) -> dict[str, str]:
        api = self.api()
        labels = {L_PROJECT: self.project, L_SANDBOX: sandbox_id, L_NAME: spec.name, L_RUN: spec.run_id or "",
                  L_OWNER: owner_token(), L_POOL: "1" if pooled else "", **spec.labels}
        # nosuid,nodev: a setuid file or a device node the container makes in /app means nothing here
        binds = {str(folder / "app"): APP, **({str(folder / "ctl"): CTL} if spec.mode == "vm" else {})}
        volumes = {src: {"bind": dst, "extended_mode": ["rw", "nosuid", "nodev"]} for src, dst in binds.items()}
        kwargs: dict[str, Any] = {}
        for src in binds:
            os.chown(src, *(owner or (os.getuid(), os.getgid())))
        if owner is not None:
            idmap = [{"container_id": 0, "host_id": owner[0], "size": USERNS_SIZE}]
            kwargs.update(userns_mode="private", idmappings={"UIDMap": idmap, "GIDMap": idmap})
        mounts: list[dict[str, Any]] = []
        read_only = bool(self.config.get("read_only", True))
        if read_only:  # a read-only root still needs somewhere to put temporary files
            mounts += [{"type": "tmpfs", "source": "tmpfs", "target": t} for t in ("/tmp", "/var/tmp", "/run")]
        # nosuid,nodev as for /app; rbind: a mounted folder's own mounts come along
        mounts += [{"type": "bind", "source": host, "target": inside, "options": ["ro", "rbind", "nosuid", "nodev"]}
                   for inside, host in sorted(spec.read_only_mounts.items())]
        if spec.mode == "vm":
            kwargs["command"] = (agent_argv(listen=f"{CTL}/{AGENT_SOCKET}") if socket_channel
                                 else ["sleep", "2147483647"])
        elif spec.command:
            kwargs["command"] = list(spec.command)
        network = self._network(spec)
        if spec.host_access:
            network, kwargs["network_options"] = HOST_ACCESS_NETWORK
        if spec.exposed_ports:
            kwargs["ports"] = {f"{p}/tcp": ("127.0.0.1", 0) for p in spec.exposed_ports}  # 0: any free port
        try:
            # the keywords of podman-py's containers.create(), rendered as it renders them (libpod.py)
            container_id = api.create_container(create_spec(
                image, name=sandbox_id, labels=labels, mounts=mounts, volumes=volumes, network_mode=network,
                init=True, stop_timeout=1, read_only=read_only, cap_drop=["ALL"],
                no_new_privileges=True, mem_limit=f"{spec.memory_mb}m",
                # the quota is given as quota/period (podman-py ignores nano_cpus)
                cpu_period=CPU_PERIOD_US, cpu_quota=max(1000, round(spec.cpu * CPU_PERIOD_US)),
                pids_limit=int(spec.pids or self.config.get("pids", DEFAULT_PIDS)),
                environment=dict(spec.env_vars), working_dir=APP, **kwargs))
            api.start_container(container_id)
            attrs = api.inspect_container(container_id)
        except Exception as exc:
            message = _api_message(exc)
            raise StepError(f"podman could not start a container from {image}: {message}",
                            hint=_start_failure_hint(message)) from exc
        pid = (attrs.get("State") or {}).get("Pid") or 0
        applied = cgroup_cpu_limit(int(pid)) if pid else None
        if applied is not None and applied <= 0:
            # a container exiting at start can show a half torn-down cgroup while podman still calls it running
            # (made within ms, it is caught mid-exit): look again once it had a moment to finish exiting
            time.sleep(CPU_RECHECK_S)
            applied = cgroup_cpu_limit(int(pid))
        if applied is not None and applied <= 0 and _still_running(api, container_id):
            # asked for, not enforced: refuse rather than pretend (a container that already exited is reported
            # by the caller with its logs; its cgroup may be gone or half torn down)
            raise CpuNotEnforced(f"sandbox {sandbox_id}: podman did not apply the CPU limit ({spec.cpu} CPUs): the "
                            "container's cgroup has no CPU quota",
                            hint="check `podman info` (cgroup manager, rootless cgroups v1 cannot limit CPU), "
                                 "or use a machine with cgroups v2")
        if not spec.exposed_ports:
            return {}
        bound = (attrs.get("NetworkSettings") or {}).get("Ports") or {}
        ports = {}
        for port in spec.exposed_ports:
            for binding in bound.get(f"{port}/tcp") or []:
                ports[str(port)] = f"http://127.0.0.1:{binding['HostPort']}"
                break
        return ports

    async def _await_agent(self, sandbox: PodmanSandbox) -> None:
        sock = sandbox.folder / "ctl" / AGENT_SOCKET
        deadline = time.monotonic() + READY_TIMEOUT_S
        checked = time.monotonic()
        while not sock.exists():
            if time.monotonic() > deadline:
                raise StepError(f"sandbox {sandbox.sandbox_id}: its exec agent did not start within "
                                f"{READY_TIMEOUT_S:.0f} s" + self._logs_suffix(sandbox.sandbox_id),
                                hint="the image needs python3 (or set channel = \"exec\")")
            if time.monotonic() - checked > 0.5:
                checked = time.monotonic()
                await self._check_still_running(sandbox.sandbox_id, grace=0)
            await asyncio.sleep(0.003)
        self._channels[sandbox.sandbox_id] = await Channel.connect_socket(sock, sandbox.sandbox_id)

    async def _check_still_running(self, sandbox_id: str, grace: float = START_GRACE_S) -> None:
        if grace:
            await asyncio.sleep(grace)
        state = await asyncio.to_thread(self._state, sandbox_id)
        if state.get("Running"):
            return
        raise StepError(f"the container of sandbox {sandbox_id} exited at start (exit code "
                        f"{state.get('ExitCode')})" + self._logs_suffix(sandbox_id),
                        hint="run the image by hand to see why: `podman run --rm -it IMAGE`")

    def _state(self, sandbox_id: str) -> dict:
        try:
            attrs = self.api().inspect_container(sandbox_id)
        except Exception:  # gone, or never made: no state
            return {}
        return attrs.get("State") or {}

    def _logs_suffix(self, sandbox_id: str) -> str:
        text = self.logs(sandbox_id, 30).strip()
        return f"; its logs:\n{text}" if text else " (it logged nothing)"

    def logs(self, sandbox_id: str, tail: int = 200) -> str:
        proc = run_podman(["logs", "--tail", str(tail), sandbox_id], self.config, timeout=60)
        return (proc.stdout + proc.stderr).decode("utf-8", "replace")

    # -- channels -----------------------------------------------------------------------------
    async def channel(self, sandbox: PodmanSandbox) -> Channel:
        loop = asyncio.get_running_loop()
        channel = self._channels.get(sandbox.sandbox_id)
        if channel is not None and channel.alive and channel.loop is loop:
            return channel
        if sandbox.meta.get("channel") == "socket":
            channel = await Channel.connect_socket(sandbox.folder / "ctl" / AGENT_SOCKET, sandbox.sandbox_id)
        else:
            channel = await Channel.spawn(sandbox.container, self.config)
        self._channels[sandbox.sandbox_id] = channel
        return channel

    async def forget_channel(self, sandbox_id: str) -> None:
        channel = self._channels.pop(sandbox_id, None)
        if channel is not None and channel.loop is asyncio.get_running_loop():
            await channel.close()

    # -- finding ------------------------------------------------------------------------------
    def _load(self, sandbox_id: str) -> PodmanSandbox | None:
        if not isinstance(sandbox_id, str) or not sandbox_id.startswith("podman-") or "/" in sandbox_id:
            return None
        meta = _read_json(self.root / sandbox_id / "meta.json")
        if meta is None or meta.get("status") != "running":
            return None
        try:
            spec = SandboxSpec.model_validate(meta.get("spec") or {})
        except ValueError:
            return None
        return PodmanSandbox(self, sandbox_id, spec, meta)

    async def get(self, sandbox_id: str) -> PodmanSandbox:
        sandbox = self._load(sandbox_id)
        if sandbox is not None and not (await asyncio.to_thread(self._state, sandbox_id)).get("Running"):
            sandbox = None
        if sandbox is None:
            raise NotFoundError(f"podman sandbox {sandbox_id!r} not found (terminated, or never created here)",
                                hint="list the live ones with `agentenv sandbox list`")
        return sandbox

    def containers(self) -> list[dict]:
        """Every container of this project (any state), with its labels and meta."""
        client = self.ready()
        out = []
        for container in client.containers.list(all=True, filters={"label": f"{L_PROJECT}={self.project}"}):
            labels = container.labels or {}
            sandbox_id = labels.get(L_SANDBOX) or container.name
            meta = _read_json(self.root / sandbox_id / "meta.json") or {}
            state = container.attrs.get("State")  # a string in listings, an object in inspect
            state = state.get("Status") if isinstance(state, dict) else state
            out.append({"sandbox_id": sandbox_id, "container_id": container.id[:12], "state": state,
                        "image": meta.get("image") or (container.attrs.get("ImageName") or ""),
                        "run_id": meta.get("run_id") or labels.get(L_RUN) or None,
                        "status": meta.get("status") or "unknown", "pooled": meta.get("status") == "pooled",
                        "owner": labels.get(L_OWNER), "sandbox_name": (meta.get("spec") or {}).get("name")
                        or labels.get(L_NAME), "created_at": meta.get("created_at")})
        return out

    async def list(self) -> list[dict[str, Any]]:
        rows = await asyncio.to_thread(self.containers)
        return [{**r, "sandbox_type": self.name, "isolation": self.isolation} for r in rows
                if r["status"] == "running"]

    # -- removing -----------------------------------------------------------------------------
    def remove_sync(self, sandbox_id: str) -> bool:
        removed = False
        try:
            api = self.api()
            try:
                api.remove_container(sandbox_id)
            except LibpodError as exc:
                # Podman answers "container not running" when the container exits while `rm --force` kills it,
                # and leaves it there, exited (CI, stop 33: an OpenHands agent container outlived its run so).
                # Removing the exited container then goes through.
                if "not running" not in exc.explanation:
                    raise
                api.remove_container(sandbox_id)
            removed = True
        except (LibpodError, OSError, AgentenvError):  # not removed: `agentenv sandbox prune` finishes the job
            pass
        shutil.rmtree(self.root / sandbox_id, ignore_errors=True)
        return removed

    async def remove(self, sandbox_id: str, *, wait: bool = True) -> bool:
        """Remove a sandbox's container and work folder. `wait=False`: hand both to a detached process and
        return at once (True: handed off); the removal finishes even if this process exits right after."""
        channel = self._channels.pop(sandbox_id, None)
        if channel is not None and channel.loop is asyncio.get_running_loop():
            await channel.close()
        meta_path = self.root / sandbox_id / "meta.json"
        meta = _read_json(meta_path)
        if meta is not None:  # say so first: a crash mid-teardown leaves a sandbox prune will finish
            meta["status"] = "terminating"
            with contextlib.suppress(OSError):
                _write_json(meta_path, meta)
        if not wait and meta is not None:
            return await asyncio.to_thread(self._remove_detached, sandbox_id)
        return await asyncio.to_thread(self.remove_sync, sandbox_id)

    def removal_waits(self, spec: SandboxSpec) -> bool:
        """Does terminating a sandbox like this wait for its container to be gone? Plain `vm` sandboxes
        (nothing published, nobody waits for a port to be free) are removed off the run's critical path;
        the setting `remove_in_background = false` makes every removal wait."""
        return (not self.config.get("remove_in_background", True) or spec.mode != "vm"
                or bool(spec.exposed_ports) or spec.host_access)

    def _remove_detached(self, sandbox_id: str) -> bool:
        """`podman rm` the container, then delete its work folder, in a process of its own session: it
        outlives this one, so a command that exits right after its run still leaves nothing behind."""
        self._reap_removers()
        folder = self.root / sandbox_id
        # A second `rm` only when the first failed: Podman's "container not running" (remove_sync) leaves the
        # container there, exited.
        script = ('{ "$0" rm --force --time 0 --ignore "$1" || "$0" rm --force --time 0 --ignore "$1"; } '
                  '>/dev/null 2>&1; rm -rf -- "$2"')
        # at a lower CPU priority: on a busy machine the command that handed it over finishes first
        nice = [found, "-n", str(REMOVER_NICENESS)] if (found := shutil.which("nice")) else []
        try:
            self._removers[sandbox_id] = subprocess.Popen(
                [*nice, "sh", "-c", script, podman_binary(self.config), sandbox_id, str(folder)],
                env=podman_env(self.config),
                cwd=self.service.folder if self.service.folder.is_dir() else None, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        except OSError:  # cannot spawn: remove it here and now
            return self.remove_sync(sandbox_id)
        return True

    def _reap_removers(self) -> None:
        for sandbox_id, proc in list(self._removers.items()):
            if proc.poll() is not None:
                del self._removers[sandbox_id]

    def wait_removals(self, timeout: float = 60.0) -> int:
        """Wait for this provider's background removals to finish (tests, benchmarks); how many there were."""
        pending = list(self._removers.values())
        deadline = time.monotonic() + timeout
        for proc in pending:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        self._reap_removers()
        return len(pending)

    async def terminate(self, sandbox_id: str) -> bool:
        if not isinstance(sandbox_id, str) or not sandbox_id.startswith("podman-") or "/" in sandbox_id:
            return False
        live = self._load(sandbox_id)
        removed = await self.remove(sandbox_id, wait=live is None or self.removal_waits(live.spec))
        return live is not None and removed

    async def prune(self, run_is_dead: Callable[[str], bool], *, dry_run: bool = False) -> builtins.list[dict]:
        return await asyncio.to_thread(self.prune_sync, run_is_dead, dry_run=dry_run)

    def prune_sync(self, run_is_dead: Callable[[str], bool], *, dry_run: bool = False) -> builtins.list[dict]:
        """Remove what dead runs and dead processes left behind, and nothing else.

        A container goes when: it is in the warm pool (or still starting) and the process that made it
        is gone; or its run is dead (`run_is_dead(run_id)`: interrupted, or unknown to the store); or its
        teardown began and never finished. A kept sandbox of a finished run stays.
        """
        doomed = []
        rows = self.containers()
        for row in rows:
            status, run_id = row["status"], row["run_id"]
            if status in ("terminating", "terminated", "unknown"):
                reason = "its teardown never finished" if status != "unknown" else "it has no record"
                if status == "unknown" and owner_alive(row["owner"]):
                    continue
            elif status in ("pooled", "starting") or not run_id:
                if owner_alive(row["owner"]):
                    continue
                reason = f"the process that made it ({row['owner']}) is gone"
            elif run_is_dead(run_id):
                reason = f"its run {run_id} is dead"
            else:
                continue
            doomed.append({**row, "reason": reason})
        known = {r["sandbox_id"] for r in rows}
        if self.root.is_dir():  # work folders whose container is already gone
            for entry in self.root.iterdir():
                if entry.is_dir() and entry.name.startswith("podman-") and entry.name not in known:
                    meta = _read_json(entry / "meta.json") or {}
                    if not owner_alive(meta.get("owner")) or meta.get("status") in ("terminating", "terminated"):
                        doomed.append({"sandbox_id": entry.name, "container_id": None, "run_id": meta.get("run_id"),
                                       "reason": "a work folder without a container"})
        if not dry_run:
            for row in doomed:
                self.remove_sync(row["sandbox_id"])
        return doomed

    @classmethod
    def remove_leftover(cls, sandbox_id: str) -> None:
        """`podman rm` a container a dead hub's record names (no service, no project config needed)."""
        run_podman(["rm", "--force", "--time", "1", sandbox_id], timeout=60)

    # -- the machine-level operations of the provider interface (`agentenv sandbox setup`, `agentenv image`) --
    def setup(self, on_line: Callable[[str], None] | None = None) -> dict[str, Any]:
        """Build the base image (once) and probe this machine's fixes into containers.conf."""
        say = on_line or (lambda _line: None)
        base = images.ensure_base_image(self.config, on_line=say)
        result = configure(base, self.config, log=say)
        mark_set_up(self.config)
        return {"base_image": base, **result}

    def build_image(self, name: str, version: str, context: Path, *, containerfile: Path | None = None,
                    build_args: dict[str, str] | None = None,
                    on_line: Callable[[str], None] | None = None) -> dict[str, Any]:
        """Build as localhost/agentenv/NAME:VERSION; the build argument BASE defaults to the base image."""
        args = dict(build_args or {})
        args.setdefault("BASE", images.ensure_base_image(self.config, on_line=on_line))
        return images.build(name, version, context, containerfile=containerfile, build_args=args, config=self.config,
                            on_line=on_line)

    def import_image(self, name: str, version: str, tarball: Path) -> dict[str, Any]:
        return images.import_rootfs(name, version, tarball, config=self.config)

    def list_images(self) -> builtins.list[dict[str, Any]]:
        return images.list_images(self.config)

    def runtime_image(self, on_line: Callable[[str], None] | None = None) -> str:
        from .runtime_image import ensure_runtime_image

        return ensure_runtime_image(self.config, on_line=on_line)

    def mark_image_used(self, ref: str) -> None:
        images.mark_used(ref)

    def prune_older_images(self, keep: str) -> builtins.list[str]:
        from .runtime_image import prune_older

        repo, _, version = keep.rpartition(":")
        if not repo.startswith(images.REPO + "/") or not version:
            raise AgentenvError(f"not an agentenv image ref: {keep!r}", hint=f"a ref like {images.REPO}/NAME:VERSION")
        return prune_older(repo.removeprefix(images.REPO + "/"), keep, self.config)

    # -- closing ------------------------------------------------------------------------------
    async def aclose(self) -> None:
        """With the hub: empty the warm pool, close channels. The Podman service is left running for the
        next command (it exits by itself after `service_idle_s` unused), as are background removals."""
        await self.pool.aclose()
        for sandbox_id in list(self._channels):
            await self.forget_channel(sandbox_id)
        self.service.release()


def _start_failure_hint(message: str) -> str:
    """Limits or a runtime this machine refuses are what `agentenv sandbox setup` probes and fixes."""
    lowered = message.lower()
    if "rlimit" in lowered or "cgroup" in lowered:
        return (f"this machine's Podman needs fixes its configuration lacks: {SETUP_HINT} "
                "(see docs/sandboxes.md, Troubleshooting)")
    return "see `podman info`; for a bad image, `podman run --rm -it IMAGE`"


def _api_message(exc: Exception) -> str:
    text = getattr(exc, "explanation", None) or str(exc)
    return str(text).strip()
