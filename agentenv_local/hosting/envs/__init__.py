"""Env records and the hub's deployed env instances.

Records (records.py, store.py): the `env.toml` model (its `type` an env type of the `agentenv_local.env_types`
plugin group, env_types.py: ours are `mcp_server` and `multi`; a module, command, url or image source),
validated with every problem named, and the document body `agentenv env put` and bundles store, its folder's
files pinned as an artifact. They live here, beside what deploys them, because they describe how
the hub runs an env; the code of an env is written with the SDK, `agentenv_local.env`.

Deployment: `manager.EnvManager` (the hub's `services.envs`) deploys, resumes and tears down instances; each
other module does one job of it (see `agentenv_local.hosting`); the env providers (providers.py, the
`agentenv_local.env_providers` group: in_hub.py, subprocesses.py, containers.py, a url) run an env's servers.
"""

from .records import EnvRecord, McpServerEnv, MultiEnv, env_types, load_env_folder, parse_env

__all__ = ["EnvRecord", "McpServerEnv", "MultiEnv", "env_types", "load_env_folder", "parse_env"]
