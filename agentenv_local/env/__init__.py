"""Writing environments: an MCP server with an Environment Card, a JSON-RPC data plane and REST extensions,
wire-compatible with the reference's envs (`agentenv-framework-protocol`), on mcp 2.x.

    from typing import Annotated
    from pydantic import Field
    from agentenv_local.env import Env, EnvError, ToolContext, environment_card, tool

    @environment_card(name="echo", description="Says back what it's sent.")
    class Echo(Env):
        @tool()
        def echo(self, text: Annotated[str, Field(description="What to say back")]) -> str:
            "Return the text it's sent."
            return text

        @tool()
        def whoami(self, ctx: ToolContext) -> dict:
            "The caller's role and the env's time."
            return {"role": ctx.caller.role, "now": ctx.now().isoformat()}

    if __name__ == "__main__":
        Echo().serve()          # or: python -m agentenv_local.env server.py [--stdio] [--port N]

Importing this package is cheap: mcp, starlette and uvicorn are imported only when an env is served.
See docs/environments/creating.md.
"""

from .base import (
    Env,
    add_data,
    environment_card,
    extension,
    extension_slug,
    get_data,
    reset_data,
    tool,
)
from .card import (
    MCP_PATH,
    PROTOCOL_VERSION,
    RPC_PATH,
    WELL_KNOWN_PATH,
    AddDataRequest,
    DataPart,
    EnvironmentCapabilities,
    EnvironmentCard,
    EnvironmentExtension,
    EnvironmentInterface,
    EnvironmentTool,
    FilePart,
    FileWithBytes,
    FileWithUri,
    GetDataResponse,
    Part,
    TextPart,
)
from .context import (
    CHANGES_EXTENSION_URI,
    CHANGES_META_KEY,
    CHANGES_TRUNCATED_META_KEY,
    DEFAULT_ROLE,
    EMPTY,
    HIDDEN_BY_DEFAULT_META_KEY,
    ROLE_HEADER,
    ROLE_META_KEY,
    SESSION_META_KEY,
    VIRTUAL_TIME_HEADER,
    VIRTUAL_TIME_META_KEY,
    Caller,
    ToolContext,
    bound,
    normalize_role,
    parse_virtual_time,
    record_change,
)
from .errors import EnvError


def load_env(target):
    """An env object from `path/to/server.py[:Name]`, `package.module[:Name]`, an Env subclass or object."""
    from .serve import load_env as _load_env

    return _load_env(target)


__all__ = [
    "CHANGES_EXTENSION_URI",
    "CHANGES_META_KEY",
    "CHANGES_TRUNCATED_META_KEY",
    "DEFAULT_ROLE",
    "EMPTY",
    "HIDDEN_BY_DEFAULT_META_KEY",
    "MCP_PATH",
    "PROTOCOL_VERSION",
    "ROLE_HEADER",
    "ROLE_META_KEY",
    "RPC_PATH",
    "SESSION_META_KEY",
    "VIRTUAL_TIME_HEADER",
    "VIRTUAL_TIME_META_KEY",
    "WELL_KNOWN_PATH",
    "AddDataRequest",
    "Caller",
    "DataPart",
    "Env",
    "EnvError",
    "EnvironmentCapabilities",
    "EnvironmentCard",
    "EnvironmentExtension",
    "EnvironmentInterface",
    "EnvironmentTool",
    "FilePart",
    "FileWithBytes",
    "FileWithUri",
    "GetDataResponse",
    "Part",
    "TextPart",
    "ToolContext",
    "add_data",
    "bound",
    "environment_card",
    "extension",
    "extension_slug",
    "get_data",
    "load_env",
    "normalize_role",
    "parse_virtual_time",
    "record_change",
    "reset_data",
    "tool",
]
