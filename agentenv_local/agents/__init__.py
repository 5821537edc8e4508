"""Writing, serving and talking to A2A agents, wire-compatible with the reference's agents (A2A 0.3 JSON-RPC plus
the ``urn:agentenv:*/v1`` extensions); the server also answers the A2A 1.0 method names.

    from agentenv_local.agents import Agent, TaskRequest, TaskResult

    class Greeter(Agent):
        name = "greeter"

        async def run(self, request: TaskRequest) -> TaskResult:
            return TaskResult.text(f"hello, {request.text}")

    Greeter().serve(port=0)     # or: python -m agentenv_local.agents path/to/greeter.py --port 0

The client: ``from agentenv_local.agents.client import A2AClient``. The built-in scripted agent:
``from agentenv_local.agents.scripted import ScriptedAgent`` (``python -m agentenv_local.agents scripted``).
Importing this package is cheap (pydantic only): starlette, uvicorn, httpx2 and mcp load when used.
See docs/agents.md.
"""

from __future__ import annotations

from typing import Any

from .base import Agent
from .types import (
    AgentConfig,
    DataPart,
    FilePart,
    Part,
    TaskError,
    TaskOutcome,
    TaskProgress,
    TaskRequest,
    TaskResult,
    TaskResultBuilder,
    TextPart,
    TrajectoryLog,
    TrajectoryState,
    Usage,
)

_LAZY = {
    "A2AClient": ".client", "A2ATask": ".client", "A2AError": ".client", "A2AProtocolError": ".client",
    "A2ARpcError": ".client", "A2AExtensionError": ".client",
    "ScriptedAgent": ".scripted", "ScriptedConfig": ".scripted",
    "create_app": ".server", "serve": ".server",
}

__all__ = [
    "A2AClient",
    "A2AError",
    "A2AExtensionError",
    "A2AProtocolError",
    "A2ARpcError",
    "A2ATask",
    "Agent",
    "AgentConfig",
    "DataPart",
    "FilePart",
    "Part",
    "ScriptedAgent",
    "ScriptedConfig",
    "TaskError",
    "TaskOutcome",
    "TaskProgress",
    "TaskRequest",
    "TaskResult",
    "TaskResultBuilder",
    "TextPart",
    "TrajectoryLog",
    "TrajectoryState",
    "Usage",
    "create_app",
    "serve",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
