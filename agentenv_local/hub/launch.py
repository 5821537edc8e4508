"""Starting runs through the hub, at most `concurrency` at once: what `agentenv run`, `task run`,
`eval run` (cli/_drive.py) and the TUI's start screen share.

    launcher = Launcher(SessionSubmitter(session), concurrency=4)
    launcher.launch([Job("@local/b/t", 1, options=RunOptions(sandbox="process"))])
    ... launcher.finished([run_id]) or launcher.on_events(events) frees a slot; launcher.fill() starts more
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentenv_local.tasks.options import RunOptions

from .methods import HubMethods

# A run in one of these states holds no slot.
FINAL_STATUSES = ("passed", "failed", "error", "cancelled", "interrupted")


@dataclass
class Job:
    """One run to start: a stored task (a version, else its latest), a seed row, and the run's options."""

    task_id: str
    version: int | None = None
    seed: dict | None = None
    label: str = ""
    group_id: str | None = None
    options: RunOptions = field(default_factory=RunOptions)
    labels: dict | None = None  # kept on the run record (the eval that started it)


class Submitter(Protocol):
    def submit(self, job: Job) -> dict: ...


class SessionSubmitter:
    """Submits jobs over a hub session (`attach`: the hub keeps the runs going only while we are connected)."""

    def __init__(self, session: Any, attach: bool = False):
        self.session, self.attach = session, attach

    def submit(self, job: Job) -> dict:
        return submit(self.session, job, attach=self.attach)


def submit(session: Any, job: Job, attach: bool = False) -> dict:
    """`runner.submit` on the hub: the queued run record."""
    return HubMethods(session).submit_run(job.task_id, job.version, job.seed, job.group_id, job.options,
                                          attach=attach, labels=job.labels)


class Launcher:
    """Starts jobs through a `Submitter`, at most `concurrency` in flight, in the order given.

    `finished(run_ids)` or `on_events(events)` frees slots; `fill()` then starts what waits. Thread-safe
    (the TUI launches from worker threads while events arrive on another)."""

    def __init__(self, source: Submitter, concurrency: int = 4):
        self.source = source
        self.concurrency = max(1, concurrency)
        self.pending: list[Job] = []
        self.in_flight: set[str] = set()
        self.started: list[str] = []  # run ids in the order their jobs were started
        self.jobs: dict[str, Job] = {}  # run id -> its job
        self.runs: dict[str, dict] = {}  # run id -> its record as submitted
        self._lock = threading.Lock()

    def launch(self, jobs: list[Job], concurrency: int | None = None) -> list[str]:
        """Queue `jobs` and start as many as there are free slots; the run ids started now."""
        with self._lock:
            if concurrency is not None:
                self.concurrency = max(1, concurrency)
            self.pending += jobs
        return self.fill()

    def adopt(self, run_id: str) -> None:
        """Count a run started elsewhere (a resumed one) against the slots."""
        with self._lock:
            self.in_flight.add(run_id)

    def finished(self, run_ids: Iterable[str]) -> bool:
        """Free the slots of these runs; True when jobs wait for a slot."""
        with self._lock:
            self.in_flight.difference_update(run_ids)
            return bool(self.pending) and len(self.in_flight) < self.concurrency

    def on_events(self, events: list[dict]) -> bool:
        """Free the slots of the runs these hub events say are over; True when jobs wait for a slot."""
        return self.finished([e["run_id"] for e in events if e.get("run_id") in self.in_flight and _ends_run(e)])

    def fill(self) -> list[str]:
        started = []
        while True:
            with self._lock:
                if not self.pending or len(self.in_flight) >= self.concurrency:
                    break
                job = self.pending.pop(0)
            run = self.source.submit(job)
            with self._lock:
                if run.get("status") not in FINAL_STATUSES:
                    self.in_flight.add(run["run_id"])
                self.started.append(run["run_id"])
                self.jobs[run["run_id"]] = job
                self.runs[run["run_id"]] = run
            started.append(run["run_id"])
        return started


def _ends_run(event: dict) -> bool:
    kind = event.get("kind") or ""
    return kind in ("run.finished", "run.interrupted") or (
        kind.startswith("run.") and (event.get("body") or {}).get("status") in FINAL_STATUSES)
