"""`deploy_human_agent`: a person's A2A endpoint registered as an agent of the run (nothing is started)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, ClassVar

from pydantic import Field

from agentenv_local.errors import AgentenvError
from agentenv_local.tasks.step import Step

if TYPE_CHECKING:
    from agentenv_local.tasks.context import StepContext


class DeployHumanAgentStep(Step):
    """Register a person's A2A endpoint as an agent of the run (nothing is started)."""

    type: ClassVar[str] = "deploy_human_agent"

    agent_name: str = Field(default="human_agent", min_length=1)
    a2a_url: str = Field(min_length=1)

    async def execute(self, ctx: "StepContext") -> None:
        from agentenv_local.agents.client import A2AClient

        card = None
        try:  # best effort, as the reference does: a person's endpoint may serve no card
            async with A2AClient(self.a2a_url, timeout=10) as client:
                card = await client.card()
        except AgentenvError as exc:
            ctx.log(f"no agent card at {self.a2a_url}: {exc.message}", level="warning")
        ctx.state.setdefault("deployed_agents", []).append({
            "agent_name": self.agent_name, "a2a_url": self.a2a_url.rstrip("/"), "api_url": self.a2a_url,
            "a2a_card": card, "instance_id": f"human-{uuid.uuid4().hex[:12]}", "runtime": "url", "human": True,
            "step_id": self.id})
        ctx.metadata.setdefault("human_agents", []).append(self.agent_name)
