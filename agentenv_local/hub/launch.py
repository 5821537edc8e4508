"""Starting runs through the hub, at most `concurrency` at once: what `agentenv run`, `task run`,
`eval run` (cli/_drive.py), the TUI's start screen and the rollouts API share. `drive_jobs` runs a list of jobs
to their end, telling a `RunWatcher` as they go.

    launcher = Launcher(SessionSubmitter(session), concurrency=4)
    launcher.launch([Job("@local/b/t", 1, options=RunOptions(sandbox="process"))])
    ... launcher.finished([run_id]) or launcher.on_events(events) frees a slot; launcher.fill() starts more
"""

from __future__ import annotations

import threading
import time
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


class RunWatcher:
    """What `drive_jobs` tells its caller as runs go; every hook is optional (override what you need)."""

    # The event kinds `event` wants (a name ending in "." is every kind it starts); None: every kind. The hub
    # then sends only those (and the runs' own ends): a `support` episode has some 60 events, most of them
    # env and agent calls that a progress display never shows.
    event_kinds: tuple[str, ...] | None = None

    def started(self, run_id: str, run: dict, job: Job | None) -> None:
        """A run was submitted (job None: a resumed run)."""

    def event(self, event: dict) -> None:
        """A hub event of a run in flight."""

    def finished(self, run: dict) -> None:
        """A run ended; `run` is its final record."""

    def idle(self) -> None:
        """No event came for a while (a progress display redraws here)."""

    def cancelling(self) -> None:
        """Ctrl-C or `stop`: the runs in flight are being cancelled."""


class HubGone(Exception):
    """The hub stopped while runs were going."""


def drive_jobs(session: Any, jobs: list[Job], concurrency: int = 4, watcher: RunWatcher | None = None,
               resume_run_ids: Iterable[str] = (), stop: threading.Event | None = None) -> list[dict]:
    """Run every job (and resume these runs), at most `concurrency` at once, and return the final run records
    in job order (resumed runs last). Ctrl-C, or `stop` being set, cancels the runs in flight (their sandboxes
    are torn down), waits up to 10 s for them to end, and raises KeyboardInterrupt."""
    watcher = watcher or RunWatcher()
    hub = HubMethods(session)
    stream = session.subscribe(kinds=None if watcher.event_kinds is None else ["run.", *watcher.event_kinds])
    launcher = Launcher(SessionSubmitter(session, attach=True), concurrency)
    order: dict[str, int] = {}
    finished: dict[str, dict] = {}

    def start_waiting() -> None:
        started = launcher.fill()
        first = len(launcher.started) - len(started)
        for index, run_id in enumerate(started, start=first):
            order[run_id] = index
            watcher.started(run_id, launcher.runs[run_id], launcher.jobs[run_id])

    def settle() -> None:
        done = [r for r in launcher.in_flight if r in finished]
        launcher.finished(done)
        for run_id in done:
            watcher.finished(finished[run_id])

    try:
        for i, run_id in enumerate(resume_run_ids):
            run = hub.resume_run(run_id, attach=True)
            order[run["run_id"]] = len(jobs) + i
            launcher.adopt(run["run_id"])
            watcher.started(run["run_id"], run, None)
        launcher.pending += jobs
        start_waiting()
        while launcher.in_flight:
            if stop is not None and stop.is_set():
                raise KeyboardInterrupt
            event = stream.get(timeout=0.5)
            if event is None:
                watcher.idle()
                _catch_missed(session, launcher.in_flight, finished)
            elif event.get("kind") == "hub.gone":
                raise HubGone("the hub stopped while runs were going")
            elif event.get("run_id") in launcher.in_flight:
                watcher.event(event)
                if event["kind"] == "run.finished":
                    finished[event["run_id"]] = session.store.runs.get(event["run_id"])
            settle()
            start_waiting()
    except KeyboardInterrupt:
        watcher.cancelling()
        _cancel_in_flight(session, hub, launcher, finished)
        raise
    finally:
        stream.close()
    return [finished[r] for r in sorted(finished, key=lambda r: order[r])]


def _cancel_in_flight(session: Any, hub: HubMethods, launcher: Launcher, finished: dict[str, dict]) -> None:
    for run_id in list(launcher.in_flight):
        try:
            hub.cancel_run(run_id)
        except Exception:  # already over, or the hub is going: the wait below tells
            pass
    deadline = time.monotonic() + 10
    while launcher.in_flight and time.monotonic() < deadline:
        _catch_missed(session, launcher.in_flight, finished)
        launcher.finished(list(finished))
        time.sleep(0.05)


def _catch_missed(session: Any, in_flight: set[str], finished: dict) -> None:
    """Events are live-only; if one was missed, the run record still tells the truth."""
    for run_id in list(in_flight):
        if run_id in finished:
            continue
        run = session.store.runs.get(run_id)
        if run["status"] in FINAL_STATUSES:
            finished[run_id] = run
