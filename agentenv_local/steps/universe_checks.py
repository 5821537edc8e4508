"""Universe validators: does a universe (an env-state artifact) survive a load and an export?

- `verify_universe_load_export_roundtrip`: load the universe into the deployed env (reset first), export it
  (export 1), store export 1 as a universe artifact, load that back, export again (export 2). The universe
  must come back as it went in (load fidelity; for a `snapshot_env` artifact, whose files hold the parts each
  service exported) and export 2 must equal export 1 (idempotency). One row per service and check.
- `combine_universe_verdicts`: fold a judge's verdict (any verifier's, e.g. a `rubrics_verifier` that read
  the emitted bundle) into the round trip's, and stamp the result on the env once.

The verdict is `metadata.verifications["universe_compatibility"]`: rows, `passed`, and the reference's
`compatible`, `services: {name: {compatible, issues}}`, `exported_universe_artifact_id`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from agentenv_local import artifacts as artifact_types
from agentenv_local.errors import AgentenvError, StepError

from . import env_checks as checks
from .env_control import EnvStep
from .env_gates import record_gate, stamp_env
from .env_gateway import EnvGateway, RpcError
from .env_loading import load_into_env
from .env_snapshot import SNAPSHOT_FORMAT

if TYPE_CHECKING:
    from agentenv_local.tasks.context import StepContext


@dataclass
class _Load:
    """What `load_into_env` reads from a load_artifact step."""

    id: str
    env_id: str
    timeout_seconds: float
    environment_name: str | None = None
    reset_first: bool = True


def snapshot_services(ctx: StepContext, doc: dict) -> dict[str, list] | None:
    """{service: parts} of a `snapshot_env` artifact, or None for any other artifact."""
    if not isinstance(doc["body"].get("env_snapshot"), dict):
        return None
    out = {}
    for rel, data in ctx.artifact_files(doc).items():
        if rel.endswith(".json") and "/" not in rel:
            try:
                content = json.loads(data)
            except ValueError:
                continue
            if isinstance(content, dict) and isinstance(content.get("parts"), list):
                out[str(content.get("service") or rel[:-5])] = content["parts"]
    return out


def universe_key(artifact_id: str, version: Any) -> str:
    return f"{checks.GATE_UNIVERSE}:{artifact_id}@v{version}"


class VerifyUniverseLoadExportRoundtripStep(EnvStep):
    type: ClassVar[str] = "verify_universe_load_export_roundtrip"
    artifact_ref_fields: ClassVar[tuple[str, ...]] = ("universe_artifact_id",)

    universe_artifact_id: str = Field(min_length=1)
    universe_artifact_version: int | None = Field(default=None, ge=1)
    emit_file_artifact_universe: bool = False
    persist_result: bool = True
    timeout_seconds: float = Field(default=600, gt=0)

    def exported_id(self, ctx: StepContext) -> str:
        return f"{ctx.run_id}__{self.id}-export1"

    async def execute(self, ctx: StepContext) -> None:
        doc = ctx.artifact(self.universe_artifact_id, self.universe_artifact_version)
        originals = snapshot_services(ctx, doc)
        loader = _Load(self.id, self.env_id, self.timeout_seconds)
        await load_into_env(loader, ctx, [(doc, doc["body"].get("type", ""), ctx.artifact_files(doc))])
        services = sorted(originals) if originals else None
        export1 = await self._export(ctx, services)
        exported = self._store_export(ctx, export1)
        await load_into_env(loader, ctx, [(exported, artifact_types.BUNDLE, ctx.artifact_files(exported))])
        export2 = await self._export(ctx, sorted(export1))

        rows, per_service = [], {}
        for name in sorted(export1):
            issues = []
            if originals is not None:
                lost = checks.export_differences(originals.get(name), export1[name], "parts")
                rows.append(checks.row(f"service {name!r}: the universe loads and exports unchanged", not lost,
                                       "export 1 equals the universe" if not lost
                                       else "changed by load and export: " + "; ".join(lost), service=name))
                issues += [{"kind": "load", "where": d, "critical": True} for d in lost]
            drift = checks.export_differences(export1[name], export2.get(name), "parts")
            rows.append(checks.row(f"service {name!r}: export 1 loads back to the same export", not drift,
                                   "export 2 equals export 1" if not drift
                                   else "not idempotent: " + "; ".join(drift), service=name))
            issues += [{"kind": "idempotency", "where": d, "critical": True} for d in drift]
            per_service[name] = {"compatible": not issues, "issues": issues}
        extra: dict[str, Any] = {
            "compatible": all(s["compatible"] for s in per_service.values()), "services": per_service,
            "universe_artifact_id": doc["id"], "universe_artifact_version": doc["version"],
            "exported_universe_artifact_id": exported["id"],
        }
        if originals is None:
            extra["note"] = "not a snapshot_env artifact: only export 1 against export 2 is compared"
        if self.emit_file_artifact_universe:
            extra["file_artifact_universe_id"] = self._emit(ctx, doc, export1, export2)
        if self.persist_result:
            record_gate(ctx, self.env_id, checks.GATE_UNIVERSE, rows, **extra)
            stamp_env(ctx, self.env_id, universe_key(doc["id"], doc["version"]), {
                "passed": extra["compatible"], "run_id": ctx.run_id, "step_id": self.id, **extra})
        else:  # combine_universe_verdicts stamps the env: only the run's verification here
            ctx.record_verification(checks.GATE_UNIVERSE, rows)
            ctx.metadata["verifications"][checks.GATE_UNIVERSE].update(passed=extra["compatible"], **extra)

    async def _export(self, ctx: StepContext, services: list[str] | None) -> dict[str, list]:
        out = {}
        async with EnvGateway(ctx, self.env_id, self.timeout_seconds) as gw:
            for child in services if services is not None else await gw.children():
                try:
                    result = await gw.rpc(child, "data/get")
                except RpcError as exc:
                    raise StepError(f"step {self.id!r}: data/get on {gw.where(child)} failed: {exc.message}") \
                        from exc
                parts = result.get("parts") if isinstance(result, dict) else None
                if not isinstance(parts, list):
                    raise StepError(f"step {self.id!r}: data/get on {gw.where(child)} returned no parts list")
                out[child] = parts
        return out

    def _store_export(self, ctx: StepContext, export: dict[str, list]) -> dict:
        files = {f"{name}.json": json.dumps({"service": name, "parts": parts}, indent=1, ensure_ascii=False).encode()
                 for name, parts in export.items()}
        try:
            return artifact_types.put_artifact(
                ctx.store, self.exported_id(ctx), files, artifact_type=artifact_types.BUNDLE,
                description=f"export 1 of universe {self.universe_artifact_id} in env {self.env_id}",
                extra={"env_snapshot": {"format": SNAPSHOT_FORMAT, "env_id": self.env_id, "services": sorted(export),
                                        "run_id": ctx.run_id, "step_id": self.id}})
        except AgentenvError as exc:
            raise StepError(f"step {self.id!r}: cannot store export 1: {exc.message}") from exc

    def _emit(self, ctx: StepContext, doc: dict, export1: dict, export2: dict) -> str:
        """original/, export_1/ and export_2/ as one bundle, for a judge that diffs them as files."""
        files = {f"original/{rel}": data for rel, data in ctx.artifact_files(doc).items()}
        for folder, export in (("export_1", export1), ("export_2", export2)):
            for name, parts in export.items():
                files[f"{folder}/{name}.json"] = json.dumps({"service": name, "parts": parts}, indent=1,
                                                            ensure_ascii=False).encode()
        fid = f"{ctx.run_id}__{self.id}-fau"
        try:
            artifact_types.put_artifact(ctx.store, fid, files, artifact_type=artifact_types.BUNDLE,
                                        description=f"universe {doc['id']} v{doc['version']}: original and exports")
        except AgentenvError as exc:
            raise StepError(f"step {self.id!r}: cannot store the comparison bundle: {exc.message}") from exc
        return fid


class CombineUniverseVerdictsStep(EnvStep):
    type: ClassVar[str] = "combine_universe_verdicts"
    artifact_ref_fields: ClassVar[tuple[str, ...]] = ("universe_artifact_id",)
    records_only: ClassVar[bool] = True

    universe_artifact_id: str = Field(min_length=1)
    universe_artifact_version: int = Field(ge=1)
    judge_verifier_id: str = Field(min_length=1)

    async def execute(self, ctx: StepContext) -> None:
        verifications = ctx.metadata.setdefault("verifications", {})
        compat = verifications.get(checks.GATE_UNIVERSE)
        if not isinstance(compat, dict):
            ctx.log("combine_universe_verdicts: no universe_compatibility verdict in this run; nothing to combine",
                    level="warning")
            return
        judge = verifications.get(self.judge_verifier_id)
        if isinstance(judge, dict):
            judged = checks.gate_verdict(judge) == "passed"
            compat["agent_judge"] = {"verifier_id": self.judge_verifier_id, "passed": judged,
                                     "score": judge.get("score")}
            compat["compatible"] = bool(compat.get("compatible")) and judged
            compat["passed"] = bool(compat.get("passed")) and judged
            if not judged:
                compat.setdefault("results", []).append(checks.row(
                    f"the judge {self.judge_verifier_id!r} finds the universe compatible", False,
                    f"the judge scored {judge.get('score')}"))
                compat["score"] = 0.0
        else:  # persisted, but marked: this verdict was not gated by the judge
            compat["agent_judge_skipped"] = True
        stamp_env(ctx, self.env_id, universe_key(self.universe_artifact_id, self.universe_artifact_version), {
            "passed": compat.get("compatible"), "run_id": ctx.run_id, "step_id": self.id,
            **{k: v for k, v in compat.items() if k not in ("results", "score_aggregator", "step_id", "passed")}})
        ctx.log(f"universe {self.universe_artifact_id} v{self.universe_artifact_version} in env {self.env_id}: "
                + ("compatible" if compat.get("compatible") else "NOT compatible")
                + (" (no judge verdict)" if compat.get("agent_judge_skipped") else ""))
