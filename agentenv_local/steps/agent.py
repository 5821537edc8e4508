"""`deploy_agent`, `deploy_human_agent` and `prompt_agent`: A2A agents in a run.

`deploy_agent` starts an agent (a built-in: `scripted`, `tool-loop`; a Python agent `file.py[:Class]` or
`pkg.mod:Class`; or an agent someone already serves, `a2a_url`), sets its identity and config over
agent-config/v1, registers the envs it may use over mcp-config/v1 (the env's gateway MCP URL with the
`AgentEnv-Role` header), installs skills, and records the reference's `DeployedAgent` in the run's
`deployed_agents`. Its teardown stops what it started.

`prompt_agent` sends a prompt, polls the task to its end (or its timeout: then the step fails with the
agent's last state), reads the agent's trajectory (trajectory/v1) into the object store, and appends a
`PromptResponse` to `prompt_responses`. With `max_conversation_turns` > 1 and a user simulator
(`user_agent_name`, any deployed agent, such as a scripted one), the simulator answers each reply until it
ends the conversation (a data part `{"end_conversation": true}` or `{"done": true}`) or the turns run out.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, model_validator

from agentenv_local.errors import AgentenvError, StepError
from agentenv_local.tasks.options import RunOptions
from agentenv_local.tasks.step import Step

if TYPE_CHECKING:
    from agentenv_local.tasks.context import StepContext

ROLE_HEADER = "AgentEnv-Role"
TRAJECTORY_INLINE_EVENTS = 2000  # more stays in the object store only
# model_params keys the agent sets itself (the reference's reserved litellm arguments)
MODEL_PARAMS_RESERVED = frozenset({"model", "messages", "api_key", "api_base", "user", "metadata", "timeout",
                                   "response_format"})
_HOSTED: dict[str, Any] = {}  # instance id -> HostedAgent, for the teardown of agents this process started


def _utc(ts: datetime) -> str:
    return ts.isoformat().replace("+00:00", "Z")


def deployed_agent(ctx: "StepContext", name: str) -> dict:
    for record in reversed(ctx.state.get("deployed_agents", [])):
        if record.get("agent_name") == name and not record.get("torn_down"):
            return record
    known = [r.get("agent_name") for r in ctx.state.get("deployed_agents", []) if not r.get("torn_down")]
    raise StepError(f"step {ctx.step.id!r}: no agent named {name!r} is deployed in this run"
                    + (f" (deployed: {', '.join(known)})" if known else ""),
                    hint="add a deploy_agent step with that agent_name and list it in depends_on")


def has_extension(card: dict | None, name: str) -> bool:
    """Does the card list the `urn:agentenv:<name>/v…` extension?"""
    return any(str(e.get("uri", "")).startswith(f"urn:agentenv:{name}/")
               for e in ((card or {}).get("capabilities") or {}).get("extensions") or [] if isinstance(e, dict))


async def set_agent_config(client: Any, card: dict, config: dict[str, Any]) -> dict[str, Any]:
    """Send the agent-config fields the card says the agent takes (the reference's rule: only those); an agent
    without agent-config/v1 gets none. Returns what was sent."""
    if not config or not has_extension(card, "agent-config"):
        return {}
    supported = None
    for ext in (card.get("capabilities") or {}).get("extensions") or []:
        if isinstance(ext, dict) and str(ext.get("uri", "")).startswith("urn:agentenv:agent-config/"):
            methods = (ext.get("params") or {}).get("methods") or {}
            supported = ((methods.get("set") or {}).get("request") or {}).get("supported")
    if supported is not None:
        config = {k: v for k, v in config.items() if k in supported}
    if config:
        await client.agent_config_set(**config)
    return config


class DeployAgentStep(Step):
    """Start (or attach to) an A2A agent and connect it to the run's envs."""

    type: ClassVar[str] = "deploy_agent"
    deploys: ClassVar[bool] = True
    env_ref_fields: ClassVar[tuple[str, ...]] = ("env_ids",)
    # agent_snapshot_files_artifact_id is no artifact_ref_field on purpose: the reference's agent validator restores a
    # snapshot that a snapshot_agent_state step of the same task saves, so it need not exist before the run
    agent_ref_fields: ClassVar[tuple[str, ...]] = ("a2a_agent_id",)

    a2a_agent_id: str | None = None  # None: the run's --agent, else [agents] default (scripted)
    a2a_agent_version: int | None = None
    agent_name: str = Field(default="default-agent", min_length=1)
    agent_description: str | None = None
    a2a_url: str | None = None  # an agent that is already served: attach, start nothing
    runtime: Literal["auto", "in_hub", "subprocess", "container"] = "auto"
    image: str | None = None  # runtime "container": the agent's image (default: the env runtime image)
    env_ids: list[str] = Field(default_factory=list)
    role: str | None = None
    system_prompt: str | None = None
    model: str | None = None
    model_role: Literal["agent", "user", "judge"] = "agent"  # whose [model] endpoint a tool-loop agent uses
    config: dict[str, Any] = Field(default_factory=dict)  # more agent-config fields (a scripted agent's plan)
    skills: list[str | dict[str, Any]] = Field(default_factory=list)  # skill ids or inline skills (agent_extras)
    env_vars: dict[str, str] = Field(default_factory=dict)
    sandbox_type: str | None = None
    ttl_seconds: int = Field(default=7200, ge=60, le=1_209_600)
    ready_timeout_seconds: float = Field(default=60, gt=0)
    metadata: dict[str, Any] = Field(default_factory=dict)
    env_step_id: str | None = None  # env_ids' deployments by that deploy_env step (the latest when unset)
    # The reference's, accepted (cloud_only_fields says why each has no local meaning).
    disk_size_gb: float | None = None
    litellm_base_url: str | None = None
    cpu: float | None = None
    memory_mb: int | None = None
    agent_snapshot_files_artifact_id: str | None = None
    agent_snapshot_files_artifact_version: int | None = None
    agent_snapshot_target_context_id: str | None = None
    network_policy: dict[str, Any] | None = None
    enable_agent_changelog: bool = False
    agent_changelog_toolcall_position_exclusive: int | None = None
    agent_changelog_object_url: str | None = None
    sandbox_name: str | None = None
    enable_docker: bool = False

    cloud_only_fields: ClassVar[dict[str, str]] = {
        "disk_size_gb": "the reference's VM disk; a local agent runs in-hub, as a process or a container "
                        "without a disk quota",
        "litellm_base_url": "the reference's model proxy; a local agent's endpoint is the [model] config "
                            "(or the agent's config base_url)",
        "cpu": "the reference's VM size; local agents get no CPU limit",
        "memory_mb": "the reference's VM size; local agents get no memory limit",
        "network_policy": "the reference's VM network policy; local agents use the machine's network",
        "enable_agent_changelog": "the reference's cloud changelog of an agent's files",
        "agent_changelog_toolcall_position_exclusive": "the reference's cloud changelog of an agent's files",
        "agent_changelog_object_url": "the reference's cloud changelog of an agent's files",
        "sandbox_name": "installing an agent into an existing sandbox is not done locally yet",
        "enable_docker": "Docker inside the reference's agent VM; a local container agent has none",
    }

    def config_problems(self) -> list[str]:
        problems = []
        if self.a2a_url and not self.a2a_url.startswith(("http://", "https://")):
            problems.append(f"a2a_url: {self.a2a_url!r} is not an http(s) URL")
        if self.runtime == "subprocess" and self.a2a_url:
            problems.append("runtime: an agent at a2a_url is not started here; drop runtime")
        return problems

    def agent_id(self, config: Any, run_agent: str | None = None) -> str:
        """What to start: this step's a2a_agent_id, else the run's --agent, else [agents] default."""
        return self.a2a_agent_id or run_agent or config.get("agents.default") or "scripted"

    def _needs_model(self, agent_id: str) -> bool:
        return agent_id == "tool-loop" and not self.a2a_url and not self.config.get("base_url")

    def config_preflight(self, config: Any, overrides: dict | None = None) -> list[str]:
        if not self._needs_model(self.agent_id(config, RunOptions.from_stored(overrides).agent)):
            return []
        from agentenv_local.errors import ConfigError
        from agentenv_local.models import resolve_endpoint

        try:
            resolve_endpoint(config, self.model_role,
                             model=RunOptions.from_stored(overrides).model_for(self.model_role) or self.model)
        except ConfigError as exc:
            return [f"the tool-loop agent needs a model: {exc.message}" + (f" ({exc.hint})" if exc.hint else "")]
        return []

    def lost_on_resume(self, state: dict, services: Any) -> bool:
        """Its agent is gone: one this hub process did not start (an earlier hub's) is not served any more,
        or serves without the setup and connections the run gave it; an agent at a2a_url is someone else's."""
        for record in state.get("deployed_agents", []):
            if record.get("step_id") == self.id and not record.get("torn_down"):
                return record.get("runtime") != "url" and record.get("instance_id") not in _HOSTED
        return False

    async def execute(self, ctx: "StepContext") -> None:
        from agentenv_local.agents import registry
        from agentenv_local.agents.client import A2AClient
        from agentenv_local.hosting.agents.hosted import resolve_spec, serve_in_hub, spawn

        for record in ctx.state.get("deployed_agents", []):
            if record.get("agent_name") == self.agent_name and not record.get("torn_down"):
                if record.get("step_id") == self.id:  # a retry of this step: replace its agent
                    await _stop_record(record)
                else:
                    raise StepError(f"step {self.id!r}: an agent named {self.agent_name!r} is already deployed "
                                    f"(by step {record.get('step_id')!r})", hint="give this one another agent_name")
        instance_id = f"agent-{uuid.uuid4().hex[:12]}"
        agent_id = self.agent_id(ctx.services.config, ctx.options.agent)
        try:
            stored = registry.resolve(ctx.store, agent_id, self.a2a_agent_version)
        except AgentenvError as exc:
            raise StepError(f"step {self.id!r}: {exc.message}", hint=exc.hint) from exc
        config = {**stored["config"], **self._agent_config(ctx, agent_id)}
        hosted = None
        a2a_url = self.a2a_url or stored["url"]
        if a2a_url:
            url, runtime = a2a_url.rstrip("/"), "url"
        else:
            spec = resolve_spec(stored["spec"])
            runtime = "in_hub" if self.runtime == "auto" else self.runtime
            try:
                if runtime == "container":
                    hosted = await self._start_container(ctx, stored, instance_id)
                elif runtime == "in_hub":
                    hosted = await serve_in_hub(spec, {})
                else:
                    hosted = await spawn(spec, {}, env_vars={**stored["env_vars"], **self.env_vars},
                                         log_path=ctx.services.paths.logs_dir / f"{instance_id}.log",
                                         timeout=self.ready_timeout_seconds)
            except AgentenvError as exc:
                raise StepError(f"step {self.id!r}: could not start agent {agent_id!r}: {exc.message}",
                                hint=exc.hint) from exc
            _HOSTED[instance_id] = hosted
            url = hosted.url
        try:
            async with A2AClient(url, timeout=self.ready_timeout_seconds) as client:
                card = await client.card()
                if "base_url" in config:  # a model proxy on this machine, seen from a container agent
                    config = {**config, "base_url": _seen_from(hosted, config["base_url"])}
                await set_agent_config(client, card, config)
                if self.env_ids and not has_extension(card, "mcp-config"):
                    raise StepError(f"step {self.id!r}: agent {self.agent_name!r} does not offer mcp-config/v1, so "
                                    "it cannot be given env_ids", hint="drop env_ids, or use an agent that does")
                from .env_gateway import deployment

                for env_id in self.env_ids:
                    env = deployment(ctx, env_id, self.env_step_id)  # env_step_id: that deploy_env step's
                    headers = {ROLE_HEADER: self.role} if self.role else {}
                    await client.mcp_config_add(_seen_from(hosted, env["mcp_url"]), headers=headers,
                                                name=_server_name(env_id))
                from .agent_extras import resolve_skills

                for skill in resolve_skills(ctx, self.skills):
                    await client.skill_add(skill["name"], skill["description"], skill["skill_md"])
                if self.agent_snapshot_files_artifact_id:  # a snapshot_agent_state artifact (agent_snapshot.py)
                    from .agent_snapshot import restore_agent_snapshot

                    await restore_agent_snapshot(ctx, self, url, card)
        except AgentenvError as exc:
            if hosted is not None:
                await hosted.stop()
                _HOSTED.pop(instance_id, None)
            raise StepError(f"step {self.id!r}: agent {self.agent_name!r} at {url} did not accept its setup: "
                            f"{exc.message}", hint=exc.hint) from exc
        created = datetime.now(timezone.utc)
        record = {"agent_name": self.agent_name, "a2a_agent_id": agent_id,
                  "a2a_agent_version": stored["version"], "a2a_url": url, "api_url": url,
                  "a2a_card": card, "instance_id": instance_id, "role": self.role, "runtime": runtime,
                  "pid": hosted.pid if hosted else None,
                  "sandbox_id": getattr(hosted, "sandbox_id", None),
                  "sandbox_type": getattr(hosted, "sandbox_type", None),
                  "env_ids": list(self.env_ids), "on_host": runtime != "container", "step_id": self.id,
                  "created_at_utc": _utc(created),
                  "expires_at_utc": _utc(created + timedelta(seconds=self.ttl_seconds))}
        ctx.state.setdefault("deployed_agents", []).append(record)
        ctx.emit("agent.deployed", {"agent_name": self.agent_name, "a2a_url": url, "runtime": runtime})
        ctx.log(f"deployed agent {self.agent_name!r} ({agent_id}, {runtime}) at {url}",
                instance_id=instance_id)

    async def _start_container(self, ctx: "StepContext", stored: dict, instance_id: str) -> Any:
        """The agent in a Podman container: the image's own A2A server (A2A_PORT), or for built-in and
        module agents `python -m agentenv_local.agents SPEC` in the env runtime image."""
        from agentenv_local.hosting.agents.hosted import ContainerAgent
        from agentenv_local.sandbox_api import SandboxSpec

        # The run's --sandbox, else the step's own; a container agent needs a container provider: podman.
        provider = ctx.sandbox_provider(ctx.chosen_sandbox_type(self.sandbox_type, "container") or "podman")
        image, command = self.image, None
        if image is None:
            image = await asyncio.to_thread(provider.runtime_image)
            command = ["python", "-m", "agentenv_local.agents", stored["spec"], "--host", "0.0.0.0", "--port", "8000"]
        spec = SandboxSpec(name=f"agent-{self.agent_name}", mode="container", image=image, command=command,
                           exposed_ports=[8000], host_access=True, run_id=ctx.run_id,
                           env_vars={"A2A_HOST": "0.0.0.0", "A2A_PORT": "8000", **stored["env_vars"], **self.env_vars},
                           labels={"agentenv.run": ctx.run_id, "agentenv.agent-instance": instance_id})
        sandbox = await provider.create(spec)
        agent = ContainerAgent(url=sandbox.tunnel_urls["8000"], runtime="container", sandbox=sandbox)
        try:
            await agent.wait_ready(self.ready_timeout_seconds)
        except BaseException:
            await agent.stop()
            raise
        return agent

    def _agent_config(self, ctx: "StepContext", agent_id: str) -> dict[str, Any]:
        config = {"name": self.agent_name, **self.config}
        if self._needs_model(agent_id):  # the endpoint of the model role, key included (sent to the agent only)
            from agentenv_local.models import resolve_endpoint

            endpoint = resolve_endpoint(ctx.services.config, self.model_role, model=self._model(ctx))
            config.update(model=endpoint.model, base_url=endpoint.base_url, api=endpoint.api,
                          max_retries=endpoint.max_retries, request_timeout_s=endpoint.timeout_s)
            if endpoint.api_key:
                config["api_key"] = endpoint.api_key
        for key, value in (("description", self.agent_description), ("role", self.role),
                           ("system_prompt", self.system_prompt), ("model", self._model(ctx))):
            if value is not None:
                config[key] = value
        return config

    def _model(self, ctx: "StepContext") -> str | None:
        """The model this agent runs on: the run's model for its role (--model, --user-model, --judge-model)
        over the step's own `model`."""
        return ctx.options.model_for(self.model_role) or self.model

    async def teardown(self, ctx: "StepContext") -> None:
        for record in ctx.state.get("deployed_agents", []):
            if record.get("step_id") == self.id and not record.get("torn_down"):
                await _stop_record(record)
                ctx.log(f"stopped agent {record['agent_name']!r}")


def _seen_from(hosted: Any, url: str) -> str:
    """`url` as an agent in a container reaches it: this machine's loopback is elsewhere from in there."""
    address = getattr(hosted, "host_address", None)
    if not address:
        return url
    for loopback in ("127.0.0.1", "localhost"):
        url = url.replace(f"//{loopback}:", f"//{address}:").replace(f"//{loopback}/", f"//{address}/")
    return url


def _server_name(env_id: str) -> str:
    """The name an agent knows an env's MCP server by: the env id's last segment (`@local/b/mail` -> `mail`)."""
    import re

    name = re.sub(r"[^A-Za-z0-9._-]", "-", env_id.rstrip("/").rsplit("/", 1)[-1]).lstrip("-._") or "env"
    return name[:128]


async def _stop_record(record: dict) -> None:
    hosted = _HOSTED.pop(record.get("instance_id") or "", None)
    if hosted is not None:
        await hosted.stop()
    elif record.get("pid"):  # started by a hub that is gone: its process may still run
        import os
        import signal

        try:
            os.kill(record["pid"], signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
    record["torn_down"] = True


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
