"""Where a project's state lives: ./.agentenv/ found by walking up, or AGENTENV_HOME."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

STATE_DIR_NAME = ".agentenv"
# Unix socket paths are limited to about 108 bytes; a deeper project keeps its sockets in private_dir().
MAX_SOCKET_PATH = 100


def private_dir(base: Path | None = None) -> Path:
    """`$TMPDIR/agentenv-<uid>` (or under /tmp), made mode 0700 and checked to be ours: a short, private place
    for what a project folder cannot hold (sockets of deep projects, plain-named links to oddly named folders).
    Another user who made it first, or made it a link, gets a clear refusal instead of our sockets."""
    import tempfile

    from agentenv_local.errors import AgentenvError

    base = base or Path(tempfile.gettempdir())
    if not re.fullmatch(r"/[A-Za-z0-9_./-]*", str(base)):  # plain: its paths may be pasted into shell commands
        base = Path("/tmp")
    folder = base / f"agentenv-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    st = os.lstat(folder)
    if os.path.islink(folder) or not os.path.isdir(folder) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise AgentenvError(f"{folder} is not a private folder of yours (owner, mode or type is wrong)",
                            hint=f"remove {folder} (agentenv makes it again, mode 0700), or set TMPDIR elsewhere")
    return folder


def short_socket_path(preferred: Path, name: str) -> Path:
    """`preferred` when the OS can bind a socket there; else `name` plus a digest of `preferred` in private_dir()."""
    if len(os.fsencode(preferred)) <= MAX_SOCKET_PATH:  # bytes: a non-ASCII name counts more
        return preferred
    import hashlib

    digest = hashlib.sha256(os.fsencode(preferred)).hexdigest()[:16]
    socket = private_dir() / f"{name}-{digest}.sock"
    if len(os.fsencode(socket)) > MAX_SOCKET_PATH:  # a TMPDIR too deep itself (a test's temporary folder)
        socket = private_dir(Path("/tmp")) / socket.name
    return socket


@dataclass(frozen=True)
class ProjectPaths:
    state_dir: Path

    @property
    def config_file(self) -> Path:
        return self.state_dir / "config.toml"

    @property
    def store_file(self) -> Path:
        return self.state_dir / "store.duckdb"

    @property
    def objects_dir(self) -> Path:
        return self.state_dir / "objects"

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def sandboxes_dir(self) -> Path:
        return self.state_dir / "sandboxes"

    @property
    def lock_file(self) -> Path:
        return self.state_dir / "hub.lock"

    @property
    def socket_file(self) -> Path:
        return short_socket_path(self.state_dir.absolute() / "hub.sock", "hub")

    @property
    def hub_info_file(self) -> Path:
        return self.state_dir / "hub.json"

    def ensure(self) -> ProjectPaths:
        for d in (self.state_dir, self.objects_dir, self.logs_dir, self.sandboxes_dir):
            d.mkdir(parents=True, exist_ok=True)
        gi = self.state_dir / ".gitignore"
        if not gi.exists():
            gi.write_text("# agentenv-local state: keep config.toml, ignore the rest\n*\n!config.toml\n!.gitignore\n")
        return self


def find_state_dir(start: Path | None = None, environ: Mapping[str, str] | None = None) -> Path:
    """AGENTENV_HOME wins; else the nearest `.agentenv/` walking up; else `./.agentenv`."""
    home = (os.environ if environ is None else environ).get("AGENTENV_HOME")
    if home:
        return Path(home).expanduser().resolve()
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / STATE_DIR_NAME
        if candidate.is_dir():
            return candidate
    return here / STATE_DIR_NAME


def project_paths(start: Path | None = None) -> ProjectPaths:
    return ProjectPaths(find_state_dir(start))
