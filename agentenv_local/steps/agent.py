"""`deploy_agent`: A2A agents in a run.

`deploy_agent` starts an agent (a built-in: `scripted`, `tool-loop`; a Python agent `file.py[:Class]` or
`pkg.mod:Class`; or an agent someone already serves, `a2a_url`), sets its identity and config over
agent-config/v1, registers the envs it may use over mcp-config/v1 (the env's gateway MCP URL with the
`AgentEnv-Role` header), installs skills, and records the reference's `DeployedAgent` in the run's
`deployed_agents`. Its teardown stops what it started.

The other agent steps: `deploy_human_agent` (human_agent.py), `prompt_agent` (prompt_agent.py); what they
share about the run's deployed agents is deployed_agents.py.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field

from agentenv_local.errors import AgentenvError, StepError
from agentenv_local.tasks.options import RunOptions
from agentenv_local.tasks.step import Step

from .deployed_agents import has_extension, set_agent_config, utc_text

if TYPE_CHECKING:
    from agentenv_local.tasks.context import StepContext


ROLE_HEADER = "AgentEnv-Role"
# Built-in agents that call the [model] endpoint themselves: deploy_agent sends them its base_url, key and model.
MODEL_AGENTS = ("tool-loop", "claude-code", "codex", "gemini", "opencode", "pi", "openhands")
_HOSTED: dict[str, Any] = {}  # instance id -> HostedAgent, for the teardown of agents this process started


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
        "network_policy": "the reference's VM network policy; a coding-CLI agent in Podman reaches only its gateway "
                          "and model endpoint (hosting/agents/agent_net.py), other agents this machine's network",
        "enable_agent_changelog": "the reference's cloud changelog of an agent's files",
        "agent_changelog_toolcall_position_exclusive": "the reference's cloud changelog of an agent's files",
        "agent_changelog_object_url": "the reference's cloud changelog of an agent's files",
        "sandbox_name": "deploy_agent starts its agent in the hub, a process or a container of its own; the "
                        "install_agent step puts a coding CLI into an existing sandbox",
        "enable_docker": "Docker inside the reference's agent VM; a local container agent has none",
    }

    def config_problems(self) -> list[str]:
        problems = []
        if self.a2a_url and not self.a2a_url.startswith(("http://", "https://")):
            problems.append(f"a2a_url: {self.a2a_url!r} is not an http(s) URL")
        if self.runtime == "subprocess" and self.a2a_url:
            problems.append("runtime: an agent at a2a_url is not started here; drop runtime")
        return problems

    def agent_id(self, config: Any, run_agent: str | None = None, solver: bool = False) -> str:
        """What to start: the run's --agent for the solver (a step deploying the agent a prompt_agent prompts,
        `solver`), else this step's a2a_agent_id, else the run's --agent, else [agents] default."""
        if run_agent and solver:
            return run_agent
        return self.a2a_agent_id or run_agent or config.get("agents.default") or "scripted"

    def _is_solver(self, ctx: "StepContext") -> bool:
        """Does this step deploy the run's solver (so --agent swaps its agent)? Read from the run's stored task."""
        if not ctx.options.agent or not (self.a2a_agent_id or self.a2a_url):
            return bool(ctx.options.agent)  # nothing to swap: --agent applies as to any step naming none
        from agentenv_local.agents.registry import solver_step_ids

        run = ctx.store.runs.get(ctx.run_id) or {}
        doc = ctx.store.documents.find("tasks", run.get("task_id") or "", run.get("task_version"))
        return doc is not None and self.id in solver_step_ids(doc["body"].get("steps") or [])

    def _needs_model(self, agent_id: str) -> bool:
        return agent_id in MODEL_AGENTS and not self.a2a_url and not self.config.get("base_url")

    def config_preflight(self, config: Any, overrides: dict | None = None) -> list[str]:
        if not self._needs_model(self.agent_id(config, RunOptions.from_stored(overrides).agent)):
            return []
        from agentenv_local.errors import ConfigError
        from agentenv_local.models import resolve_endpoint

        try:
            resolve_endpoint(config, self.model_role,
                             model=RunOptions.from_stored(overrides).model_for(self.model_role) or self.model)
        except ConfigError as exc:
            agent_id = self.agent_id(config, RunOptions.from_stored(overrides).agent)
            return [f"the {agent_id} agent needs a model: {exc.message}" + (f" ({exc.hint})" if exc.hint else "")]
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
        from agentenv_local.hosting.agents.hosted import (
            ContainerAgent,
            resolve_spec,
            runs_in_container,
            serve_in_hub,
            spawn,
        )

        for record in ctx.state.get("deployed_agents", []):
            if record.get("agent_name") == self.agent_name and not record.get("torn_down"):
                if record.get("step_id") == self.id:  # a retry of this step: replace its agent
                    await _stop_record(record)
                else:
                    raise StepError(f"step {self.id!r}: an agent named {self.agent_name!r} is already deployed "
                                    f"(by step {record.get('step_id')!r})", hint="give this one another agent_name")
        instance_id = f"agent-{uuid.uuid4().hex[:12]}"
        solver = self._is_solver(ctx)
        agent_id = self.agent_id(ctx.services.config, ctx.options.agent, solver)
        swapped = solver and bool(ctx.options.agent) and bool(self.a2a_agent_id or self.a2a_url)  # --agent's
        try:
            stored = registry.resolve(ctx.store, agent_id, None if swapped else self.a2a_agent_version)
            record_config = registry.resolved_config(ctx.services.config, agent_id, stored["config"])
        except AgentenvError as exc:
            raise StepError(f"step {self.id!r}: {exc.message}", hint=exc.hint) from exc
        # a bundle's agent whose spec is a model agent (claude-code, ...) gets the [model] endpoint as it would
        config = {**record_config, **self._agent_config(ctx, stored["spec"] if stored["spec"] in MODEL_AGENTS
                                                        else agent_id)}
        hosted = None
        a2a_url = (None if swapped else self.a2a_url) or stored["url"]
        if a2a_url:
            url, runtime = a2a_url.rstrip("/"), "url"
        else:
            runtime = "in_hub" if self.runtime == "auto" else self.runtime
            # A coding-CLI agent under --sandbox podman (or sandbox_type podman/docker) runs in its CLI-agent
            # image; the reference's `local` is this machine (issue 15: "on the host (local/process) or in Podman").
            if self.runtime == "auto" and runs_in_container(
                    stored["spec"], ctx.chosen_sandbox_type(self.sandbox_type, "vm")):
                runtime = "container"
            if stored.get("image") or stored.get("command"):  # they serve A2A themselves
                runtime = "container" if stored.get("image") else "command"
            try:
                if runtime == "command":
                    from agentenv_local.hosting.agents.command import spawn_command

                    hosted = await spawn_command(stored["command"], cwd=stored.get("cwd"),
                                                 env_vars={**stored["env_vars"], **self.env_vars},
                                                 log_path=ctx.services.paths.logs_dir / f"{instance_id}.log",
                                                 timeout=self.ready_timeout_seconds, name=agent_id)
                elif runtime == "container":
                    hosted = await self._start_container(ctx, stored, instance_id, self._reaches(ctx, config))
                elif runtime == "in_hub":
                    hosted = await serve_in_hub(resolve_spec(stored["spec"]), {})
                else:
                    hosted = await spawn(resolve_spec(stored["spec"]), {},
                                         env_vars={**stored["env_vars"], **self.env_vars},
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
                  **({"network": hosted.network} if isinstance(hosted, ContainerAgent) else {}),
                  "env_ids": list(self.env_ids), "on_host": runtime != "container", "step_id": self.id,
                  "created_at_utc": utc_text(created),
                  "expires_at_utc": utc_text(created + timedelta(seconds=self.ttl_seconds))}
        ctx.state.setdefault("deployed_agents", []).append(record)
        ctx.emit("agent.deployed", {"agent_name": self.agent_name, "a2a_url": url, "runtime": runtime})
        ctx.log(f"deployed agent {self.agent_name!r} ({agent_id}, {runtime}) at {url}",
                instance_id=instance_id)

    def _reaches(self, ctx: "StepContext", config: dict[str, Any]) -> list[str | None]:
        """The URLs the agent will be given: its model endpoint and its envs' gateway MCP URLs."""
        from .env_gateway import deployment

        return [config.get("base_url"), *(deployment(ctx, env_id, self.env_step_id)["mcp_url"]
                                          for env_id in self.env_ids)]

    async def _start_container(self, ctx: "StepContext", stored: dict, instance_id: str,
                               reaches: list[str | None]) -> Any:
        """The agent in a Podman container: the image's own A2A server (A2A_PORT), or for built-in and
        module agents `python -m agentenv_local.agents SPEC` in the env runtime image. A coding-CLI agent whose
        endpoints (`reaches`) are on this machine or https elsewhere gets no network but those
        (hosting/agents/agent_net.py)."""
        from agentenv_local.hosting.agents import agent_net
        from agentenv_local.hosting.agents.hosted import ContainerAgent, cli_agent_image
        from agentenv_local.sandbox_api import SandboxSpec

        # The run's --sandbox, else the step's own; a container agent needs a container provider: podman.
        provider = ctx.sandbox_provider(ctx.chosen_sandbox_type(self.sandbox_type, "container") or "podman")
        image, command, cli_image = self.image or stored.get("image"), None, None
        serve = ["python", "-m", "agentenv_local.agents", stored["spec"]]
        if image is None:  # a coding-CLI agent's own image (Node and its CLI), else the env runtime image
            cli_image = await asyncio.to_thread(cli_agent_image, provider, stored["spec"])
            image = cli_image or await asyncio.to_thread(provider.runtime_image)
            command = [*serve, "--host", "0.0.0.0", "--port", "8000"]
        mounts: dict[str, str] = {}
        if cli_image:  # the CLI itself, from the setup cache (the image holds Node, not the CLI)
            from agentenv_local.hosting.agents.cli_image import agent_mounts

            mounts = agent_mounts(stored["spec"])
        plan = agent_net.network_plan(reaches) if cli_image else None
        net_env: dict[str, str] = {}
        if plan is not None:  # network none; the relay carries the agent's A2A port, the plan's ports and tunnel
            inner = plan.agent_port
            command = agent_net.inside_command([*serve, "--host", "127.0.0.1", "--port", str(inner)],
                                               plan.inside_ports, inner)
            net_env = plan.env_vars
        spec = SandboxSpec(name=f"agent-{self.agent_name}", mode="container", image=image, command=command,
                           exposed_ports=[] if plan is not None else [8000], host_access=plan is None,
                           run_id=ctx.run_id, read_only_mounts=mounts,
                           env_vars={"A2A_HOST": "0.0.0.0", "A2A_PORT": "8000", **net_env, **stored["env_vars"],
                                     **self.env_vars},
                           labels={"agentenv.run": ctx.run_id, "agentenv.agent-instance": instance_id})
        sandbox = await provider.create(spec)
        if plan is not None:
            net = None
            try:  # the sandbox's /app: Podman's is a folder here
                net = agent_net.AgentNet(getattr(sandbox, "app_dir", None), plan.ports, plan.tunnels, plan.proxy_port)
                url = await net.start()
            except BaseException:
                if net is not None:
                    await net.close()
                await sandbox.terminate()
                raise
            agent = ContainerAgent(url=url, runtime="container", sandbox=sandbox, net=net)
        else:
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
            if endpoint.headers:  # write-only on the agent's side, as the key
                config["model_headers"] = dict(endpoint.headers)
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
