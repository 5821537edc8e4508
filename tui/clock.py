"""The TUI's clock, injectable: spinners, durations and "ago" read it, so snapshot tests can freeze it."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch."""


class SystemClock:
    def now(self) -> float:
        return time.time()


class FixedClock:
    """A clock that reads `at` until moved (tests, snapshots)."""

    def __init__(self, at: float):
        self.at = at

    def now(self) -> float:
        return self.at

    def advance(self, seconds: float) -> None:
        self.at += seconds
