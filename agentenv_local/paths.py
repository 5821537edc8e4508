"""Where a project's state lives: ./.agentenv/ found by walking up, or AGENTENV_HOME."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

STATE_DIR_NAME = ".agentenv"


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
        return self.state_dir / "hub.sock"

    @property
    def hub_info_file(self) -> Path:
        return self.state_dir / "hub.json"

    def ensure(self) -> "ProjectPaths":
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
