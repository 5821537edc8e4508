"""Re-export of the sandbox interface, which lives in the core (agentenv_local.sandbox_api) so
the core never imports this package except through the plugin registry."""

from agentenv_local.sandbox_api import (  # noqa: F401
    ExecResult,
    NetworkPolicy,
    Sandbox,
    SandboxProvider,
    SandboxSpec,
)
