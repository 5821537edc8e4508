"""Hosting: what runs envs and agents for the hub.

The SDKs say how to write them (`agentenv_local.env` for envs, `agentenv_local.agents` for agents); this layer
starts, records and stops them on behalf of the hub, so that the hub's wire methods and the task steps
(`deploy_env`, `deploy_agent`, ...) have one place to ask:

- `hosting.envs`: env records (the `env.toml` model: what an env is and where its server comes from, stored as
  versioned `envs` documents) and their deployment: `EnvManager` (manager.py) runs an instance as a gateway
  (gateway.py) or a lone server (server_topology.py) in front of children loaded in the hub (in_hub.py),
  started as subprocesses (subprocesses.py) or in containers (containers.py); sweep.py ends what a dead hub
  left; serving.py serves an instance's HTTP app on the hub's loop.
- `hosting.agents`: agents started for a run or kept up by the hub (`agentenv agent deploy`): in the hub, as a
  subprocess, in a container, or at a URL (hosted.py), and the hub's long-lived agent instances (instances.py).
  Agent records (`agentenv agent put`) stay with the agent SDK in `agentenv_local.agents.registry`.

What the hub serves itself (gateways, in-hub env servers and agents) is served one way, asgi.py (uvicorn as a
task on the hub's loop); subprocesses are started and stopped through `agentenv_local.procs`. Hosting may import
the SDKs, the gateway, the store's query model and the sandbox API; nothing in the SDKs imports hosting.
"""
