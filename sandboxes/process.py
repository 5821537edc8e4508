"""The `process` sandbox provider: a work folder on this machine and plain subprocesses.

A sandbox is the folder `<state_dir>/sandboxes/<sandbox_id>/` (the provider config key `root`
moves the parent folder). The folder *is* `/app`: paths given as `/app/x` or as a relative `x`
land in it, any other absolute path is refused, and `..` or a symlink can never lead out of it.
`.sandbox.json` in the folder holds the spec and the status, so `get(id)` works from a fresh
process.

Commands run as you, on the host, with the host's network: there is no isolation at all
(`isolation = "none"`). `/app` in argv, in `bash -c` scripts and in env values is rewritten to
the folder's path. A shell reads that text, so the path must be one plain word: when the real one
has a space, a quote, `$` or the like (a project folder named so), commands see it through a link
with a plain name, `$TMPDIR/agentenv-<uid>/<hash>/<id>` (one link per sandboxes folder, in a private
folder of yours). The host itself reads and writes the folder's files without following any link
in it. Every command starts in its own process group and carries
`AGENTENV_SANDBOX=<id>` in its environment, which is how `terminate()` finds what the sandbox
left running, even from another process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
import shutil
import sys
import time
from pathlib import Path
from typing import Any, ClassVar, Literal

from agentenv_local import nofollow
from agentenv_local.errors import AgentenvError, NotFoundError, StepError
from agentenv_local.paths import private_dir
from agentenv_local.procs import TAG_VAR, host_env, kill_tagged, run_process, tagged_pids  # noqa: F401 (re-exported)
from agentenv_local.sandbox_api import (
    app_relative,
    contained_path,
    host_kind,
    list_host_files,
    read_host_file,
    write_host_file,
)

from .base import ExecResult, Sandbox, SandboxProvider, SandboxSpec

APP = "/app"
META_FILE = ".sandbox.json"
SANDBOX_ID_RE = re.compile(r"^process-[0-9a-f]{12}$")
# `/app` as the first component of an absolute path: not `/application`, `x/app` or `http://h/app`.
_APP_RE = re.compile(r"(?<![\w./~-])/app(?![\w.-])")


# What a shell reads as one plain word, with nothing to expand or split.
_PLAIN_RE = re.compile(r"^[A-Za-z0-9_./@%+=:,-]+$")


def rewrite_app_paths(text: str, root: str) -> str:
    """Replace every `/app` path prefix in `text` by the sandbox folder `root` (a plain word, see
    `plain_path`: the result is pasted into shell scripts)."""
    if not _PLAIN_RE.match(root):
        raise StepError(f"sandbox folder {root!r} is not a plain path; refusing to paste it into a command")
    return _APP_RE.sub(lambda _m: root, text)


def plain_path(folder: Path) -> Path:
    """`folder` itself when a shell reads its path as one plain word; else a link to it with a plain
    name, in a private folder of ours under $TMPDIR (or /tmp)."""
    if _PLAIN_RE.match(str(folder)):
        return folder
    import hashlib

    try:
        links = private_dir()
    except AgentenvError as e:
        raise StepError(f"cannot make a plain-named link to the sandbox folder {folder}: {e.message}",
                        hint=f"{e.hint}; or set [sandbox.providers.process] root to a folder whose path has no "
                             "spaces, quotes or shell characters") from None
    link = links / hashlib.sha256(os.fsencode(folder)).hexdigest()[:16]
    if not (link.is_symlink() and os.readlink(link) == str(folder)):
        tmp = links / f".{link.name}.{secrets.token_hex(4)}"
        os.symlink(folder, tmp)
        os.replace(tmp, link)
    return link


# -- metadata -------------------------------------------------------------------------------
def _read_meta(folder: Path) -> dict | None:
    try:
        meta = json.loads((folder / META_FILE).read_text())
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def _write_meta(folder: Path, meta: dict) -> None:
    tmp = folder / f"{META_FILE}.{secrets.token_hex(4)}.tmp"
    tmp.write_text(json.dumps(meta, indent=2, sort_keys=True))
    os.replace(tmp, folder / META_FILE)


class ProcessSandbox(Sandbox):
    """One work folder; commands are host subprocesses in it. See the module docstring."""

    type: ClassVar[str] = "process"
    # What runs Python in this sandbox (run_code uses it): the host interpreter.
    python_executable: ClassVar[str] = sys.executable

    def __init__(self, sandbox_id: str, spec: SandboxSpec, root: Path, meta: dict):
        super().__init__(sandbox_id, spec)
        self.root = Path(root)
        self.meta = meta

    @property
    def tunnel_urls(self) -> dict[str, str]:
        # Host network: an exposed port is simply that port on this machine.
        return {str(p): f"http://127.0.0.1:{p}" for p in self.spec.exposed_ports}

    # -- paths ------------------------------------------------------------------------------
    def relative(self, path: str) -> str:
        """A sandbox path (`/app/x` or relative `x`) relative to the folder; refuses anything outside."""
        rel = app_relative(path)
        if rel is None:
            raise StepError(
                f"path {path!r} is outside sandbox {self.sandbox_id}: the process sandbox only has /app "
                f"(its work folder {self.root})",
                hint="use a path under /app, or a relative one",
            )
        return rel

    def host_path(self, path: str) -> Path:
        """The host path for a sandbox path, links resolved (only for a command's working directory)."""
        return contained_path(self.root, self.relative(path), self.sandbox_id)

    def _is_meta(self, path: str, rel: str) -> bool:
        return nofollow.parts_of(rel, path, f"sandbox {self.sandbox_id}") == [META_FILE]

    def _require_alive(self) -> None:
        if not self.root.is_dir():
            raise NotFoundError(f"sandbox {self.sandbox_id} is gone (its folder {self.root} no longer exists)")

    # -- commands ---------------------------------------------------------------------------
    async def exec(self, command: str | list[str], *, timeout: float | None = 120.0,
                   env: dict[str, str] | None = None, cwd: str = APP) -> ExecResult:
        self._require_alive()
        # through a plain-named link to the sandboxes folder when its real path is not one plain word
        root = str(await asyncio.to_thread(plain_path, self.root.parent) / self.root.name)
        if isinstance(command, str):
            argv = ["bash", "-c", rewrite_app_paths(command, root)]
        else:
            argv = [rewrite_app_paths(str(a), root) for a in command]
            if not argv:
                raise StepError(f"sandbox {self.sandbox_id}: empty command")
        workdir = self.host_path(cwd or APP)
        if not workdir.is_dir():
            raise NotFoundError(f"working directory {cwd!r} does not exist in sandbox {self.sandbox_id}")
        full_env = host_env()
        for key, value in {**self.spec.env_vars, **(env or {})}.items():
            full_env[key] = rewrite_app_paths(str(value), root)
        full_env[TAG_VAR] = self.sandbox_id
        return await run_process(argv, cwd=workdir, env=full_env, timeout=timeout)

    # -- files ------------------------------------------------------------------------------
    async def write_file(self, path: str, data: bytes) -> None:
        self._require_alive()
        rel = self.relative(path)
        if self._is_meta(path, rel):
            raise StepError(f"{path!r} is reserved for the sandbox's own metadata")
        await write_host_file(self.root, rel, data, path, self.sandbox_id)

    async def read_file(self, path: str) -> bytes:
        self._require_alive()
        return await read_host_file(self.root, self.relative(path), path, self.sandbox_id)

    async def exists(self, path: str, kind: Literal["any", "file", "dir"] = "any") -> bool:
        self._require_alive()
        rel = self.relative(path)
        found = await asyncio.to_thread(host_kind, self.root, rel, path, self.sandbox_id)
        if found == "file" and self._is_meta(path, rel):
            return False
        return found is not None if kind == "any" else found == kind

    async def list_files(self, path: str) -> list[str]:
        self._require_alive()
        rel = self.relative(path)
        at_root = not nofollow.parts_of(rel, path, f"sandbox {self.sandbox_id}")
        return await list_host_files(self.root, rel, path, self.sandbox_id,
                                     skip_top=frozenset({META_FILE}) if at_root else frozenset())

    # -- lifecycle --------------------------------------------------------------------------
    async def terminate(self) -> None:
        if self.root.is_dir():
            meta = _read_meta(self.root) or dict(self.meta)
            meta.update(status="terminated", terminated_at=time.time())
            with contextlib.suppress(OSError):
                _write_meta(self.root, meta)
        await asyncio.to_thread(kill_tagged, self.sandbox_id)
        await asyncio.to_thread(shutil.rmtree, self.root, True)

    def to_record(self) -> dict[str, Any]:
        return {**super().to_record(), "status": self.meta.get("status", "running"), "root": str(self.root),
                "created_at": self.meta.get("created_at"), "expires_at": self.meta.get("expires_at"),
                "isolation": "none"}


class ProcessSandboxProvider(SandboxProvider):
    """Sandboxes that are work folders on this machine; commands are plain subprocesses.

    No isolation: commands run as you, see your files and your network. Therefore:
    - a `network_policy` other than allow_all is refused (nothing could enforce it);
    - `cpu`, `memory_mb`, `pids` and `disk_size_gb` are recorded but NOT enforced;
    - `image` is ignored (the host is the image), and only the `vm` mode exists;
    - `ttl_seconds` is recorded as `expires_at`; nothing reaps an expired sandbox by itself.
    Config: `root` (optional) = the folder that holds the sandbox folders.
    """

    name: ClassVar[str] = "process"
    isolation: ClassVar[str] = "none"
    supported_modes: ClassVar[tuple[str, ...]] = ("vm",)
    supports_network_policy: ClassVar[bool] = False

    @property
    def root(self) -> Path:
        return Path(self.config.get("root") or (self.state_dir / "sandboxes")).expanduser()

    async def create(self, spec: SandboxSpec) -> ProcessSandbox:
        if spec.mode not in self.supported_modes:
            raise StepError(
                f"the process sandbox provider cannot create a {spec.mode!r} sandbox (it supports: "
                f"{', '.join(self.supported_modes)})",
                hint="use sandbox_mode \"vm\", or a provider that runs containers (sandbox_type \"podman\")",
            )
        policy = spec.network_policy
        if policy is not None and policy.mode != "allow_all":
            raise StepError(
                f"the process sandbox provider cannot enforce network isolation (network_policy mode "
                f"{policy.mode!r}): its commands use this machine's network",
                hint="drop network_policy (or set mode allow_all), or use sandbox_type \"podman\"",
            )
        if spec.read_only_mounts:
            raise StepError(
                f"the process sandbox provider cannot mount folders at other paths (read_only_mounts: "
                f"{', '.join(sorted(spec.read_only_mounts))}): its commands see this machine's own files",
                hint="use sandbox_type \"podman\"")
        self.root.mkdir(parents=True, exist_ok=True)
        while True:
            sandbox_id = f"process-{secrets.token_hex(6)}"
            folder = self.root / sandbox_id
            try:
                folder.mkdir()
                break
            except FileExistsError:  # pragma: no cover - 48 random bits
                continue
        folder = Path(os.path.realpath(folder))
        now = time.time()
        meta = {"sandbox_id": sandbox_id, "sandbox_type": self.name, "status": "running", "root": str(folder),
                "created_at": now, "expires_at": now + spec.ttl_seconds, "creator_pid": os.getpid(),
                "spec": spec.model_dump(mode="json")}
        _write_meta(folder, meta)
        return ProcessSandbox(sandbox_id, spec, folder, meta)

    def _load(self, sandbox_id: str) -> ProcessSandbox | None:
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
        return ProcessSandbox(sandbox_id, spec, Path(os.path.realpath(folder)), meta)

    async def get(self, sandbox_id: str) -> ProcessSandbox:
        sandbox = self._load(sandbox_id)
        if sandbox is None:
            raise NotFoundError(
                f"process sandbox {sandbox_id!r} not found (terminated, or never created under {self.root})",
                hint="list the live ones with `agentenv sandbox list`",
            )
        return sandbox

    async def terminate(self, sandbox_id: str) -> bool:
        """Terminate by id; also finishes a teardown an earlier crash left half done.

        True when a running sandbox was terminated, False when there was none (leftover
        processes or a leftover folder of a terminated one are still cleaned up).
        """
        sandbox = self._load(sandbox_id)
        if sandbox is not None:
            await sandbox.terminate()
            return True
        if isinstance(sandbox_id, str) and SANDBOX_ID_RE.match(sandbox_id):
            await asyncio.to_thread(kill_tagged, sandbox_id)
            await asyncio.to_thread(shutil.rmtree, self.root / sandbox_id, True)
        return False

    async def list(self) -> list[dict[str, Any]]:
        if not self.root.is_dir():
            return []
        records = []
        for entry in sorted(self.root.iterdir()):
            sandbox = self._load(entry.name) if entry.is_dir() else None
            if sandbox is not None:
                records.append(sandbox.to_record())
        return records
