"""Helpers shared by the Podman tests."""

from __future__ import annotations

import subprocess


def project_containers(project: str) -> list[str]:
    out = subprocess.run(["podman", "ps", "-a", "--filter", f"label=agentenv.project={project}", "--format",
                          "{{.Names}}"], capture_output=True, text=True, env=_podman_env()).stdout
    return sorted(out.split())


def _podman_env():
    from sandboxes.podman.engine import podman_env

    return podman_env({})
