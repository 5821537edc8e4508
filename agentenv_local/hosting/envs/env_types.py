"""Env types: what `type = "..."` in an env.toml means, registered in the `agentenv_local.env_types` group.

An env type says two things: how its env.toml is read (`record`, a pydantic model) and how it is deployed
(`servers`: the MCP servers behind its gateway; `topology`: a gateway in front of them, or its one server on
its own; `provider`: which env provider runs each of them). Ours,
`mcp_server` and `multi`, are entry points in pyproject.toml like a plugin's would be:

    [project.entry-points."agentenv_local.env_types"]
    mcp_server = "agentenv_local.hosting.envs.env_types:McpServerType"
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, get_args

from pydantic import BaseModel

from .in_hub import runs_in_hub
from .instance import DeployError
from .records import TOPOLOGIES, McpServerEnv, MultiEnv

# (env id, version) -> (its stored document, its validated record): how a type finds the envs it refers to
LookUp = Callable[[str, int | None], tuple[dict, BaseModel]]


class EnvType:
    """What an `agentenv_local.env_types` entry point names: a subclass, its `name` the entry point's name."""

    name: ClassVar[str]
    # the env.toml model: a subclass of McpServerEnv (one server) or MultiEnv (servers of other envs)
    # whose `type` field is Literal[name]
    record: ClassVar[type[BaseModel]]

    def servers(self, env_id: str, doc: dict, env: Any, look_up: LookUp) -> list[tuple[dict, McpServerEnv]]:
        """The servers behind this env's gateway: (their document, their record). One server: itself."""
        return [(doc, env)]

    def gateway_options(self, env_id: str, env: Any, gateway_mode: str | None) -> tuple[str, str, bool]:
        """(the MCP server name agents see, the gateway mode, prefix tool names?)."""
        return (getattr(env, "environment_name", None) or env_id.rsplit("/", 1)[-1],
                gateway_mode or "performance", False)

    def topology(self, env: Any) -> str:
        """"gateway" (a Gateway in front of its servers: gateway.py) or "server" (its one server on its own, no
        gateway: server_topology.py); the record's `env_provider_type`, "gateway" by default and when it names an
        env provider (servers_provider)."""
        value = str(getattr(env, "env_provider_type", "gateway"))
        return value if value in TOPOLOGIES else "gateway"

    def servers_provider(self, env: Any) -> str | None:
        """The env provider the env.toml names for every one of its servers (`env_provider_type = "<a plugin's
        env provider>"`), or None: each server's own type picks (provider)."""
        value = getattr(env, "env_provider_type", None)
        return value if isinstance(value, str) and value not in TOPOLOGIES else None

    def provider(self, server: McpServerEnv, where: str) -> str:
        """The env provider (an `agentenv_local.env_providers` name) that runs one of its servers."""
        if server.image:
            return "container"
        if server.url:
            return "url"
        if server.module and runs_in_hub(server, where):
            return "in_hub"
        from .reference_servers import is_reference_server

        if is_reference_server(server):  # the reference's server.py folder: a subprocess, or in a container
            return "reference_server"
        return "subprocess"


class McpServerType(EnvType):
    """One MCP server from a module, a command, a url or an image (records.McpServerEnv)."""

    name = "mcp_server"
    record = McpServerEnv


class MultiType(EnvType):
    """Several mcp_server envs behind one gateway (records.MultiEnv)."""

    name = "multi"
    record = MultiEnv

    def servers(self, env_id: str, doc: dict, env: Any, look_up: LookUp) -> list[tuple[dict, McpServerEnv]]:
        servers = []
        for ref in env.refs():
            sdoc, senv = look_up(ref.env, ref.version)
            if not isinstance(senv, McpServerEnv):
                raise DeployError(f"env {env_id}: mcp_server_envs: {ref.env!r} is a {getattr(senv, 'type', '?')} "
                                  "env, not an mcp_server env")
            servers.append((sdoc, senv))
        return servers

    def gateway_options(self, env_id: str, env: Any, gateway_mode: str | None) -> tuple[str, str, bool]:
        return env.name or env_id.rsplit("/", 1)[-1], gateway_mode or env.gateway_mode, env.prefix_tools


def env_type(name: str) -> EnvType | None:
    """The registered env type `name` (an instance), or None."""
    from agentenv_local.plugins import registry

    cls = registry().get("env_types", name)
    return cls() if cls is not None else None


def plugin_problem(name: str, obj: object) -> str | None:
    """Why `obj` cannot be the env type `name` (an `agentenv_local.env_types` entry), or None."""
    if not (isinstance(obj, type) and issubclass(obj, EnvType)):
        return "an env type must be a subclass of agentenv_local.hosting.envs.env_types.EnvType"
    if getattr(obj, "name", None) != name:
        return f"its name is {getattr(obj, 'name', None)!r}, but it is registered as {name!r}"
    record = getattr(obj, "record", None)
    if not (isinstance(record, type) and issubclass(record, (McpServerEnv, MultiEnv))):
        return "its record must be a subclass of McpServerEnv or MultiEnv (agentenv_local.hosting.envs.records)"
    type_field = record.model_fields.get("type")
    if type_field is None or name not in get_args(type_field.annotation):
        return f"its record's `type` field must be Literal[{name!r}]"
    return None
