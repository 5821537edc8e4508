"""Where the hub records the instances it runs, and whether a dead hub left any still recorded as running.

The names live here, apart from the code that deploys (which imports pydantic, the SDKs and the providers), so
that a hub can ask at start whether there is anything to sweep (hub/engine.py) without importing all that.
"""

from __future__ import annotations

from typing import Any

ENV_INSTANCES = "env_instances"  # each deployed env instance (hosting/envs/instance.py)
ENV_POOL_SLOTS = "env_pool_slots"  # each pooled env's slot (hosting/envs/pool.py)
POOLED = "pooled"  # a slot record's status while it waits in the pool
LEASED = "leased"  # ... while an episode's instance runs on it
AGENT_INSTANCES = "agent_instances"  # each agent `agentenv agent deploy` started (hosting/agents/instances.py)


def any_left_running(store: Any) -> bool:
    """Whether the store records an env instance, pool slot or agent instance as still live: with no hub running
    (the caller is the new one) each was left by a hub that died, and the new hub must sweep it at once."""
    live = ((ENV_INSTANCES, "running"), (ENV_POOL_SLOTS, POOLED), (ENV_POOL_SLOTS, LEASED),
            (AGENT_INSTANCES, "running"))
    return any(store.records.query({"collection": collection, "filters": [["status", "eq", status]], "limit": 1})
               for collection, status in live)
