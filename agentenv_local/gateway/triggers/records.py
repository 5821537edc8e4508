"""The engine's runtime records: one registered trigger (its spec, status, marks and fires) and a
parked action's timer; and the seeded generators a trigger draws its random times from."""

from __future__ import annotations

import asyncio
import hashlib
import random
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from .models import ActionWhen, ExpDist, StateWhen, TimeWhen, TriggerSpec

STATUSES = ("armed", "firing", "queued", "fired", "failed", "cancelled")
IN_FLIGHT = ("firing", "queued")


@dataclass
class TriggerRecord:
    id: str
    raw: dict                      # the canonical spec (compared on re-register, stored)
    spec: TriggerSpec
    status: str = "armed"
    detected_at: str | None = None
    fired_at: str | None = None
    fire_count: int = 0
    failure_count: int = 0
    last_failure_at: str | None = None
    attempts: int = 0
    # time triggers
    next_mark: datetime | None = None
    resolved: bool = False         # next_mark has been reckoned (on the clock arm `anchor_key` names)
    anchor_key: str | None = None
    retiring: bool = False         # the marks being fired are the last ones
    rng: random.Random | None = None
    delay_rngs: dict[int, random.Random] = field(default_factory=dict)
    # firing: the job being run and those waiting behind it
    job: dict | None = None
    pending: deque = field(default_factory=deque)
    task: asyncio.Task | None = None
    waiting: bool = False
    # state triggers
    evaluating: bool = False
    reeval: bool = False
    eval_task: asyncio.Task | None = None

    @property
    def type(self) -> str:
        return self.spec.when.type

    # ``spec.when`` typed for its kind; callers check ``type`` first.
    @property
    def action_when(self) -> ActionWhen:
        return cast(ActionWhen, self.spec.when)

    @property
    def state_when(self) -> StateWhen:
        return cast(StateWhen, self.spec.when)

    @property
    def time_when(self) -> TimeWhen:
        return cast(TimeWhen, self.spec.when)


@dataclass(eq=False)
class Timer:
    """A parked action: until the engine's virtual elapsed time reaches ``due``, or (``hours``) until
    an executor's working hours are open."""

    due: float | None = None
    hours: dict | None = None
    future: asyncio.Future | None = None


def stable_rng(*parts: Any) -> random.Random:
    """A generator seeded from ``parts`` the same way in every process (never Python's ``hash()``)."""
    digest = hashlib.blake2b("\x1f".join(str(p) for p in parts).encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "big"))


def seed_rngs(trig: TriggerRecord, seed: int) -> None:
    """Give ``trig`` its generators: one for exponential ``every`` gaps, one per exponential delay."""
    seed_every(trig, seed)
    trig.delay_rngs = {
        i: stable_rng(seed, trig.id, "delay", i, action.delay.seed)
        for i, action in enumerate(trig.spec.actions) if isinstance(action.delay, ExpDist)
    }


def seed_every(trig: TriggerRecord, seed: int) -> None:
    when = trig.spec.when
    if when.type == "time" and isinstance(when.every, ExpDist):
        trig.rng = stable_rng(seed, trig.id, "every", when.seed)
