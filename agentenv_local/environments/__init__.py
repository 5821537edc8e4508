"""Environment records: what an env is (its type and where its server comes from), stored as
versioned documents in the `envs` collection; `deploy.EnvManager` runs them behind a gateway
in the hub."""

from .records import ENV_TYPES, EnvRecord, McpServerEnv, MultiEnv, load_env_folder, parse_env

__all__ = ["ENV_TYPES", "EnvRecord", "McpServerEnv", "MultiEnv", "load_env_folder", "parse_env"]
