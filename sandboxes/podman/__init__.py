"""The Podman sandbox provider (on the Podman REST service: libpod.py, podman-py), its images and warm pool."""

from .provider import PodmanSandbox, PodmanSandboxProvider

__all__ = ["PodmanSandbox", "PodmanSandboxProvider"]
