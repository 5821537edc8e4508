"""The ``Agent`` base class: subclass it, implement ``async run(request)``, serve it.

    from agentenv_local.agents import Agent, TaskRequest, TaskResult

    class Greeter(Agent):
        name = "greeter"
        description = "Says hello."

        async def run(self, request: TaskRequest) -> TaskResult:
            return TaskResult.text(f"hello, {request.text}")

    if __name__ == "__main__":
        Greeter().serve()        # or: python -m agentenv_local.agents path/to/greeter.py --port 0

``run`` either returns a ``TaskResult`` or is an async generator that yields ``TaskProgress`` items and then one
``TaskResult``. Turns of one context run one at a time, in order; different contexts run concurrently. An
exception escaping ``run`` becomes an ``infra_error`` failure whose text never reaches the client (it is logged).
Cancelling a task raises ``asyncio.CancelledError`` inside ``run`` at its next ``await``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from .types import AgentConfig, TaskRequest


class Agent:
    #: shown on the card (and the default ``config.name``)
    name: ClassVar[str] = "agent"
    description: ClassVar[str] = "An A2A agent built with agentenv_local.agents."
    version: ClassVar[str] = "0.1.0"
    #: the config agent-config/v1 accepts; subclass AgentConfig to add fields (each with a default)
    config_model: ClassVar[type[AgentConfig]] = AgentConfig
    #: card skills: [{"id", "name", "description", "tags"}]
    skills: ClassVar[list[dict[str, Any]]] = []
    input_modes: ClassVar[tuple[str, ...]] = ("text", "data")
    output_modes: ClassVar[tuple[str, ...]] = ("text", "data")

    def __init__(self, **config: Any) -> None:
        """Keyword arguments are the initial config (validated against ``config_model``)."""
        self.initial_config = self.config_model.model_validate(config).model_dump(exclude_unset=True)

    async def run(self, request: TaskRequest) -> Any:  # TaskResult | AsyncIterator[TaskProgress | TaskResult]
        raise NotImplementedError(f"{type(self).__name__} must implement `async def run(self, request)`")

    async def shutdown(self) -> None:
        """Called once when its server stops, after every task ended: release what the agent holds (servers it
        started, temp folders). Nothing by default."""

    # --- more HTTP surface (optional) ----------------------------------------------------------------------

    def extra_routes(self) -> list[Any]:
        """Starlette routes served beside the A2A ones (e.g. ``/ext/<yours>`` for people or tools); none by default."""
        return []

    def card_extensions(self) -> list[dict[str, Any]]:
        """More ``capabilities.extensions`` entries for the card (``{uri, description, params}``); none by default."""
        return []

    # --- serving ----------------------------------------------------------------------------------------

    def app(self, *, public_url: str | None = None) -> Any:
        """The Starlette (ASGI) app serving this agent over A2A."""
        from .server import create_app

        return create_app(self, public_url=public_url)

    def serve(self, host: str | None = None, port: int | None = None, **options: Any) -> None:
        """Serve over HTTP (blocking); prints ``... serving on http://HOST:PORT`` to stderr once listening."""
        from .server import serve

        serve(self, host, port, **options)


def plugin_problem(name: str, obj: object) -> str | None:
    """Why `obj` cannot be the agent `name` (an `agentenv_local.agents` entry), or None."""
    if isinstance(obj, Agent) or (isinstance(obj, type) and issubclass(obj, Agent)):
        return None
    return "an agent must be a subclass (or an instance) of agentenv_local.agents.Agent"
