"""`prompt_agent`: send a deployed agent a prompt, poll the task to its end (or its timeout: then the step fails with
the agent's last state), read the agent's trajectory (trajectory/v1) into the object store, and append a
`PromptResponse` to `prompt_responses`. With `max_conversation_turns` > 1 and a user simulator
(`user_agent_name`, any deployed agent, such as a scripted one), the simulator answers each reply until it
ends the conversation (a data part `{"end_conversation": true}` or `{"done": true}`) or the turns run out.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field, model_validator

from agentenv_local.errors import AgentenvError, StepError
from agentenv_local.tasks.step import Step

from .deployed_agents import deployed_agent, set_agent_config

if TYPE_CHECKING:
    from agentenv_local.tasks.context import StepContext


TRAJECTORY_INLINE_EVENTS = 2000  # more stays in the object store only
# model_params keys the agent sets itself (the reference's reserved litellm arguments)
MODEL_PARAMS_RESERVED = frozenset({"model", "messages", "api_key", "api_base", "user", "metadata", "timeout",
                                   "response_format"})


class PromptAgentStep(Step):
    """Prompt a deployed agent (one turn, or a conversation with a user simulator) and record its reply."""

    type: ClassVar[str] = "prompt_agent"
    env_ref_fields: ClassVar[tuple[str, ...]] = ("snapshot_config.env_id",)

    prompt: str | None = None
    parts: list[dict[str, Any]] | None = None
    prompt_id: str | None = None  # None: the step id
    agent_name: str = Field(default="default-agent", min_length=1)
    timeout_seconds: float = Field(default=600, gt=0)
    poll_interval_seconds: float = Field(default=0.05, gt=0)
    system_prompt: str | None = None
    model: str | None = None
    output_format: dict[str, Any] | None = None  # a JSON schema: the reply's structured output
    context_id: str | None = None  # continue a conversation: an A2A context id, or "prompt:<prompt_id>"
    max_conversation_turns: int = Field(default=1, ge=1, le=1000)
    user_agent_name: str | None = None
    user_agent_timeout_seconds: float = Field(default=600, gt=0)
    metadata: dict[str, Any] = Field(default_factory=dict)
    # Sent to the agent's config (agent-config/v1) when its card says it takes them, as the reference does:
    max_turns: int | None = Field(default=None, ge=1)  # the tool-loop agent: model calls per turn
    model_params: dict[str, Any] | None = None  # the tool-loop agent: temperature, max_tokens
    # Sent to the user simulator's config:
    user_model: str | None = None
    user_output_format: dict[str, Any] | None = None  # a JSON schema the simulator's replies follow
    # The reference's, accepted (cloud_only_fields says why each has no local meaning).
    trajectory_output_prefix: str | None = None
    max_thinking_tokens: int | None = None
    effort: str | None = None
    harness: str | None = None
    agentenv_tools: list[str] | None = None
    user_a2a_url: str | None = None  # a human counterpart's A2A URL instead of a deployed user simulator
    snapshot_config: dict[str, Any] | None = None
    live_trajectory: bool = False

    cloud_only_fields: ClassVar[dict[str, str]] = {
        "trajectory_output_prefix": "the reference's object-store prefix; trajectories are stored under "
                                    "runs/<run_id>/trajectories/",
        "max_thinking_tokens": "a reasoning budget of the reference's harnesses; local agents take none",
        "effort": "a reasoning effort of the reference's harnesses; local agents take none",
        "harness": "the reference's agent harness (claude code, ...); a local agent is what deploy_agent deployed",
        "agentenv_tools": "the reference's built-in harness tools; local agents get the envs' MCP tools",
        "snapshot_config": "periodic agent snapshots are not taken locally yet; use snapshot_agent_state",
        "live_trajectory": "the reference's live trajectory follower; `agentenv runs` shows the trajectory",
    }

    @model_validator(mode="after")
    def _prompt_or_parts(self) -> "PromptAgentStep":
        if not self.prompt and not self.parts:
            raise ValueError("give a prompt (text) or parts (A2A parts)")
        return self

    def config_problems(self) -> list[str]:
        problems = []
        if self.max_conversation_turns > 1 and not (self.user_agent_name or self.user_a2a_url):
            problems.append("user_agent_name: a conversation of more than one turn needs a user simulator (an agent "
                            "deployed with deploy_agent, e.g. a scripted one), a human agent, or user_a2a_url")
        reserved = sorted(set(self.model_params or {}) & MODEL_PARAMS_RESERVED)
        if reserved:
            problems.append(f"model_params: may not set {', '.join(reserved)} (the agent sets these itself)")
        if (self.user_model or self.user_output_format) and not self.user_agent_name:
            problems.append("user_model, user_output_format: configure the user simulator, so they need "
                            "user_agent_name")
        return problems

    async def execute(self, ctx: "StepContext") -> None:
        from agentenv_local.agents.client import A2AClient

        agent = deployed_agent(ctx, self.agent_name)
        prompt_id = self.prompt_id or self.id
        context_id = self._context_id(ctx)
        if self.user_a2a_url:  # the reference's human counterpart at a URL: nothing of the run's, nothing configured
            url = self.user_a2a_url.rstrip("/").removesuffix("/a2a")  # the agent's base URL, as records hold it
            user: dict | None = {"agent_name": self.user_agent_name or "human_agent", "a2a_url": url, "human": True}
        else:
            user = deployed_agent(ctx, self.user_agent_name) if self.user_agent_name else None
        started = time.monotonic()
        turns: list[dict[str, Any]] = []
        async with A2AClient(agent["a2a_url"], timeout=min(self.timeout_seconds, 60)) as client:
            # The run's --model wins over the step's (the reference's agent_model).
            config = {k: v for k, v in (("system_prompt", self.system_prompt),
                                        ("model", ctx.options.agent_model or self.model),
                                        ("output_format", self.output_format), ("max_turns", self.max_turns),
                                        ("model_params", self.model_params)) if v is not None}
            self._note_unsent(ctx, self.agent_name, config, await set_agent_config(client, await client.card(), config))
            if user is not None and not self.user_a2a_url:
                await self._configure_user(ctx, user)
            message: Any = self.parts if self.parts else self.prompt
            task = None
            for turn in range(self.max_conversation_turns):
                task = await self._ask(ctx, client, agent, message, context_id, self.timeout_seconds)
                context_id = task.raw.get("contextId") or context_id
                turns.append({"turn": turn, "prompt": _text_of(message), "response": task.text,
                              "state": task.state, "task_id": task.raw.get("id")})
                if task.state != "completed" or user is None or turn == self.max_conversation_turns - 1:
                    break
                decision = await self._decide(ctx, user, task.text, context_id, turn)
                if decision is not None and (decision["fired"] or decision["done"]):
                    # A trigger on the user simulator speaks (or ends the conversation) instead of its plan.
                    said = _text_of(decision.get("parts") or [])
                    turns[-1].update(user_reply=said or None, triggers_fired=decision["fired"])
                    if decision["done"]:
                        turns[-1]["ended_by_trigger"] = True
                        break
                    if said:
                        message = said
                        continue
                reply = await self._ask_user(ctx, user, task.text, context_id, turn)
                turns[-1]["user_reply"] = reply.text
                if _ends_conversation(reply):
                    turns[-1]["ended_by_user"] = True
                    break
                message = reply.text
            trajectory, trajectory_key = await self._trajectory(ctx, client, context_id, prompt_id)
        assert task is not None
        response = {
            "prompt_id": prompt_id, "step_id": self.id, "agent_name": self.agent_name,
            "prompt_text": _text_of(self.parts if self.parts else self.prompt), "response": task.text,
            "structured_output": task.structured_output, "a2a_context_id": context_id,
            "a2a_task_id": task.raw.get("id"), "state": task.state, "turns": turns,
            "tool_call_count": sum(1 for e in trajectory if isinstance(e, dict) and e.get("type") == "tool_call"),
            "model": ctx.options.agent_model or self.model, "trajectory": trajectory[:TRAJECTORY_INLINE_EVENTS],
            "agent_trajectory_object_key": trajectory_key, "duration_s": round(time.monotonic() - started, 4),
            "error_type": None, "error_code": None, "error_message": None,
        }
        error = task.error
        if error:
            response.update(error_type=error.get("error_type"), error_code=error.get("error_code"),
                            error_message=error.get("error_message"))
        ctx.state.setdefault("prompt_responses", []).append(response)
        ctx.emit("agent.prompted", {"agent_name": self.agent_name, "prompt_id": prompt_id, "state": task.state,
                                    "turns": len(turns)})
        if task.state != "completed":
            detail = (error or {}).get("error_message") or task.text or "no message"
            raise StepError(f"step {self.id!r}: agent {self.agent_name!r} ended in state {task.state!r}: {detail}")
        ctx.log(f"agent {self.agent_name!r} answered {prompt_id!r} in {len(turns)} turn(s)")

    async def _configure_user(self, ctx: "StepContext", user: dict) -> None:
        """The user simulator's model and reply format (the reference's user_model, user_output_format)."""
        from agentenv_local.agents.client import A2AClient

        config = {k: v for k, v in (("model", ctx.options.user_model or self.user_model),  # --user-model wins
                                    ("output_format", self.user_output_format))
                  if v is not None}
        if not config:
            return
        async with A2AClient(user["a2a_url"], timeout=60) as client:
            try:
                sent = await set_agent_config(client, await client.card(), config)
            except AgentenvError as exc:
                raise StepError(f"step {self.id!r}: configuring the user simulator {user['agent_name']!r} failed: "
                                f"{exc.message}", hint=exc.hint) from exc
        self._note_unsent(ctx, user["agent_name"], config, sent)

    def _note_unsent(self, ctx: "StepContext", agent_name: str, wanted: dict, sent: dict) -> None:
        """Say which config fields an agent's card does not take (they are not sent, as in the reference)."""
        unsent = [k for k in wanted if k not in sent]
        if unsent:
            ctx.log(f"step {self.id!r}: agent {agent_name!r} does not take {', '.join(unsent)} in its config "
                    "(agent-config/v1); not sent", level="warning")

    def _context_id(self, ctx: "StepContext") -> str | None:
        if not self.context_id:
            return None
        if self.context_id.startswith("prompt:"):
            wanted = self.context_id.removeprefix("prompt:")
            for response in reversed(ctx.state.get("prompt_responses", [])):
                if response.get("prompt_id") == wanted:
                    return response.get("a2a_context_id")
            raise StepError(f"step {self.id!r}: context_id names prompt {wanted!r}, which no earlier step made")
        return self.context_id

    async def _ask(self, ctx: "StepContext", client: Any, agent: dict, message: Any, context_id: str | None,
                   timeout: float) -> Any:
        try:
            task = await client.send(message, context_id=context_id)
            task = await client.wait(task, timeout=timeout, poll_interval=self.poll_interval_seconds)
        except AgentenvError as exc:
            raise StepError(f"step {self.id!r}: prompting agent {agent['agent_name']!r} failed: {exc.message}",
                            hint=exc.hint) from exc
        if task.timed_out:
            try:
                await client.cancel(task.raw.get("id"))
            except AgentenvError:
                pass
            raise StepError(f"step {self.id!r}: agent {agent['agent_name']!r} did not finish within {timeout:g} s; "
                            f"its last state: {task.state}" + (f" ({task.text})" if task.text else ""),
                            hint="raise timeout_seconds, or look at the agent's trajectory")
        return task

    async def _decide(self, ctx: "StepContext", user: dict, agent_text: str, context_id: str | None,
                      turn: int) -> dict | None:
        """Ask the user simulator's triggers (triggers/v1) about this turn, when register_agent_triggers set any."""
        if not (ctx.metadata.get("agent_triggers") or {}).get(user["agent_name"]):
            return None
        from agentenv_local.agents.client import A2AClient

        env_triggers = {}
        for env in ctx.state.get("deployed_envs", []):  # env trigger statuses, for env_trigger conditions
            statuses = (env.get("trigger_statuses") or {})
            if statuses:
                env_triggers[env.get("env_id")] = statuses
        async with A2AClient(user["a2a_url"], timeout=60) as client:
            try:
                return await client.triggers_decide(turn + 1, agent_text, context_id=f"user-{context_id}",
                                                    env_triggers=env_triggers or None)
            except AgentenvError as exc:
                raise StepError(f"step {self.id!r}: the user simulator's triggers could not decide turn "
                                f"{turn + 1}: {exc.message}") from exc

    async def _ask_user(self, ctx: "StepContext", user: dict, agent_text: str, context_id: str | None,
                        turn: int) -> Any:
        from agentenv_local.agents.client import A2AClient

        async with A2AClient(user["a2a_url"], timeout=60) as client:
            return await self._ask(ctx, client, user, agent_text, f"user-{context_id}" if context_id else None,
                                   self.user_agent_timeout_seconds)

    async def _trajectory(self, ctx: "StepContext", client: Any, context_id: str | None,
                          prompt_id: str) -> tuple[list, str | None]:
        if not context_id:
            return [], None
        try:
            page = await client.trajectory_get(context_id=context_id)
        except AgentenvError as exc:  # an agent without trajectory/v1: the reply still counts
            ctx.log(f"agent trajectory not available: {exc.message}", level="warning")
            return [], None
        events = list(page.get("trajectory") or page.get("events") or [])
        key = f"runs/{ctx.run_id}/trajectories/{prompt_id}.json"
        if ctx.store.objects.exists(key):  # this step runs again (a retry, a resume): objects are write-once
            key = f"runs/{ctx.run_id}/trajectories/{prompt_id}.{uuid.uuid4().hex[:8]}.json"
        ctx.store.objects.put(key, json.dumps(events, default=str).encode(), "application/json")
        return events, key


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and "text" in p)
    return ""


def _ends_conversation(task: Any) -> bool:
    data = task.data or {}
    return bool(data.get("end_conversation") or data.get("done"))
