"""`install_agent`: install a coding-CLI agent into a sandbox the task already runs.

The reference's step installs an agent into an existing VM or container from its card's install/v1 commands
and starts it there. Ours installs the agent's CLI (claude-code, codex, gemini, opencode, pi) from the setup
cache into the named sandbox (a process sandbox or a Podman container: hosting/agents/cli_install.py), with
Node when the sandbox lacks it, so later steps there (`run_code`, a sandbox command) can run it at
/app/.agents/bin/EXECUTABLE. The run's `installed_agents` records where each one went.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from agentenv_local.errors import AgentenvError, StepError
from agentenv_local.tasks.step import Step

if TYPE_CHECKING:
    from agentenv_local.tasks.context import StepContext

DEFAULT_CLI_AGENT = "claude-code"  # the reference's default agent, when neither the run nor the config names a CLI


class InstallAgentStep(Step):
    """Install a coding-CLI agent's CLI into a running sandbox."""

    type: ClassVar[str] = "install_agent"
    agent_ref_fields: ClassVar[tuple[str, ...]] = ("a2a_agent_id",)

    sandbox_name: str = Field(min_length=1)
    a2a_agent_id: str | None = None  # None: the run's --agent, else [agents] default if a CLI agent, else claude-code
    a2a_agent_version: int | None = None
    agent_name: str = Field(default="default-agent", min_length=1)
    workspace_dir: str | None = None  # recorded: the folder the CLI is meant to work in
    # The reference's, accepted (cloud_only_fields says why each has no local meaning).
    container_name: str | None = None
    a2a_port: int | None = None

    cloud_only_fields: ClassVar[dict[str, str]] = {
        "container_name": "the reference installs into a Docker container inside its VM; locally the CLI goes "
                          "into the named sandbox itself",
        "a2a_port": "the reference starts the installed agent's A2A server on that port; locally the CLI is "
                    "installed for later steps to run, and deploy_agent starts A2A agents",
    }

    def _is_solver(self, ctx: "StepContext") -> bool:
        """Does this step install the agent a prompt_agent prompts (so the run's --agent replaces its agent, as the
        reference's solver_steps does)? Read from the run's stored task."""
        from agentenv_local.agents.registry import solver_step_ids

        run = ctx.store.runs.find(ctx.run_id) or {}
        doc = ctx.store.documents.find("tasks", run.get("task_id") or "", run.get("task_version"))
        return doc is not None and self.id in solver_step_ids(doc["body"].get("steps") or [])

    def _agent(self, ctx: "StepContext") -> tuple[str, dict[str, Any]]:
        """(agent id, its registry record): the run's --agent for the solver's step, else this step's agent, else
        --agent, else [agents] default when that is a coding-CLI agent, else claude-code."""
        from agentenv_local.agents import registry
        from agentenv_local.hosting.agents.cli_image import CLI_BINARIES

        run_agent = ctx.options.agent
        swapped = bool(run_agent and self.a2a_agent_id and self._is_solver(ctx))
        agent_id = (run_agent if swapped else self.a2a_agent_id) or run_agent
        version = None if swapped else self.a2a_agent_version
        if agent_id is None:
            default = ctx.services.config.get("agents.default")
            try:
                named = registry.resolve(ctx.store, default) if isinstance(default, str) else None
            except AgentenvError:
                named = None
            agent_id = default if named is not None and named.get("spec") in CLI_BINARIES else DEFAULT_CLI_AGENT
        try:
            return str(agent_id), registry.resolve(ctx.store, str(agent_id), version)
        except AgentenvError as exc:
            raise StepError(f"step {self.id!r}: {exc.message}", hint=exc.hint) from exc

    async def execute(self, ctx: "StepContext") -> None:
        from agentenv_local.hosting.agents.cli_image import CLI_BINARIES
        from agentenv_local.hosting.agents.cli_install import install_cli

        from .collect_artifacts import target_sandbox

        agent_id, stored = self._agent(ctx)
        spec = stored.get("spec")
        if spec not in CLI_BINARIES:
            raise StepError(f"step {self.id!r}: agent {agent_id!r} is not a coding-CLI agent install_agent can "
                            "install", hint="name one of: " + ", ".join(CLI_BINARIES))
        name, sandbox = await target_sandbox(ctx, self.sandbox_name, None)
        try:
            done = await install_cli(sandbox, str(spec))
        except AgentenvError as exc:
            raise StepError(f"step {self.id!r}: installing {agent_id!r} into sandbox {name!r} failed: "
                            f"{exc.message}", hint=exc.hint) from exc
        record = {"agent_name": self.agent_name, "a2a_agent_id": agent_id, "sandbox_name": name,
                  "sandbox_id": sandbox.sandbox_id, "command": done["command"], "version": done["version"],
                  "node": done["node"], "workspace_dir": self.workspace_dir, "step_id": self.id}
        installed = ctx.state.setdefault("installed_agents", [])
        installed[:] = [r for r in installed if r.get("step_id") != self.id]  # a retry replaces its record
        installed.append(record)
        ctx.log(f"installed {agent_id} ({done['version']}) into sandbox {name!r} at {done['command']}")
