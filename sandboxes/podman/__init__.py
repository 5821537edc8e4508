"""The Podman sandbox provider (podman-py on the Podman REST service), its image store and warm pool."""

from .provider import PodmanSandbox, PodmanSandboxProvider

__all__ = ["PodmanSandbox", "PodmanSandboxProvider"]
