"""The env type `sqlite_app` (entry point `agentenv_local.env_types`: sqlite_app).

Deployed like an mcp_server env with one server, this package's SqliteApp, always as a subprocess: it runs in the
instance's own folder (the env version's pinned files, the database among them, written there for this instance)
and gets the env.toml's settings in its environment, so nothing of one instance is shared with another or with the
hub.
"""

from __future__ import annotations

from typing import Any

from agentenv_local.hosting.envs.env_types import EnvType, LookUp
from agentenv_local.hosting.envs.records import McpServerEnv

from .config import SETTINGS_ENV, SqliteAppEnv


class SqliteAppType(EnvType):
    name = "sqlite_app"
    record = SqliteAppEnv

    def servers(self, env_id: str, doc: dict, env: Any, look_up: LookUp) -> list[tuple[dict, McpServerEnv]]:
        assert isinstance(env, SqliteAppEnv)
        server = env.model_copy(update={"env_vars": {**env.env_vars, SETTINGS_ENV: env.settings().to_env()}})
        return [(doc, server)]

    def provider(self, server: McpServerEnv, where: str) -> str:
        return "subprocess"  # its own process: a SQLite connection per instance, never the hub's threads
