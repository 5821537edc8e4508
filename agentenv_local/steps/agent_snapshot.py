"""`snapshot_agent_state` (save a deployed agent's conversation state as a file_artifact_universe over
snapshot/v1) and `restore_agent_snapshot`, which deploy_agent calls for `agent_snapshot_files_artifact_id` (load
such an artifact into the agent it just started).

The artifact's files are the snapshot/v1 objects by name (`trajectory`, and `workspace` when the agent saves
one); what they hold is the agent's own format (agents/snapshot.py). `metadata.agent_snapshots` gets
`{id, version, source_agent_name, source_context_id, capture_step_id}` per capture (what verify_a2a_snapshot
reads); `metadata.agent_loaded_snapshots` gets `{agent_name, id, version, context_id}` per restore.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from agentenv_local.errors import AgentenvError, StepError
from agentenv_local.tasks.step import Step

from .deployed_agents import deployed_agent, has_extension

if TYPE_CHECKING:
    from agentenv_local.tasks.context import StepContext

SNAPSHOT_URI = "urn:agentenv:snapshot/v1"


class SnapshotAgentStateStep(Step):
    """Save a deployed agent's conversation (that of `prompt_id`, else its latest prompt's) over snapshot/v1 as a
    file_artifact_universe."""

    type: ClassVar[str] = "snapshot_agent_state"
    artifact_ref_fields: ClassVar[tuple[str, ...]] = ("universe_artifact_id",)
    env_ref_fields: ClassVar[tuple[str, ...]] = ("env_id",)
    output_artifact_ref_fields: ClassVar[tuple[str, ...]] = ("artifact_id",)

    agent_name: str = Field(default="default-agent", min_length=1)
    prompt_id: str | None = None  # None: the agent's latest prompt
    artifact_id: str | None = None  # None: per run, `<run_id>__<step id>-agent-state`
    env_id: str | None = None
    universe_artifact_id: str | None = None
    timeout_seconds: float = Field(default=120, gt=0)

    def config_problems(self) -> list[str]:
        if self.env_id and self.universe_artifact_id:
            return ["env_id + universe_artifact_id: the per-service state capture beside the agent's snapshot is "
                    "not supported by agentenv yet; drop them (a snapshot_env step saves the env's state)"]
        return []

    async def execute(self, ctx: StepContext) -> None:
        from agentenv_local.agents import snapshot
        from agentenv_local.artifacts import BUNDLE, put_artifact

        record = deployed_agent(ctx, self.agent_name)
        if not has_extension(record.get("a2a_card"), "snapshot"):
            if self.artifact_id is None:  # the reference's per-run capture: an agent without it is skipped
                ctx.log(f"agent {self.agent_name!r} does not offer snapshot/v1 (its card does not list "
                        f"{SNAPSHOT_URI}): nothing saved", level="warning")
                return
            raise StepError(f"step {self.id!r}: agent {self.agent_name!r} does not support snapshot/v1 (its card "
                            f"does not list {SNAPSHOT_URI})",
                            hint="deploy an agent that offers it (the built-in scripted agent does)")
        response = next((r for r in reversed(ctx.state.get("prompt_responses", []))
                         if (r.get("prompt_id") == self.prompt_id if self.prompt_id
                             else r.get("agent_name") == self.agent_name)), None)
        if response is None:
            raise StepError(f"step {self.id!r}: " + (f"no prompt response {self.prompt_id!r} in this run"
                                                     if self.prompt_id else
                                                     f"agent {self.agent_name!r} has not been prompted in this run"),
                            hint="name the prompt_id of a prompt_agent step that ran before it")
        context_id = response.get("a2a_context_id")
        if not context_id:
            raise StepError(f"step {self.id!r}: prompt {self.prompt_id!r} recorded no a2a_context_id")
        try:
            objects = await snapshot.save(record["a2a_url"], context_id, timeout=self.timeout_seconds)
        except AgentenvError as exc:
            raise StepError(f"step {self.id!r}: agent {self.agent_name!r} did not save its snapshot: {exc.message}",
                            hint=exc.hint) from exc
        artifact_id = self.artifact_id or f"{ctx.run_id}__{self.id}-agent-state"
        try:
            doc = put_artifact(ctx.store, artifact_id, objects, artifact_type=BUNDLE,
                               description=f"snapshot of agent {self.agent_name!r}, conversation {context_id}",
                               extra={"source_agent_name": self.agent_name, "source_context_id": context_id,
                                      "capture_step_id": self.id, "run_id": ctx.run_id})
        except AgentenvError as exc:
            raise StepError(f"step {self.id!r}: cannot store the snapshot {artifact_id!r}: {exc.message}",
                            hint=exc.hint) from exc
        ctx.metadata.setdefault("agent_snapshots", []).append({
            "id": doc["id"], "version": doc["version"], "source_agent_name": self.agent_name,
            "source_context_id": context_id, "capture_step_id": self.id})
        ctx.log(f"saved agent {self.agent_name!r}'s conversation {context_id} as {doc['id']} v{doc['version']} "
                f"({', '.join(sorted(objects))})")


async def restore_agent_snapshot(ctx: StepContext, step: Any, url: str, card: dict) -> str:
    """Load `step.agent_snapshot_files_artifact_id` (+version) into the agent at `url`; the context id its
    conversation goes on under (recorded in metadata.agent_loaded_snapshots)."""
    from agentenv_local.agents import snapshot

    if not has_extension(card, "snapshot"):
        raise StepError(f"step {step.id!r}: cannot load snapshot {step.agent_snapshot_files_artifact_id!r}: agent "
                        f"{step.agent_name!r} does not support snapshot/v1 (its card does not list {SNAPSHOT_URI})",
                        hint="restore into the kind of agent that saved it")
    doc = ctx.artifact(step.agent_snapshot_files_artifact_id, step.agent_snapshot_files_artifact_version)
    files = ctx.artifact_files(doc)
    unknown = sorted(set(files) - set(snapshot.OBJECT_NAMES))
    if "trajectory" not in files or unknown:
        raise StepError(f"step {step.id!r}: artifact {doc['id']!r} v{doc['version']} is not an agent snapshot: "
                        + (f"unknown file(s) {', '.join(unknown)}" if unknown else "it has no 'trajectory' file"),
                        hint="use an artifact a snapshot_agent_state step saved")
    try:
        context_id = await snapshot.load(url, files, target_context_id=step.agent_snapshot_target_context_id)
    except AgentenvError as exc:
        raise StepError(f"step {step.id!r}: agent {step.agent_name!r} did not load snapshot {doc['id']!r} "
                        f"v{doc['version']}: {exc.message}", hint=exc.hint) from exc
    ctx.metadata.setdefault("agent_loaded_snapshots", []).append({
        "agent_name": step.agent_name, "id": doc["id"], "version": doc["version"], "context_id": context_id})
    ctx.log(f"agent {step.agent_name!r} loaded snapshot {doc['id']} v{doc['version']} as conversation {context_id}")
    return context_id
