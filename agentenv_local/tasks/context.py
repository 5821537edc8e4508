"""What a running step sees: the run's state, the stores, sandboxes, logging and reviews.

`state` is the run's evolving context in the reference's shape (deployed_sandboxes,
deployed_envs, deployed_agents, prompt_responses, metadata{seed, verifications, script_results,
failed_steps, ...}). Steps change it in place; the runner journals it after every step.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from agentenv_local.errors import AgentenvError, NotFoundError, StepError

from .options import RunOptions
from .sandbox_names import our_sandbox_type
from .scoring import aggregate

if TYPE_CHECKING:
    from agentenv_local.sandbox_api import Sandbox, SandboxProvider

    from .runner import RunServices
    from .step import Step


def new_state(seed: dict | None = None) -> dict:
    return {
        "deployed_sandboxes": [],
        "deployed_envs": [],
        "deployed_agents": [],
        "prompt_responses": [],
        "metadata": {"seed": dict(seed or {}), "verifications": {}, "script_results": {}, "failed_steps": [],
                     "loaded_file_artifact_universes": [], "torn_down_sandbox_ids": []},
    }


class StepContext:
    def __init__(self, services: "RunServices", run_id: str, step: "Step", state: dict,
                 cancelled: asyncio.Event | None = None, options: RunOptions | None = None):
        self.services = services
        self.run_id = run_id
        self.step = step
        self.state = state
        self.cancelled = cancelled or asyncio.Event()
        # The run's --sandbox/--agent/--keep; without them (a step test), what the state recorded.
        self.options = options if options is not None else RunOptions.from_stored(
            state.get("metadata", {}).get("user_overrides"))

    # -- shortcuts --------------------------------------------------------------------
    @property
    def store(self):
        return self.services.store

    @property
    def config(self):
        return self.services.config

    @property
    def metadata(self) -> dict:
        return self.state.setdefault("metadata", {})

    # -- events -----------------------------------------------------------------------
    def emit(self, kind: str, body: dict | None = None) -> None:
        mask = getattr(self.services, "mask", None)  # a step's output may hold what a secret resolved to
        body = mask(dict(body or {})) if mask is not None else (body or {})
        self.store.events.append(kind, body, run_id=self.run_id, step_id=self.step.id)

    def log(self, message: str, **fields: Any) -> None:
        self.emit("step.log", {"message": message, **fields})

    # -- sandboxes --------------------------------------------------------------------
    def default_sandbox_type(self) -> str:
        """The provider for steps that name none: the run's --sandbox, else [sandbox] default."""
        return self.sandbox_type_for(None)

    def chosen_sandbox_type(self, own: str | None, mode: str = "vm") -> str | None:
        """The provider a step asked for: the run's --sandbox (which overrides a step's own, as in the
        reference), else the step's `own` sandbox_type, each with the reference's spellings mapped onto
        ours for `mode`; None when neither is given."""
        wanted = self.options.sandbox or own
        if not wanted:
            return None
        try:
            name = our_sandbox_type(wanted, mode)
        except AgentenvError as exc:
            raise StepError(f"step {self.step.id!r}: {exc.message}", hint=exc.hint) from exc
        return self._first_usable(name) if "," in name or name == "auto" else name

    def sandbox_type_for(self, own: str | None, mode: str = "vm") -> str:
        """The one place that decides a step's provider: the run's --sandbox, else the step's own
        sandbox_type, else the configured [sandbox] default (a chain: its first usable provider)."""
        return self.chosen_sandbox_type(own, mode) or self._first_usable(None)

    def _first_usable(self, chain: str | None) -> str:
        name = self.services.default_sandbox_type(chain)
        notice = self.services.sandbox_notice
        if notice and not self.metadata.get("sandbox_notice_shown"):
            self.metadata["sandbox_notice_shown"] = True
            self.log(notice, level="warning")
        return name

    def sandbox_provider(self, name: str | None = None) -> "SandboxProvider":
        return self.services.sandbox_provider(name)

    def deployed_sandbox(self, name: str) -> dict:
        for record in self.state.get("deployed_sandboxes", []):
            if record.get("sandbox_name") == name and record.get("sandbox_id") not in self.metadata.get(
                    "torn_down_sandbox_ids", []):
                return record
        known = [r.get("sandbox_name") for r in self.state.get("deployed_sandboxes", [])]
        raise StepError(
            f"step {self.step.id!r}: no sandbox named {name!r} is deployed in this run"
            + (f" (deployed: {', '.join(known)})" if known else ""),
            hint="add a deploy_sandbox step with that sandbox_name and list it in depends_on",
        )

    async def sandbox(self, name: str) -> "Sandbox":
        record = self.deployed_sandbox(name)
        provider = self.sandbox_provider(record.get("sandbox_type"))
        try:
            return await provider.get(record["sandbox_id"])
        except NotFoundError as exc:
            raise StepError(f"sandbox {name!r} ({record['sandbox_id']}) is gone: {exc.message}") from exc

    # -- environments -----------------------------------------------------------------
    def deployed_env(self, env_id: str) -> dict:
        """The record a deploy_env step left in `state["deployed_envs"]` for `env_id` (the env's id,
        or the instance id). It holds `gateway_url`, `mcp_url`, `instance_id`, `environment_card`."""
        for record in reversed(self.state.get("deployed_envs", [])):
            if env_id in (record.get("env_id"), record.get("instance_id")) and not record.get("torn_down"):
                return record
        known = [r.get("env_id") for r in self.state.get("deployed_envs", []) if not r.get("torn_down")]
        raise StepError(
            f"step {self.step.id!r}: env {env_id!r} is not deployed in this run"
            + (f" (deployed: {', '.join(known)})" if known else ""),
            hint="add a deploy_env step for it and list that step in depends_on",
        )

    # -- artifacts --------------------------------------------------------------------
    def artifact(self, artifact_id: str, version: int | None = None) -> dict:
        """The stored artifact document (latest version unless pinned)."""
        doc = self.store.documents.find("artifacts", artifact_id, version)
        if doc is None:
            raise StepError(
                f"step {self.step.id!r}: artifact {artifact_id!r}" + (f" v{version}" if version else "") + " not found",
                hint="put it with `agentenv artifact put`, or add it to the bundle's artifacts/ folder",
            )
        return doc

    def artifact_files(self, doc: dict) -> dict[str, bytes]:
        """{relative path: bytes} of a file or file-bundle artifact."""
        from agentenv_local import artifacts

        return artifacts.read_files(self.store, doc)

    # -- verifications ----------------------------------------------------------------
    def record_verification(self, verifier_id: str, results: list[dict], aggregator: str = "all_pass") -> float:
        score = aggregate(results, aggregator)
        self.metadata.setdefault("verifications", {})[verifier_id] = {
            "score": score, "score_aggregator": aggregator, "results": results, "step_id": self.step.id,
        }
        self.emit("verification", {"verifier_id": verifier_id, "score": score,
                                   "passed": sum(1 for r in results if r.get("result")), "total": len(results)})
        return score

    # -- human review -----------------------------------------------------------------
    async def wait_for_review(self, label: str, timeout_seconds: float, poll_interval_seconds: float = 0.2) -> str:
        """Record a pending review, announce it, and wait for `continue` or `abort`."""
        review_id = f"{self.run_id}:{self.step.id}"
        self.store.records.save("reviews", review_id, {"run_id": self.run_id, "step_id": self.step.id,
                                                       "label": label, "status": "pending", "decision": None,
                                                       "requested_at": time.time()})
        self.emit("review.pending", {"review_id": review_id, "label": label})
        deadline = time.monotonic() + timeout_seconds
        while time.monotonic() < deadline:
            if self.cancelled.is_set():
                raise asyncio.CancelledError()
            record = self.store.records.find("reviews", review_id)
            decision = record and record["body"].get("decision")
            if decision:
                self.emit("review.decided", {"review_id": review_id, "decision": decision})
                return decision
            await self.services.review_signal(review_id, poll_interval_seconds)
        raise StepError(f"review {label!r} timed out after {timeout_seconds:g}s with no decision",
                        hint=f"answer it with `agentenv runs review {self.run_id} --continue` (or --abort)")
