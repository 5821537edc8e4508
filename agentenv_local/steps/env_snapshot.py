"""`snapshot_env`: `data/get` on every child of a deployed env -> an `environment_universe` artifact (one
`environment` per child, its file `<child>.json`), with the env's trajectory and changes as records when asked;
`store_snapshot` is shared with `agentenv env snapshot`. See docs/tasks/steps.md."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from agentenv_local import typed_artifacts as typed
from agentenv_local.errors import AgentenvError, StepError

from .env_control import EnvStep
from .env_gateway import EnvGateway, RpcError, message_of

if TYPE_CHECKING:
    from agentenv_local.tasks.context import StepContext

SNAPSHOT_FORMAT = "agentenv-env-snapshot/v1"


class SnapshotEnvStep(EnvStep):
    type: ClassVar[str] = "snapshot_env"
    artifact_ref_fields: ClassVar[tuple[str, ...]] = ("original_universe_artifact_id",)
    output_artifact_ref_fields: ClassVar[tuple[str, ...]] = ("snapshot_id",)

    snapshot_id: str | None = None
    include_env_trajectory: bool = False
    include_env_changes: bool = False
    export_timeout_seconds: float = Field(default=600, gt=0)
    # The reference's, accepted (cloud_only_fields says why each has no local meaning).
    env_step_id: str | None = None  # which deploy_env step's deployment of env_id (the latest when unset)
    env_instance_id: str | None = None
    gateway_url: str | None = None
    original_universe_artifact_id: str | None = None

    cloud_only_fields: ClassVar[dict[str, str]] = {
        "env_instance_id": "the reference snapshots an instance outside the run; a local run snapshots its "
                           "deployment of env_id",
        "gateway_url": "the reference snapshots a gateway outside the run; a local run snapshots its deployment "
                       "of env_id",
        "original_universe_artifact_id": "the reference's provenance link to the universe an env was seeded from",
    }

    def artifact_id(self, ctx: StepContext) -> str:
        return self.snapshot_id or f"{ctx.run_id}__{self.id}-env-snapshot"

    async def execute(self, ctx: StepContext) -> None:
        exported: dict[str, bytes] = {}  # service -> its <service>.json
        records: dict[str, tuple[str, bytes]] = {}  # metadata key -> (file name, bytes): not state
        async with EnvGateway(ctx, self.env_id, self.export_timeout_seconds, self.env_step_id) as gw:
            children = await gw.children()
            if not children:
                raise StepError(f"step {self.id!r}: env {self.env_id!r} lists no services to snapshot")
            for child in children:
                try:
                    result = await gw.rpc(child, "data/get")
                except RpcError as exc:
                    raise StepError(f"step {self.id!r}: {gw.where(child)} failed to export its data "
                                    f"(data/get): {exc.message}") from exc
                parts = (result or {}).get("parts") if isinstance(result, dict) else None
                if not isinstance(parts, list):
                    raise StepError(f"step {self.id!r}: data/get on {gw.where(child)} returned no parts list")
                exported[child] = snapshot_file(child, parts)
            if self.include_env_trajectory:
                status, text = await gw.request("GET", "/trajectory")
                if status >= 300:
                    raise StepError(f"step {self.id!r}: reading the trajectory of env {self.env_id!r} failed "
                                    f"({status}): {message_of(text)}")
                records["trajectory"] = ("trajectory.jsonl",
                                         (text if isinstance(text, str) else json.dumps(text)).encode())
            if self.include_env_changes:
                rows = await self._changes(ctx, gw)
                if rows is not None:
                    records["changes"] = ("changes.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n"
                                                                   for r in rows).encode())
        artifact_id = self.artifact_id(ctx)
        try:
            doc = store_snapshot(ctx.store, artifact_id, self.env_id, exported, records,
                                 origin={"run_id": ctx.run_id, "step_id": self.id},
                                 where=f"run {ctx.run_id}, step {self.id}")
        except AgentenvError as exc:
            raise StepError(f"step {self.id!r}: cannot store the snapshot {artifact_id!r}: {exc.message}") from exc
        ctx.metadata.setdefault("env_snapshotted_universes", {})[self.id] = {"id": doc["id"],
                                                                             "version": doc["version"]}
        ctx.log(f"snapshot of env {self.env_id} ({', '.join(children)}) stored as environment_universe "
                f"{doc['id']} v{doc['version']}")

    async def _changes(self, ctx: StepContext, gw: EnvGateway) -> list | None:
        """Every change row the gateway keeps (`GET /changes`, page by page); None when it keeps no changelog."""
        from agentenv_local.gateway.changes import PAGE_MAX_LIMIT

        rows: list = []
        after = 0
        while True:
            status, page = await gw.request("GET", "/changes", params={"after_id": after, "limit": PAGE_MAX_LIMIT})
            if status == 404 and not rows:
                ctx.log(f"env {self.env_id} keeps no changelog: the snapshot has no changes.jsonl")
                return None
            if status >= 300 or not isinstance(page, dict) or not isinstance(page.get("changes"), list):
                raise StepError(f"step {self.id!r}: reading the changes of env {self.env_id!r} failed "
                                f"({status}): {message_of(page)}")
            rows += page["changes"]
            if not page.get("has_more") or not page["changes"]:
                return rows
            after = page["changes"][-1]["id"]


def snapshot_file(service: str, parts: list) -> bytes:
    """A service's file in a snapshot: what its data/get returned, as `data/add` takes it back."""
    return json.dumps({"service": service, "parts": parts}, indent=1, ensure_ascii=False).encode()


def store_snapshot(store: Any, artifact_id: str, env_id: str, exported: dict[str, bytes],
                   records: dict[str, tuple[str, bytes]], *, origin: dict[str, Any], where: str) -> dict:
    """Store an env's exported state as the reference's snapshot does: one `environment` artifact per service
    (`<artifact_id>__<service>`, its file `<service>.json`), bundled in the `environment_universe` `artifact_id`
    (`records`, e.g. the trajectory, as its metadata). Used by snapshot_env and `agentenv env snapshot`."""
    marker = {"format": SNAPSHOT_FORMAT, "env_id": env_id, "services": list(exported), **origin}
    refs = [typed.ref_of(typed.put_environment(
        store, typed.derived_id(artifact_id, service), f"{service}.json", data, environment_name=service,
        description=f"{service} of env {env_id} ({where})", extra={"env_snapshot": marker}))
        for service, data in exported.items()]
    return typed.put_environment_universe(store, artifact_id, refs, metadata=records,
                                          description=f"snapshot of env {env_id} ({where})",
                                          extra={"env_snapshot": marker})
