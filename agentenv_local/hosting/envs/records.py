"""Env records in the reference's shape, with local sources instead of Docker images.

    [envs/mail/env.toml]
    type = "mcp_server"              # the default
    module = "server.py:Mail"        # a Python env (agentenv_local.env.Env) in this folder
    environment_name = "mail"

    [envs/office/env.toml]
    type = "multi"
    name = "office"
    mcp_server_envs = ["mail", "crm"]

An `mcp_server` env's server comes from exactly one of: `module` (an Env class, run in the hub or
as a subprocess), `command` (any MCP server over streamable HTTP, told its port by MCP_PORT),
`url` (a server that is already running) or `image` (a container image in Podman's local storage, started
in a hardened container that serves MCP on `container_port`, published on 127.0.0.1).
`control_plane_auth = false` deploys it with the reference's open control plane (no admin token).
`pool = false` keeps its instances out of the hub's env pools (manager.py, pool.py).
`env_provider_type` is the topology (`gateway`, the default, or `server`), or the name of a plugin's env provider
(the `agentenv_local.env_providers` group): a gateway in front, and every server of the env run by that provider.
A folder's files are stored with it as a file-bundle artifact, so an env version pins its code.

`type` names an env type of the `agentenv_local.env_types` plugin group (env_types.py): its record model
validates the rest of the table. Ours are `mcp_server` (McpServerEnv) and `multi` (MultiEnv).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agentenv_local.errors import ValidationError

SOURCES = ("module", "command", "url", "image")
TOPOLOGIES = ("gateway", "server")  # what env_provider_type names when it names no plugin's env provider


def provider_type_problem(value: str, topologies: tuple[str, ...]) -> str | None:
    """Why `value` cannot be an env's env_provider_type: one of `topologies`, or a plugin's env provider (a
    built-in one is picked per server from its keys, so naming it is refused); None when it can."""
    if value in topologies:
        return None
    if value in TOPOLOGIES:
        return f"{value!r} is not a topology of this env type; use one of {', '.join(topologies)}"
    from agentenv_local.plugins import registry

    registered = registry().contributions("env_providers").get(value)
    if registered is not None and registered.builtin:
        return (f"{value!r} is a built-in env provider, picked per server from its keys (module, run_as, "
                "command, url, image); env_provider_type names a topology or a plugin's env provider")
    if registry().get("env_providers", value) is not None:
        return None
    failed = registry().failure("env_providers", value)
    builtins = {name for name, c in registry().contributions("env_providers").items() if c.builtin}
    plugins = sorted(set(registry().available("env_providers")) - builtins)
    return (f"{value!r} is neither a topology ({', '.join(topologies)}) nor an installed env provider"
            + (f" (its plugin failed to load: {failed})" if failed else "")
            + (f"; plugins' env providers: {', '.join(plugins)}" if plugins else "; no plugin adds one")
            + " (see `agentenv plugin list`)")


class EnvRef(BaseModel):
    model_config = ConfigDict(extra="forbid")

    env: str = Field(min_length=1)
    version: int | None = Field(default=None, ge=1)


class ArtifactPin(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    version: int = Field(ge=1)


class McpServerEnv(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["mcp_server"] = "mcp_server"
    environment_name: str | None = None
    module: str | None = None
    command: list[str] | None = None
    url: str | None = None
    image: str | None = None
    run_as: Literal["in_process", "subprocess"] | None = None  # module envs: in the hub unless they have env_vars
    # module envs in the hub: a tool call taking longer fails (hosting/envs/hub_guard.py; default 300 s)
    call_timeout: float | None = Field(default=None, gt=0)
    container_port: int | None = Field(default=None, ge=1, le=65535)  # image envs: where it serves (8000)
    mcp_path: str = "/mcp"
    env_vars: dict[str, str] = Field(default_factory=dict)
    env_provider_type: str = "gateway"  # a topology (TOPOLOGIES) or a plugin's env provider
    description: str = ""
    control_plane_auth: bool | None = None  # false: the reference's open control plane (no admin token)
    pool: bool | None = None  # false: never kept in an env pool (its state is more than its data plane)
    files: ArtifactPin | None = None  # the folder's files, stored as an artifact (set when stored)

    @field_validator("env_provider_type")
    @classmethod
    def _provider_type(cls, value: str) -> str:
        if (problem := provider_type_problem(value, TOPOLOGIES)) is not None:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _one_source(self) -> "McpServerEnv":
        given = [s for s in SOURCES if getattr(self, s)]
        if len(given) != 1:
            raise ValueError(f"give exactly one server source of {', '.join(SOURCES)}"
                             + (f" (got {', '.join(given)})" if given else ""))
        if self.run_as and not self.module:
            raise ValueError("run_as only applies to a module env")
        if self.call_timeout is not None and not self.module:
            raise ValueError("call_timeout only applies to a module env (one loaded in the hub)")
        if self.container_port is not None and not self.image:
            raise ValueError("container_port only applies to an image env")
        if self.url and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url must be an http(s) URL of an MCP endpoint, got {self.url!r}")
        if self.module and ":" not in self.module:
            raise ValueError(f"module must be 'file.py:Class' or 'package.module:Class', got {self.module!r}")
        if self.module and (problem := module_problem(self.module)):
            raise ValueError(f"module: {problem}")
        return self


def module_problem(module: str) -> str | None:
    """Why `module` would import code the stored env version does not pin (a file outside the env's
    folder), or is no module at all; None when it is fine."""
    ref = module.rpartition(":")[0]
    if ref.endswith(".py") or any(c in ref for c in "/\\~"):
        parts = ref.replace("\\", "/").split("/")
        if ref.startswith(("/", "~")) or ".." in parts or (len(ref) > 1 and ref[1] == ":"):
            return (f"{ref} is outside the env's folder, so the stored env version would not pin its code; "
                    "put the file in the folder (module = \"server.py:Class\"), or install it as a package "
                    "(module = \"package.module:Class\")")
        if not ref.endswith(".py"):
            return f"{ref} is neither a .py file in the env's folder nor a dotted package.module"
    elif not all(part.isidentifier() for part in ref.split(".")):
        return f"{ref!r} is neither a .py file in the env's folder nor a dotted package.module"
    return None


class MultiEnv(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["multi"]
    name: str | None = None  # the MCP server name agents see
    mcp_server_envs: list[EnvRef | str] = Field(min_length=1)
    prefix_tools: bool = False  # serve <env>_<tool> so clashing tool names still work
    gateway_mode: Literal["performance", "consistent"] = "performance"
    env_provider_type: str = "gateway"  # always a gateway; or a plugin's env provider running every server
    description: str = ""
    control_plane_auth: bool | None = None  # false: the reference's open control plane (no admin token)
    pool: bool | None = None  # false: never kept in an env pool

    @field_validator("env_provider_type")
    @classmethod
    def _provider_type(cls, value: str) -> str:
        if (problem := provider_type_problem(value, ("gateway",))) is not None:
            raise ValueError(problem)
        return value

    def refs(self) -> list[EnvRef]:
        return [EnvRef(env=r) if isinstance(r, str) else r for r in self.mcp_server_envs]


EnvRecord = McpServerEnv | MultiEnv  # every env type's record is a subclass of one of these


def env_types() -> list[str]:
    """The env types this installation deploys: the working `agentenv_local.env_types` entries."""
    from agentenv_local.plugins import registry

    return sorted(registry().available("env_types"))


def record_model(type_name: str, where: str) -> type[BaseModel]:
    """The record model of env type `type_name`, or a ValidationError listing the registered types."""
    from agentenv_local.plugins import registry

    env_type = registry().get("env_types", type_name) if isinstance(type_name, str) else None
    if env_type is None:
        failed = registry().failure("env_types", type_name) if isinstance(type_name, str) else None
        raise ValidationError(f"{where}: type {type_name!r} is not an env type this version deploys"
                              + (f" (its plugin failed to load: {failed})" if failed else "")
                              + f"; use one of {', '.join(env_types())}")
    return env_type.record


def parse_env(data: dict, where: str) -> McpServerEnv | MultiEnv:
    """Validate an env body with its type's record model, reporting every problem with its field."""
    data = dict(data)
    data.setdefault("type", "mcp_server")
    data.pop("id", None)
    model = record_model(data["type"], where)
    try:
        env = model.model_validate(data)
    except pydantic.ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"]) or "(env)"
            msg = ("unknown key (typo?)" if err["type"] == "extra_forbidden"
                   else err["msg"].removeprefix("Value error, "))
            problems.append(f"{where}: {loc}: {msg}")
        raise ValidationError(f"{where}: {len(problems)} problem(s) in the env", problems=problems) from exc
    assert isinstance(env, McpServerEnv | MultiEnv)  # env_types.plugin_problem checked the record model
    return env


def load_env_folder(folder: Path) -> tuple[McpServerEnv | MultiEnv, dict, str | None]:
    """Read `folder/env.toml` -> (the validated env, its raw table, its declared id or None)."""
    toml_path = folder / "env.toml"
    where = f"envs/{folder.name}/env.toml"
    if not toml_path.exists() and not toml_path.is_symlink():  # a folder or a FIFO is reported when read
        from agentenv_local.compat.reference_envs import reference_env_table

        table = reference_env_table(folder)  # the reference's server.py folder: an mcp_server env
        if table is not None:
            return parse_env(table, f"envs/{folder.name}"), table, None
        raise ValidationError(f"envs/{folder.name}: no env.toml",
                              hint='add env.toml with at least module = "server.py:ClassName" '
                                   "(or, as the reference writes env folders, a server.py)")
    from agentenv_local.inputs import refused
    from agentenv_local.untrusted import UntrustedInputError, parse_toml, read_file

    try:  # bounded: deep nesting, huge numbers, lone surrogates, a FIFO or a huge file are refused
        raw = parse_toml(read_file(toml_path, what=where, max_bytes=1 << 20).decode("utf-8-sig"), what=where)
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{where}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    except UntrustedInputError as exc:
        raise ValidationError(refused(where, exc)) from None
    declared = raw.get("id")
    if declared is not None and (not isinstance(declared, str) or not declared.startswith("@local/")):
        raise ValidationError(f"{where}: 'id' must be a string starting with @local/")
    env = parse_env(raw, where)
    if isinstance(env, McpServerEnv) and env.module:
        module_file = env.module.rsplit(":", 1)[0]
        if module_file.endswith(".py") and not (folder / module_file).is_file():
            raise ValidationError(f"{where}: module: {module_file} is not in envs/{folder.name}/")
    return env, raw, declared
