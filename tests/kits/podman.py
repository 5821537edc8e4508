"""Helpers shared by the Podman tests."""

from __future__ import annotations

import hashlib
import subprocess
import time
from pathlib import Path


def project_containers(project: str) -> list[str]:
    out = subprocess.run(["podman", "ps", "-a", "--filter", f"label=agentenv.project={project}", "--format",
                          "{{.Names}}"], capture_output=True, text=True, env=_podman_env()).stdout
    return sorted(out.split())


def containers_left(project: str, timeout: float = 60.0) -> list[str]:
    """The project's containers once its background removals had `timeout` seconds to finish (a terminated
    plain sandbox is removed by a detached process, after the command that ran it may have exited)."""
    deadline = time.monotonic() + timeout
    while (left := project_containers(project)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def _podman_state_dirs(folder: Path) -> list[Path]:
    """The project state folders under `folder` that ran a Podman service."""
    return [info.parent.parent for info in folder.rglob("service.json") if info.parent.name == "podman"]


def stop_podman_services_under(folder: Path) -> int:
    """Stop every project Podman service a test left under `folder` (one-shot commands leave theirs running
    for the next command, by design). How many were stopped."""
    from sandboxes.podman.service import stop_project_service

    return sum(stop_project_service(state_dir) for state_dir in _podman_state_dirs(folder))


def clean_up_podman_under(folder: Path) -> int:
    """Stop the Podman services tests left under `folder` and remove those projects' containers. How many
    services were stopped."""
    stopped = stop_podman_services_under(folder)
    for state_dir in _podman_state_dirs(folder):
        project = hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:12]
        names = project_containers(project)
        if names:
            subprocess.run(["podman", "rm", "--force", "--time", "0", *names], capture_output=True, env=_podman_env())
    return stopped


def _podman_env():
    from sandboxes.podman.engine import podman_env

    return podman_env({})
