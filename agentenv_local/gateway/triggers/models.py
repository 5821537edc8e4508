"""Typed models of a trigger spec's canonical form (what :func:`~.spec.normalize_trigger` answers):
the engine reads a trigger through them. They only parse: :mod:`.spec` has refused bad input, with
a message that names where, before it gets here."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .timeutil import DAYS


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)


Predicate = dict[str, Any]


class CheckStep(_Model):
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    extract: str | dict[str, Any] | None = None
    bind: str | None = None
    predicate: Predicate | None = None


class Check(_Model):
    steps: list[CheckStep]


class ExpDist(_Model):
    """A seeded exponential: ``{dist: "exp", mean: "PT1H"}`` (a delay carries its ``seed`` inside)."""

    dist: Literal["exp"]
    mean: str
    seed: int | None = None


class Unless(_Model):
    tool: str
    where: dict[str, Predicate] = Field(default_factory=dict)
    roles: list[str] | None = None


class ActionWhen(_Model):
    type: Literal["action"]
    tool: str
    where: dict[str, Predicate] = Field(default_factory=dict)
    roles: list[str] | None = None
    repeat: bool = False


class StateWhen(_Model):
    type: Literal["state"]
    check: Check
    roles: list[str] | None = None


class TimeWhen(_Model):
    type: Literal["time"]
    at: str | None = None
    after: str | None = None
    offset: str | None = None
    every: str | ExpDist | None = None
    count: int | None = None
    until: str | None = None
    seed: int | None = None
    unless: Unless | None = None


class WebsiteWhen(_Model):
    type: Literal["website"]
    app: str
    method: str | None = None
    path: Predicate | None = None
    status: Predicate | None = None
    where: dict[str, Predicate] = Field(default_factory=dict)
    roles: list[str] | None = None
    repeat: bool = False


class ToolAction(_Model):
    type: Literal["tool"]
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    as_: str | None = Field(default=None, alias="as")
    verify: Check | None = None
    delay: str | ExpDist | None = None


class PermissionAction(_Model):
    type: Literal["permission"]
    action: Literal["enable", "disable"]
    role: str
    tools: list[str] | Literal["*"]
    verify: Check | None = None
    delay: str | ExpDist | None = None


class NlAction(_Model):
    type: Literal["nl"]
    instruction: str
    executor: str | None = None
    verify: Check | None = None
    delay: str | ExpDist | None = None


class Barrier(_Model):
    at: Literal["provoking_call"]
    timeout_seconds: float | None = None


When = Annotated[ActionWhen | StateWhen | TimeWhen | WebsiteWhen, Field(discriminator="type")]
Action = Annotated[ToolAction | PermissionAction | NlAction, Field(discriminator="type")]


class TriggerSpec(_Model):
    """One trigger, typed. Build the wire form with ``model_dump(by_alias=True, exclude_none=True)``."""

    id: str
    when: When
    actions: list[Action]
    barrier: Barrier | None = None


class Hours(_Model):
    start: str
    end: str
    utc_offset: str | None = None
    time_zone: str | None = None
    days: list[str] = Field(default_factory=lambda: list(DAYS))


class Executor(_Model):
    a2a_url: str
    role: str
    timeout_seconds: float = 120.0
    hours: Hours | None = None


def parse_spec(canonical: dict) -> TriggerSpec:
    return TriggerSpec.model_validate(canonical)
