"""The shared test kits, one module per area, imported as `from kits.<area> import ...` (tests/conftest.py
puts tests/ on sys.path): servers (a uvicorn app in a thread), hub (an in-process hub, waits, steps),
env_sdk (the env SDK's test envs), data_plane (an env's JSON-RPC data plane, in-process or over HTTP),
env_steps (env steps on a live gateway), env_deploy (deployed envs),
agents, gateway, tui, example_envs, docs_server, store (a store on tmp files), podman (Podman state),
config (a project's config.toml; a dict standing in for the loaded config)."""
