"""The `bwrap` sandbox provider: each sandbox is a folder on this machine, each command a bubblewrap jail over it.

Layout under the provider's state dir (`<project>/.agentenv/sandboxes/bwrap/`, or the config key `root`):
`<id>/sandbox.json` (spec, status, host uid: how `get(id)` works from a fresh process) and `<id>/app/`, the only
writable folder a command sees (as `/app`). See command.py for what a command's jail holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import re
import secrets
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, ClassVar, Literal

from agentenv_local.errors import NotFoundError, StepError
from agentenv_local.procs import TAG_VAR, kill_tagged, run_process
from agentenv_local.sandbox_api import (
    ExecResult,
    Sandbox,
    SandboxProvider,
    SandboxSpec,
    app_relative,
    host_kind,
    list_host_files,
    read_host_file,
    write_host_file,
)

from .command import Limits, bwrap_argv

META_FILE = "sandbox.json"
SANDBOX_ID_RE = re.compile(r"^bwrap-[0-9a-f]{12}$")
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
UID_BASE = 1_100_000_000  # root only: sandbox n runs as host uid UID_BASE + (n's id mod 65536)


@functools.lru_cache(maxsize=4)
def probe(bwrap: str) -> str | None:
    """Why bwrap cannot run a sandbox here (missing, or user namespaces off), or None."""
    if shutil.which(bwrap) is None:
        return f"{bwrap} is not installed (Debian: apt-get install bubblewrap; scripts/setup-bwrap.sh)"
    try:
        proc = subprocess.run([bwrap, "--unshare-all", "--unshare-user", "--ro-bind", "/", "/", "true"],
                              capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as e:
        return f"{bwrap} does not run: {e}"
    if proc.returncode != 0:
        return (f"{bwrap} cannot make a sandbox here (user namespaces off?): {proc.stderr.strip()[:300]} "
                "(sysctl kernel.unprivileged_userns_clone=1 / user.max_user_namespaces)")
    return None


def _write_meta(folder: Path, meta: dict[str, Any]) -> None:
    tmp = folder / f".{META_FILE}.{secrets.token_hex(4)}"
    tmp.write_text(json.dumps(meta, indent=2, sort_keys=True))
    os.replace(tmp, folder / META_FILE)


def _read_meta(folder: Path) -> dict[str, Any] | None:
    try:
        meta = json.loads((folder / META_FILE).read_text())
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


class BwrapSandbox(Sandbox):
    type: ClassVar[str] = "bwrap"
    python_executable: ClassVar[str] = "python3"

    def __init__(self, sandbox_id: str, spec: SandboxSpec, folder: Path, meta: dict[str, Any],
                 provider: BwrapSandboxProvider):
        super().__init__(sandbox_id, spec)
        self.folder = folder
        self.app = folder / "app"
        self.meta = meta
        self.provider = provider

    @property
    def share_net(self) -> bool:
        return bool(self.meta.get("network"))

    @property
    def tunnel_urls(self) -> dict[str, str]:
        return {str(p): f"http://127.0.0.1:{p}" for p in self.spec.exposed_ports} if self.share_net else {}

    def _rel(self, path: str) -> str:
        rel = app_relative(path)
        if rel is None:
            raise StepError(f"path {path!r} is outside sandbox {self.sandbox_id}'s /app (its only folder that "
                            "outlives a command; the rest of its root is read-only, /tmp is per command)",
                            hint="use a path under /app, or a relative one")
        return rel

    def _require_alive(self) -> None:
        if not self.app.is_dir():
            raise NotFoundError(f"sandbox {self.sandbox_id} is gone (its folder {self.folder} no longer exists)")

    def _owner(self) -> tuple[int, int] | None:
        uid = self.meta.get("host_uid")
        return (uid, uid) if isinstance(uid, int) else None

    async def exec(self, command: str | list[str], *, timeout: float | None = 120.0,
                   env: dict[str, str] | None = None, cwd: str = "/app") -> ExecResult:
        self._require_alive()
        if isinstance(command, str):
            inner = ["bash", "-c", command]
        else:
            if not command:
                raise StepError(f"sandbox {self.sandbox_id}: empty command")
            # through sh's exec: a missing program exits 127 as in a shell (bwrap's own execvp failure exits 1)
            inner = ["/bin/sh", "-c", 'exec "$@"', "sh", *(str(a) for a in command)]
        rel = self._rel(cwd or "/app")
        if await asyncio.to_thread(host_kind, self.app, rel, cwd, self.sandbox_id) != "dir":
            raise NotFoundError(f"working directory {cwd!r} does not exist in sandbox {self.sandbox_id}")
        cfg = self.provider.config
        limits = Limits(nofile=int(cfg.get("nofile", 1024)), nproc=int(self.spec.pids or cfg.get("nproc", 256)),
                        address_space_mb=int(self.spec.memory_mb))
        launch = bwrap_argv(str(self.app), inner, workdir="/app/" + rel if rel else "/app", share_net=self.share_net,
                            limits=limits, host_uid=self.meta.get("host_uid"),
                            extra_ro=tuple(cfg.get("ro_binds", ())), bwrap=self.provider.bwrap)
        # Passed through the environment (never argv: other users can read a command line); bwrap keeps it.
        full_env = {"PATH": PATH, "HOME": "/tmp", "LANG": "C.UTF-8", **self.spec.env_vars, **(env or {}),
                    TAG_VAR: self.sandbox_id}
        return await run_process(launch.argv, cwd=launch.cwd, env=full_env, timeout=timeout)

    async def write_file(self, path: str, data: bytes) -> None:
        self._require_alive()
        await write_host_file(self.app, self._rel(path), data, path, self.sandbox_id, owner=self._owner())

    async def read_file(self, path: str) -> bytes:
        self._require_alive()
        return await read_host_file(self.app, self._rel(path), path, self.sandbox_id)

    async def exists(self, path: str, kind: Literal["any", "file", "dir"] = "any") -> bool:
        self._require_alive()
        found = await asyncio.to_thread(host_kind, self.app, self._rel(path), path, self.sandbox_id)
        return found is not None if kind == "any" else found == kind

    async def list_files(self, path: str) -> list[str]:
        self._require_alive()
        return await list_host_files(self.app, self._rel(path), path, self.sandbox_id)

    async def terminate(self) -> None:
        if self.folder.is_dir():
            meta = _read_meta(self.folder) or dict(self.meta)
            meta.update(status="terminated", terminated_at=time.time())
            with contextlib.suppress(OSError):
                _write_meta(self.folder, meta)
        await asyncio.to_thread(kill_tagged, self.sandbox_id)
        await asyncio.to_thread(shutil.rmtree, self.folder, True)

    def to_record(self) -> dict[str, Any]:
        return {**super().to_record(), "status": self.meta.get("status", "running"), "root": str(self.app),
                "created_at": self.meta.get("created_at"), "expires_at": self.meta.get("expires_at"),
                "isolation": "bwrap", "network": self.share_net, "host_uid": self.meta.get("host_uid")}


class BwrapSandboxProvider(SandboxProvider):
    """Sandboxes isolated by bubblewrap (see the package README for what is and is not enforced).

    Config (`[sandbox.providers.bwrap]`): `root` (the folder of the sandbox folders), `network` (true: share the
    host's network), `nproc` (256, when the step sets no `pids`), `nofile` (1024), `ro_binds` (more host folders
    to show read-only), `uid_base` (root only), `bwrap` (the binary)."""

    name: ClassVar[str] = "bwrap"
    isolation: ClassVar[str] = "bwrap"
    supported_modes: ClassVar[tuple[str, ...]] = ("vm",)

    @property
    def root(self) -> Path:
        return Path(self.config.get("root") or (self.state_dir / "sandboxes" / "bwrap")).expanduser()

    @property
    def bwrap(self) -> str:
        return str(self.config.get("bwrap", "bwrap"))

    def unusable_reason(self) -> str | None:
        return probe(self.bwrap)

    async def create(self, spec: SandboxSpec) -> BwrapSandbox:
        if spec.mode not in self.supported_modes:
            raise StepError(f"the bwrap sandbox provider cannot create a {spec.mode!r} sandbox (it supports: vm)",
                            hint="use sandbox_mode \"vm\", or sandbox_type \"podman\" for containers")
        reason = self.unusable_reason()
        if reason:
            raise StepError(f"the bwrap sandbox provider cannot run here: {reason}",
                            hint="install bubblewrap, or use another sandbox provider (--sandbox process)")
        policy = spec.network_policy
        if policy is not None and policy.mode == "allowlist":
            raise StepError("the bwrap sandbox provider cannot enforce a network allowlist (bwrap shares the "
                            "host's network or none)", hint="use network_policy mode none or allow_all")
        if spec.read_only_mounts:
            raise StepError("the bwrap sandbox provider does not mount other folders into a sandbox "
                            "(read_only_mounts)", hint="use sandbox_type \"podman\"")
        network = bool(self.config.get("network", False)) or (policy is not None and policy.mode == "allow_all")
        if (spec.exposed_ports or spec.host_access) and not network:
            raise StepError("a bwrap sandbox without network cannot expose ports or reach the host",
                            hint="set network_policy = {mode = \"allow_all\"} (or network = true in "
                                 "[sandbox.providers.bwrap]): it then shares this machine's network")
        self.root.mkdir(parents=True, exist_ok=True)
        while True:
            sandbox_id = f"bwrap-{secrets.token_hex(6)}"
            folder = self.root / sandbox_id
            try:
                folder.mkdir(mode=0o700)
                break
            except FileExistsError:  # pragma: no cover - 48 random bits
                continue
        folder = Path(os.path.realpath(folder))
        (folder / "app").mkdir(mode=0o700)
        host_uid = None
        if os.geteuid() == 0:  # never run a sandbox as host root: a uid of its own
            host_uid = int(self.config.get("uid_base", UID_BASE)) + int(sandbox_id[-4:], 16)
            os.chown(folder / "app", host_uid, host_uid)
        now = time.time()
        meta = {"sandbox_id": sandbox_id, "sandbox_type": self.name, "status": "running", "created_at": now,
                "expires_at": now + spec.ttl_seconds, "host_uid": host_uid, "network": network,
                "spec": spec.model_dump(mode="json")}
        _write_meta(folder, meta)
        return BwrapSandbox(sandbox_id, spec, folder, meta, self)

    def _load(self, sandbox_id: str) -> BwrapSandbox | None:
        if not isinstance(sandbox_id, str) or not SANDBOX_ID_RE.match(sandbox_id):
            return None
        folder = self.root / sandbox_id
        meta = _read_meta(folder)
        if meta is None or meta.get("status") != "running":
            return None
        try:
            spec = SandboxSpec.model_validate(meta.get("spec") or {})
        except ValueError:
            return None
        return BwrapSandbox(sandbox_id, spec, Path(os.path.realpath(folder)), meta, self)

    async def get(self, sandbox_id: str) -> BwrapSandbox:
        sandbox = self._load(sandbox_id)
        if sandbox is None:
            raise NotFoundError(f"bwrap sandbox {sandbox_id!r} not found (terminated, or never created under "
                                f"{self.root})", hint="list the live ones with `agentenv sandbox list`")
        return sandbox

    async def terminate(self, sandbox_id: str) -> bool:
        sandbox = self._load(sandbox_id)
        if sandbox is not None:
            await sandbox.terminate()
            return True
        if isinstance(sandbox_id, str) and SANDBOX_ID_RE.match(sandbox_id):  # finish a half-done teardown
            await asyncio.to_thread(kill_tagged, sandbox_id)
            await asyncio.to_thread(shutil.rmtree, self.root / sandbox_id, True)
        return False

    async def list(self) -> list[dict[str, Any]]:
        if not self.root.is_dir():
            return []
        rows = []
        for entry in sorted(self.root.iterdir()):
            sandbox = self._load(entry.name)
            if sandbox is not None:
                rows.append(sandbox.to_record())
        return rows
