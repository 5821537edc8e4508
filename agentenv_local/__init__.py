"""agentenv-local: local-first RL environments for LLM agents.

`agentenv_local.rollouts(...)` (async) and `agentenv_local.rollouts_sync(...)` yield finished episodes for a
trainer (agentenv_local/episodes/rollouts.py); they are imported on first use, so importing the package
stays free.
"""

from typing import Any

__version__ = "0.1.0"

_LAZY = {"rollouts": "agentenv_local.episodes.rollouts", "rollouts_sync": "agentenv_local.episodes.rollouts",
         "RolloutSpec": "agentenv_local.episodes.rollouts"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'agentenv_local' has no attribute {name!r}")
