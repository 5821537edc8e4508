"""An artifact loaded into a deployed env (for the load_artifact step): each file to `data/add` on the service it
belongs to; a `snapshot_env` artifact goes back service by service (the file-bundle snapshots earlier versions
stored still load)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agentenv_local import artifacts as artifact_types
from agentenv_local.errors import AgentenvError, StepError

from .env_gateway import EnvGateway, RpcError

if TYPE_CHECKING:
    from agentenv_local.tasks.context import StepContext


def _file_part(rel: str, data: bytes) -> dict:
    import base64
    import mimetypes

    mime = mimetypes.guess_type(rel)[0] or "application/octet-stream"
    return {"kind": "file", "file": {"bytes": base64.b64encode(data).decode("ascii"), "mimeType": mime, "name": rel}}


def _snapshot_parts(doc: dict, rel: str, data: bytes) -> tuple[str, list] | None:
    """(service, parts) when `rel` is a service file of a snapshot_env artifact, else None."""
    snap = doc["body"].get("env_snapshot")
    if not isinstance(snap, dict) or not rel.endswith(".json") or "/" in rel:
        return None
    try:
        content = json.loads(data)
    except ValueError:
        return None
    if isinstance(content, dict) and isinstance(content.get("parts"), list):
        return str(content.get("service") or rel[:-5]), content["parts"]
    return None


ENVIRONMENT_KINDS = (artifact_types.ENVIRONMENT, artifact_types.ENVIRONMENT_UNIVERSE)


def _environment_plan(step: Any, ctx: StepContext, doc: dict, children: list[str]) -> list[tuple[dict, str, str, list]]:
    """An environment (universe) artifact's plan: each member's file to the server its environment_name names
    (a snapshot's `<service>.json` as the parts that server exported; any other file as one FilePart)."""
    try:
        if artifact_types.canonical_type(doc["body"].get("type")) == artifact_types.ENVIRONMENT_UNIVERSE:
            members = artifact_types.universe_members(ctx.store, doc)
        else:
            members = [artifact_types.environment_file(ctx.store, doc)]
    except AgentenvError as exc:
        raise StepError(f"step {step.id!r}: cannot read artifact {doc['id']!r} v{doc['version']}: {exc.message}",
                        hint=exc.hint) from exc
    plan: list[tuple[dict, str, str, list]] = []
    for m in members:
        if step.environment_name and m.environment_name != step.environment_name:
            continue
        if m.environment_name not in children:
            raise StepError(f"step {step.id!r}: artifact {m.artifact_id!r} seeds {m.environment_name!r}, which env "
                            f"{step.env_id!r} does not have (its services: {', '.join(children)})",
                            hint="put the environment artifact again with --environment-name set to one of them")
        snap = _snapshot_parts(doc, m.filename, m.data)
        parts = snap[1] if snap is not None else [_file_part(m.filename, m.data)]
        plan.append((doc, f"{m.environment_name}/{m.filename}", m.environment_name, parts))
    return plan


async def _accepts(gw: EnvGateway, child: str, mime: str) -> bool:
    """Whether a child takes a file part of this type on data/add (its card's operations and intake/v1)."""
    if "data/add" not in await gw.operations(child):
        return False
    intake = await gw.extension(child, "urn:agentenv:intake/v1")
    adds = ((intake or {}).get("params") or {}).get("add")
    if not isinstance(adds, list):
        return True
    for entry in adds:
        if isinstance(entry, dict) and entry.get("part") == "file":
            types = entry.get("mimeTypes")
            if not types or mime in types:
                return True
    return False


async def load_into_env(step: Any, ctx: StepContext, loads: list[tuple[dict, str, dict[str, bytes]]]) -> None:
    """Each artifact file -> `data/add` on the env's services.

    A `snapshot_env` artifact goes back service by service (`<service>.json` holds the parts that service
    exported). Any other file becomes an inline FilePart sent to: `environment_name`'s service if set; the
    service a file is named after (`<service>.json` or `<service>/...`); the env-level data plane when the env
    has one service; else every service whose card accepts that file type.
    """
    async with EnvGateway(ctx, step.env_id, step.timeout_seconds, getattr(step, "env_step_id", None)) as gw:
        children = await gw.children()
        if step.environment_name and step.environment_name not in children:
            raise StepError(f"step {step.id!r}: env {step.env_id!r} has no service {step.environment_name!r} "
                            f"(its services: {', '.join(children)})")
        plan: list[tuple[dict, str, str | None, list]] = []  # (doc, rel, child or None = env-level, parts)
        for doc, _kind, files in loads:
            if artifact_types.canonical_type(_kind) in ENVIRONMENT_KINDS:
                plan += _environment_plan(step, ctx, doc, children)
                continue
            for rel, data in sorted(files.items()):
                snap = _snapshot_parts(doc, rel, data)
                if snap is not None:
                    service, parts = snap
                    if step.environment_name and service != step.environment_name:
                        continue
                    if service not in children:
                        raise StepError(f"step {step.id!r}: snapshot {doc['id']!r} holds service {service!r}, "
                                        f"which env {step.env_id!r} does not have (its services: "
                                        f"{', '.join(children)})")
                    plan.append((doc, rel, service, parts))
                    continue
                if isinstance(doc["body"].get("env_snapshot"), dict):
                    continue  # a snapshot's other files (trajectory.jsonl) are records, not state
                part = _file_part(rel, data)
                stem = rel.split("/", 1)[0].removesuffix(".json")
                if step.environment_name:
                    targets: list[str | None] = [step.environment_name]
                elif stem in children and len(children) > 1:
                    targets = [stem]
                elif len(children) == 1:
                    targets = [None]
                else:
                    mime = part["file"]["mimeType"]
                    targets = [c for c in children if await _accepts(gw, c, mime)]
                    if not targets:
                        raise StepError(f"step {step.id!r}: no service of env {step.env_id!r} accepts {rel!r} "
                                        f"({mime}) on data/add", hint="set environment_name to pick the service")
                for target in targets:
                    plan.append((doc, rel, target, [part]))
        if not plan:
            raise StepError(f"step {step.id!r}: nothing in the artifact(s) goes to env {step.env_id!r}"
                            + (f" service {step.environment_name!r}" if step.environment_name else ""))
        if step.reset_first:
            reset = sorted({c for _, _, c, _ in plan}, key=lambda c: c or "")
            for child in reset:
                try:
                    await gw.rpc(child, "data/reset")
                except RpcError as exc:
                    raise StepError(f"step {step.id!r}: data/reset on {gw.where(child)} failed: {exc.message}") \
                        from exc
        for doc, rel, child, parts in plan:
            try:
                await gw.rpc(child, "data/add", {"parts": parts})
            except RpcError as exc:
                raise StepError(f"step {step.id!r}: data/add of {rel!r} (artifact {doc['id']!r} v{doc['version']}) "
                                f"into {gw.where(child)} failed: {exc.message}") from exc
    for doc, kind, files in loads:
        services = sorted({c or children[0] for d, _, c, _ in plan if d is doc})
        ctx.metadata.setdefault("loaded_file_artifact_universes", []).append({
            "id": doc["id"], "version": doc["version"], "artifact_type": kind, "env_id": step.env_id,
            "environment_name": step.environment_name, "services": services, "files": sorted(files)})
        ctx.log(f"loaded {len(files)} file(s) of {doc['id']} v{doc['version']} into env {step.env_id} "
                f"({', '.join(services) or 'none'})")
