"""The reference's env types that cannot run offline: `computer_driver`, `website` and `service_db`. Their
records are accepted as written (a bundle that has one loads, and is stored); deploying one fails with one line
saying what it needs that is not here. Registered in the `agentenv_local.env_types` group like ours."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, model_validator

from .env_types import EnvType, LookUp, env_type
from .instance import DeployError
from .records import McpServerEnv


class UndeployableRecord(McpServerEnv):
    """A reference env's table, kept as written: the keys its type takes are the reference's, not ours."""

    model_config = ConfigDict(extra="allow")

    @model_validator(mode="after")
    def _one_source(self) -> UndeployableRecord:  # replaces McpServerEnv's check: no server source here
        return self


# Each record's `type` is its own Literal, which the env_types group requires; McpServerEnv's is "mcp_server".
class ComputerDriverRecord(UndeployableRecord):
    type: Literal["computer_driver"] = "computer_driver"  # type: ignore[assignment]


class WebsiteRecord(UndeployableRecord):
    type: Literal["website"] = "website"  # type: ignore[assignment]


class ServiceDbRecord(UndeployableRecord):
    type: Literal["service_db"] = "service_db"  # type: ignore[assignment]


class UndeployableType(EnvType):
    """An env type whose records are kept but never deployed: `needs` says what a deploy would need."""

    needs: ClassVar[str]

    def servers(self, env_id: str, doc: dict, env: Any, look_up: LookUp) -> list[tuple[dict, McpServerEnv]]:
        raise DeployError(f"env {env_id}: cannot deploy a {self.name} env here: {self.needs}",
                          hint="its record is stored as written; it deploys with the reference (agent-env)")


class ComputerDriverType(UndeployableType):
    name = "computer_driver"
    record = ComputerDriverRecord
    needs = ("it runs inside a computer (a desktop sandbox with a display its driver captures and sends input "
             "to), and agentenv cannot create computers")


class WebsiteType(UndeployableType):
    name = "website"
    record = WebsiteRecord
    needs = ("it serves a web app from its backend and frontend docker images to a browser, and agentenv builds "
             "no images from registries and runs no browser env")


class ServiceDbType(UndeployableType):
    name = "service_db"
    record = ServiceDbRecord
    needs = ("it serves a PostgreSQL database with the reference's db-web and db-mcp images, which agentenv does "
             "not have offline")


def deploy_refusal(env_type_name: str) -> str | None:
    """What a deploy of an env of this type would say it needs, or None when the type deploys here."""
    found = env_type(env_type_name)
    return f"cannot deploy a {env_type_name} env here: {found.needs}" if isinstance(found, UndeployableType) else None


def undeployable_env_problems(bundle: Any, step_classes: Mapping[str, Any]) -> list[str]:
    """One line per task step field that deploys one of `bundle`'s envs of a type that cannot deploy here
    (a bundles.loader.Bundle; `step_classes`: the step types by name), so a dry run says it as a run would."""
    by_id = {entry.id: entry for entry in bundle.envs.values()}
    problems = []
    for task in bundle.tasks.values():
        for raw in task.steps:
            cls = step_classes.get(raw.get("type") or "")
            for field_name in getattr(cls, "env_ref_fields", ()):
                value = raw.get(field_name)
                for ref in value if isinstance(value, list) else [value]:
                    entry = by_id.get(ref) if isinstance(ref, str) else None
                    if entry is not None and (refusal := deploy_refusal(entry.env.type)):
                        problems.append(f"tasks/{task.source.name}: step {raw.get('id')!r}: field {field_name!r}: "
                                        f"envs/{entry.name}: {refusal}")
    return problems
