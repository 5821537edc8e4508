"""The sandbox provider interface (providers live in the `sandboxes` package and register under
`agentenv_local.sandbox_providers`).

A provider creates sandboxes from a SandboxSpec, finds one again by id from a fresh process,
lists its sandboxes and terminates them (idempotently). A Sandbox runs commands and moves files.
Paths inside a sandbox are POSIX; `/app` is the working root (relative paths resolve under it).

Beyond that, a provider may offer machine-level operations the core reaches only through this
interface (the core never imports `sandboxes` itself): `setup`, an image store (`build_image`,
`import_image`, `list_images`, `runtime_image`), `logs`, `prune` and `remove_leftover`. A provider
that cannot do one raises `ProviderCannot` (an AgentenvError saying so, with a hint).
"""

from __future__ import annotations

import abc
import builtins
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentenv_local.errors import AgentenvError

# Paths of a sandbox that are its own: /app (its work folder), its control channel and the kernel's. A read-only
# mount may not be one of these nor lie inside one; inside the temporary folders it may (a checkout under /tmp
# has its coding CLIs there, and OpenHands' venv must keep its absolute path), but not on one.
RESERVED_PATHS = ("/app", "/.agentenv", "/proc", "/sys", "/dev")
TEMPORARY_PATHS = ("/tmp", "/var/tmp", "/run")


class NetworkPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: Literal["none", "allow_all", "allowlist"] = "none"
    allow_hosts: list[str] = Field(default_factory=list)
    allow_cidrs: list[str] = Field(default_factory=list)


class SandboxSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    mode: Literal["vm", "container"] = "vm"
    image: str | None = None
    cpu: float = 1.0
    memory_mb: int = 8192
    pids: int | None = None
    ttl_seconds: int = Field(default=7200, ge=60, le=1_209_600)
    exposed_ports: list[int] = Field(default_factory=list)
    env_vars: dict[str, str] = Field(default_factory=dict)
    network_policy: NetworkPolicy | None = None
    run_id: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    # A container-mode sandbox's command (None: the image's own).
    command: list[str] | None = None
    # The sandbox must reach services on this machine's loopback (an agent talking to the hub's gateways
    # and model proxies); the provider says at which address in `Sandbox.host_address`.
    host_access: bool = False
    # Folders (or files) of this machine the sandbox sees read-only: container path -> host path. What the core
    # mounts is its own (a coding CLI's install from the setup cache, hosting/agents/cli_image.py), never a path a
    # task names. A provider that cannot mount refuses a spec that has any.
    read_only_mounts: dict[str, str] = Field(default_factory=dict)

    @field_validator("read_only_mounts")
    @classmethod
    def _mounts_are_absolute_and_clear_of_app(cls, mounts: dict[str, str]) -> dict[str, str]:
        for inside, host in mounts.items():
            for path in (inside, host):
                if not path.startswith("/") or ".." in path.split("/") or "\0" in path:
                    raise ValueError(f"read_only_mounts: {path!r} is not an absolute path without '..'")
            inside_path = inside.rstrip("/")
            if inside_path in ("", *RESERVED_PATHS, *TEMPORARY_PATHS) \
                    or inside_path.startswith(tuple(f"{p}/" for p in RESERVED_PATHS)):
                raise ValueError(f"read_only_mounts: {inside!r} is (or is inside) a folder the sandbox itself "
                                 f"uses (/, {', '.join((*RESERVED_PATHS, *TEMPORARY_PATHS))})")
        return mounts


@dataclass
class ExecResult:
    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False
    duration_s: float = 0.0
    killed_reason: str | None = None  # e.g. the sandbox's memory limit killed the command

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def to_dict(self) -> dict:
        return {"exit_code": self.exit_code, "stdout": self.stdout, "stderr": self.stderr,
                "timed_out": self.timed_out, "duration_s": round(self.duration_s, 4),
                **({"killed_reason": self.killed_reason} if self.killed_reason else {})}


APP = "/app"


def app_relative(path: str) -> str | None:
    """`/app/x` or a relative `x` as `x` (`""` for /app itself); None for any other absolute path."""
    from agentenv_local.errors import StepError

    if not isinstance(path, str) or not path or "\0" in path:
        raise StepError(f"bad sandbox path {path!r}")
    if path == APP or path.startswith(APP + "/"):
        return path[len(APP):].lstrip("/")
    return None if path.startswith("/") else path


def contained_path(root: Path, rel: str, sandbox_id: str) -> Path:
    """`rel` under the host folder `root`, refusing a `..` or a symlink that leads out of it. Only for
    what the sandbox's own commands use (a working directory); the host reads and writes files with
    the helpers below, which never follow a link."""
    import os

    from agentenv_local.errors import StepError

    real_root = os.path.realpath(root)
    target = os.path.realpath(os.path.join(real_root, rel))
    if target != real_root and not target.startswith(real_root + os.sep):
        raise StepError(f"path {rel!r} leads out of sandbox {sandbox_id}'s /app folder",
                        hint="remove the '..' (or the symlink) that points outside /app")
    return Path(target)


# Host-side file access into a sandbox's folder (the process sandbox's, podman's /app bind mount): the
# sandbox controls that folder and may swap a directory for a link at any moment, so every component is
# opened no-follow relative to its parent (see agentenv_local.nofollow).
def _on_host(doing: str, path: str, sandbox_id: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Call a nofollow helper; an OSError (the sandbox changed the folder meanwhile) becomes our error."""
    from agentenv_local.errors import NotFoundError, StepError

    try:
        return fn(*args, where=f"sandbox {sandbox_id}", path=path, **kwargs)
    except FileNotFoundError:
        raise NotFoundError(f"no {path!r} in sandbox {sandbox_id} (it went away meanwhile)") from None
    except OSError as exc:
        raise StepError(f"cannot {doing} {path!r} in sandbox {sandbox_id}: {exc.strerror or exc}") from None


async def write_host_file(root: Path, rel: str, data: bytes, path: str, sandbox_id: str,
                          owner: tuple[int, int] | None = None) -> None:
    """Write a sandbox file that lives in a host folder; `owner` (uid, gid) for what is created."""
    import asyncio

    from agentenv_local import nofollow

    await asyncio.to_thread(_on_host, "write", path, sandbox_id, nofollow.write_file, root, rel, bytes(data),
                            owner=owner)


async def read_host_file(root: Path, rel: str, path: str, sandbox_id: str) -> bytes:
    import asyncio

    from agentenv_local import nofollow

    return await asyncio.to_thread(_on_host, "read", path, sandbox_id, nofollow.read_file, root, rel)


def host_kind(root: Path, rel: str, path: str, sandbox_id: str) -> str | None:
    """"dir", "file" (not a folder) or None, without following links."""
    from agentenv_local import nofollow

    return _on_host("look at", path, sandbox_id, nofollow.kind, root, rel)


async def list_host_files(root: Path, rel: str, path: str, sandbox_id: str,
                          skip_top: frozenset[str] = frozenset()) -> list[str]:
    import asyncio

    from agentenv_local import nofollow

    return await asyncio.to_thread(_on_host, "list", path, sandbox_id, nofollow.list_files, root, rel,
                                   skip_top=skip_top)


class Sandbox(abc.ABC):
    type: ClassVar[str] = ""

    def __init__(self, sandbox_id: str, spec: SandboxSpec):
        self.sandbox_id = sandbox_id
        self.spec = spec

    @abc.abstractmethod
    async def exec(self, command: str | list[str], *, timeout: float | None = 120.0,
                   env: dict[str, str] | None = None, cwd: str = "/app") -> ExecResult:
        """Run a command (a list is argv; a string runs under `bash -c`)."""

    @abc.abstractmethod
    async def write_file(self, path: str, data: bytes) -> None: ...

    @abc.abstractmethod
    async def read_file(self, path: str) -> bytes: ...

    @abc.abstractmethod
    async def exists(self, path: str, kind: Literal["any", "file", "dir"] = "any") -> bool: ...

    @abc.abstractmethod
    async def list_files(self, path: str) -> list[str]:
        """Every file under `path`, as paths relative to it."""

    @abc.abstractmethod
    async def terminate(self) -> None:
        """Stop everything the sandbox runs and free it. Calling it twice is fine."""

    @property
    def tunnel_urls(self) -> dict[str, str]:
        """Where a process on the host reaches the sandbox's exposed ports: port (as a string) -> base URL, e.g.
        {"8000": "http://127.0.0.1:41234"}. Empty when the sandbox publishes no ports (the default here)."""
        return {}

    def to_record(self) -> dict[str, Any]:
        return {"sandbox_id": self.sandbox_id, "sandbox_type": self.type, "sandbox_name": self.spec.name,
                "sandbox_mode": self.spec.mode, "run_id": self.spec.run_id}


class ProviderCannot(AgentenvError):
    """The provider does not offer this operation (e.g. an image store on plain processes)."""


class SandboxProvider(abc.ABC):
    name: ClassVar[str] = ""
    # What the provider isolates; "none" means commands run on the host as you.
    isolation: ClassVar[str] = "none"
    supported_modes: ClassVar[tuple[str, ...]] = ("vm",)

    def __init__(self, state_dir: Path, config: dict[str, Any] | None = None):
        self.state_dir = Path(state_dir)
        self.config = dict(config or {})

    @abc.abstractmethod
    async def create(self, spec: SandboxSpec) -> Sandbox: ...

    @abc.abstractmethod
    async def get(self, sandbox_id: str) -> Sandbox:
        """Find a sandbox by id (works from a fresh process); NotFoundError when it is gone."""

    @abc.abstractmethod
    async def list(self) -> list[dict[str, Any]]: ...

    async def terminate(self, sandbox_id: str) -> bool:
        """Terminate by id; False when there was nothing to terminate."""
        from agentenv_local.errors import NotFoundError

        try:
            sandbox = await self.get(sandbox_id)
        except NotFoundError:
            return False
        await sandbox.terminate()
        return True

    # -- optional machine-level operations (the core reaches Podman's only through these) -----------
    def _cannot(self, what: str, hint: str | None = None) -> ProviderCannot:
        return ProviderCannot(f"the {self.name} sandbox provider cannot {what}",
                              hint=hint or "use a provider that can, e.g. `podman` (agentenv sandbox setup)")

    def setup(self, on_line: Callable[[str], None] | None = None) -> dict[str, Any]:
        """Make the provider ready on this machine (build what it needs once, probe fixes); safe to repeat.
        Returns what it did, for `agentenv sandbox setup`."""
        raise self._cannot("be set up")

    def build_image(self, name: str, version: str, context: Path, *, containerfile: Path | None = None,
                    build_args: dict[str, str] | None = None,
                    on_line: Callable[[str], None] | None = None) -> dict[str, Any]:
        """Build `context` into the provider's local image store (`agentenv image build`)."""
        raise self._cannot("build images")

    def import_image(self, name: str, version: str, tarball: Path) -> dict[str, Any]:
        """Import a rootfs tarball into the provider's local image store (`agentenv image import`)."""
        raise self._cannot("import images")

    def list_images(self) -> builtins.list[dict[str, Any]]:
        """The images agentenv built or imported in the provider's store (`agentenv image list`)."""
        raise self._cannot("list images")

    def runtime_image(self, on_line: Callable[[str], None] | None = None) -> str:
        """The image that runs agentenv itself (container agents and envs), built first when needed."""
        raise self._cannot("provide the agentenv runtime image")

    def prune_older_images(self, keep: str) -> builtins.list[str]:
        """Untag the other automatic (digest-tagged) versions of `keep`'s image, best effort: one a container
        uses stays; one another image is built FROM loses its name, its layers staying for that image. Answers
        the refs that went."""
        raise self._cannot("prune images")

    def mark_image_used(self, ref: str) -> None:
        """Say that `ref` is about to be used (built FROM, run): prune_older_images, of any process, leaves it a
        while. Nothing to do for a provider that never prunes."""

    def logs(self, sandbox_id: str, tail: int = 200) -> str:
        """What a sandbox's main process printed."""
        raise ProviderCannot(f"{self.name} sandboxes keep no logs", hint="exec into it instead")

    async def prune(self, run_is_dead: Callable[[str], bool], *,
                    dry_run: bool = False) -> builtins.list[dict[str, Any]]:
        """Remove the sandboxes dead runs left behind, and only those; returns them, each with a `reason`.

        The default terminates every listed sandbox whose run `run_is_dead(run_id)`."""
        rows = [r for r in await self.list() if r.get("run_id") and run_is_dead(r["run_id"])]
        for r in rows:
            r["reason"] = f"its run {r['run_id']} is dead"
            if not dry_run:
                await self.terminate(r["sandbox_id"])
        return rows

    @classmethod
    def remove_leftover(cls, sandbox_id: str) -> None:
        """Remove a sandbox by id without a provider instance (what a dead hub's record names)."""
        raise ProviderCannot(f"the {cls.name} sandbox provider cannot remove leftovers by id")


def plugin_problem(name: str, obj: Any) -> str | None:
    """Why `obj` cannot be the sandbox provider `name` (an `agentenv_local.sandbox_providers` entry), or None."""
    if not (isinstance(obj, type) and issubclass(obj, SandboxProvider)):
        return "a sandbox provider must subclass agentenv_local.sandbox_api.SandboxProvider"
    if obj.name != name:
        return f"the provider's name is {obj.name!r} but it is registered as {name!r}"
    return None
