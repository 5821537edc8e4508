"""agentenv-one-process: the `one_process` env provider, every server of an env in one Python process.

    [envs/desk/env.toml]
    type = "multi"
    mcp_server_envs = ["tally", "shelf"]
    env_provider_type = "one_process"

provider.py is the hub's side (the `agentenv_local.env_providers` entry point); host.py is the one child process
that loads every server of an instance and serves each on its own path on 127.0.0.1.
"""

__version__ = "0.1.0"
