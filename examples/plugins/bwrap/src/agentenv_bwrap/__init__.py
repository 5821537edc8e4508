"""agentenv-bwrap: a sandbox provider for agentenv-local on bubblewrap (`sandbox_type = "bwrap"`)."""

from .provider import BwrapSandbox, BwrapSandboxProvider

__all__ = ["BwrapSandbox", "BwrapSandboxProvider"]
