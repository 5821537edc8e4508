"""agentenv-sqlite-app: the env type `sqlite_app` for agentenv-local.

    [envs/shop/env.toml]
    type = "sqlite_app"
    database = "shop.db"

config.py (what env.toml accepts), env_type.py (the entry point: how it deploys), server.py (the env: its tools and
data plane), database.py (the checked SQLite operations).
"""
