"""agentenv's stand-in for the reference's env SDK (`agentenv_protocol`, from agentenv-framework-protocol),
written on `agentenv_local.env`. `compat/reference_server.py` puts it on a server process's import path only
when the real package is not importable there; nothing else imports it.

It covers the public surface an env server uses: `AgentEnvEnvironment`, `@environment_card`, `@tool`,
`ToolContext`, `@reset_data` / `@add_data` / `@get_data`, `@extension` and `serve()`, with the card, context
and data-plane names beside them. Any other name fails at import with what to do instead."""

from __future__ import annotations

from typing import Any

from agentenv_local.env import (
    DEFAULT_ROLE,
    HIDDEN_BY_DEFAULT_META_KEY,
    MCP_PATH,
    PROTOCOL_VERSION,
    ROLE_HEADER,
    ROLE_META_KEY,
    RPC_PATH,
    SESSION_META_KEY,
    WELL_KNOWN_PATH,
    AddDataRequest,
    Caller,
    DataPart,
    Env,
    EnvError,
    EnvironmentCapabilities,
    EnvironmentCard,
    EnvironmentExtension,
    EnvironmentInterface,
    EnvironmentTool,
    FilePart,
    GetDataResponse,
    Part,
    TextPart,
    ToolContext,
    add_data,
    bound,
    environment_card,
    extension,
    get_data,
    normalize_role,
    reset_data,
    tool,
)

AgentEnvError = EnvError
MCP_TRANSPORT = "streamable-http"
_TRANSPORTS = ("streamable-http", "stdio")


class AgentEnvEnvironment(Env):
    """The reference's env base class: our `Env`, with the reference's `serve(transport=...)`."""

    # The reference's serve() takes the transport, not a host and port (those come from MCP_HOST / MCP_PORT,
    # as ours do), so the signature differs from Env.serve on purpose.
    def serve(self, transport: str = MCP_TRANSPORT) -> None:  # type: ignore[override]
        """Serve MCP over streamable HTTP on $MCP_HOST:$MCP_PORT (our env runtime's server), or over stdio."""
        if transport not in _TRANSPORTS:
            raise ValueError(f"transport {transport!r} is not served by agentenv's stand-in for agentenv_protocol; "
                             f"use one of {', '.join(_TRANSPORTS)}")
        if transport == "stdio":
            self.serve_stdio()
        else:
            Env.serve(self)


def __getattr__(name: str) -> Any:
    # Private and dunder names are probed by tools (hasattr, copy, pickle, inspection) that expect AttributeError;
    # a public name is what a server imports, and `from agentenv_protocol import X` would swap an AttributeError
    # for a bare "cannot import name", losing the hint below.
    if name.startswith("_"):
        raise AttributeError(f"module 'agentenv_protocol' has no attribute {name!r}")
    raise ImportError(f"agentenv_protocol.{name} is not in agentenv's stand-in for agentenv_protocol, which covers "
                      f"{', '.join(__all__)}; install the real package (pip install agentenv-framework-protocol) "
                      "into the interpreter that runs the server")


__all__ = [
    "DEFAULT_ROLE",
    "HIDDEN_BY_DEFAULT_META_KEY",
    "MCP_PATH",
    "MCP_TRANSPORT",
    "PROTOCOL_VERSION",
    "ROLE_HEADER",
    "ROLE_META_KEY",
    "RPC_PATH",
    "SESSION_META_KEY",
    "WELL_KNOWN_PATH",
    "AddDataRequest",
    "AgentEnvEnvironment",
    "AgentEnvError",
    "Caller",
    "DataPart",
    "EnvironmentCapabilities",
    "EnvironmentCard",
    "EnvironmentExtension",
    "EnvironmentInterface",
    "EnvironmentTool",
    "FilePart",
    "GetDataResponse",
    "Part",
    "TextPart",
    "ToolContext",
    "add_data",
    "bound",
    "environment_card",
    "extension",
    "get_data",
    "normalize_role",
    "reset_data",
    "tool",
]
