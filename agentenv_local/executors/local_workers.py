"""The hub's worker processes (`[executor] kind = "workers"`, `--executor workers`): runs execute outside the hub,
one worker process per core by default, so a batch uses every core of the machine while the hub only records.

Each worker (`worker_process.py`) is started on first need with one end of a socket pair and talks to the hub
over a `Link`: its store calls are answered here, on the link's reader thread, through the hub's own dispatch
restricted to the store methods a worker may call (in order, so a worker reads its own writes), and its writes
arrive as batched notes. A run goes to the worker with the fewest runs. A worker that dies (killed, crashed)
loses no run: each run it had that is not final is resumed from its journal on another worker, up to
`[executor] max_attempts` workers in all, as a lost Ray worker's runs are.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from agentenv_local.errors import HubError, NotFoundError

from .link import Link, LinkClosed
from .run_worker import config_snapshot, is_worker_store_method

log = logging.getLogger(__name__)

FINAL = ("passed", "failed", "error", "cancelled", "interrupted")
STOP_GRACE_S = 20.0  # how long stopping workers may take to interrupt their runs and stop what those deployed
READY_TIMEOUT_S = 60.0


@dataclass
class _Worker:
    number: int
    proc: subprocess.Popen
    link: Link
    runs: dict[str, int] = field(default_factory=dict)  # run id -> attempt
    ready: threading.Event = field(default_factory=threading.Event)
    gone: bool = False
    last_write: Future | None = None  # its notes written last, on the store's writer thread


def coalesce_run_updates(notes: list[list]) -> list[list]:
    """One message's notes with each run's updates merged into one, at the place of its last: the message is
    written whole under the store's lock, so no reader sees the steps between. A worker's update of a run carries
    whole top-level values from its copy of the record (the `steps` map entire), so later values win."""
    def mergeable(note: list) -> bool:
        method, args, kwargs = note
        return method == "runs.update" and len(args) == 2 and not kwargs and isinstance(args[1], dict)

    last_update = {note[1][0]: index for index, note in enumerate(notes) if mergeable(note)}
    if len(last_update) == sum(map(mergeable, notes)):
        return notes  # at most one update per run: nothing to merge
    merged: dict[str, dict] = {}
    for note in notes:
        if mergeable(note):
            run_id, changes = note[1]
            merged[run_id] = {**merged.get(run_id, {}), **changes}
    return [[note[0], [note[1][0], merged[note[1][0]]], {}] if mergeable(note) else note
            for index, note in enumerate(notes)
            if not mergeable(note) or last_update[note[1][0]] == index]


def default_size() -> int:
    """One worker per core this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


class WorkerPool:
    """`hub`: what the pool needs of the hub (`call`, `store`, `config`, `paths`, `session_id`)."""

    def __init__(self, hub: Any, size: int = 0, max_attempts: int = 3):
        self.hub = hub
        self.size = size or default_size()
        self.max_attempts = max_attempts
        self._snapshot = config_snapshot(hub.config)
        self._workers: list[_Worker] = []
        self._numbers = iter(range(1, 1 << 30))
        self._lock = threading.Lock()
        self._closing = False

    # -- the workers -----------------------------------------------------------------------------------------
    def _spawn(self) -> _Worker:
        ours, theirs = socket.socketpair()
        number = next(self._numbers)
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentenv_local.executors.worker_process", str(theirs.fileno())],
            pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, cwd=str(self.hub.paths.state_dir.parent),
            start_new_session=True)  # a Ctrl-C meant for the command stops the hub, which stops its workers
        theirs.close()
        worker: _Worker
        link = Link(ours, lambda method, args, kwargs: self._answer(worker, method, args, kwargs),
                    name=f"hub <- worker {number}", on_close=lambda: self._lost(worker),
                    handle_notes=lambda notes: self._write_notes(worker, notes))
        worker = _Worker(number, proc, link)
        link.start()
        threading.Thread(target=proc.wait, name=f"agentenv-worker-{number}-reap", daemon=True).start()
        return worker

    def _ensure_workers(self) -> list[_Worker]:
        """The live workers, started up to the pool's size (all at once: each takes about a second)."""
        with self._lock:
            if self._closing:
                raise HubError("the hub is stopping", hint="run the command again: it starts a new hub")
            self._workers = [w for w in self._workers if not w.gone]
            while len(self._workers) < self.size:
                self._workers.append(self._spawn())
            return list(self._workers)

    def _write_notes(self, worker: _Worker, notes: list[list]) -> None:
        """A worker's writes, on the store's writer thread: with every other worker's written meanwhile, in one
        transaction (one commit for many rows); its next call waits for them (`_answer`)."""
        notes = coalesce_run_updates(notes)
        writer = getattr(self.hub.store, "writer", None)
        if writer is None:
            self._apply(worker, notes)
        else:
            worker.last_write = writer.submit(self._apply, worker, notes)

    def _apply(self, worker: _Worker, notes: list[list]) -> None:
        for method, args, kwargs in notes:
            try:
                if method == "worker.ready":
                    worker.ready.set()
                elif method == "worker.run_done":  # after the run's last writes: they came first
                    with self._lock:
                        worker.runs.pop(args[0], None)
                else:
                    self._store_call(method, args, kwargs)
            except Exception as exc:  # nobody waits for a note: say it here, and write the others
                log.warning("worker %d: %s failed: %s", worker.number, method, exc)

    def _answer(self, worker: _Worker, method: str, args: list, kwargs: dict) -> Any:
        """A worker's call, on its link's reader thread."""
        if method == "worker.hello":
            return {"config": self._snapshot, "state_dir": str(self.hub.paths.state_dir),
                    "owner": self.hub.session_id}
        pending = worker.last_write
        if pending is not None:
            try:  # a worker reads its own writes: what it wrote before this call is committed first
                pending.result(60)
            except Exception:  # already logged by _apply; the call itself says what is wrong now
                pass
        return self._store_call(method, args, kwargs)

    def _store_call(self, method: str, args: list, kwargs: dict) -> Any:
        if not is_worker_store_method(method):
            raise HubError(f"{method} is not callable from a worker")
        return self.hub.call(method, args, kwargs)

    # -- the runs ---------------------------------------------------------------------------------------------
    def dispatch(self, run_id: str, attempt: int = 0) -> None:
        """Hand a run the hub recorded to the least busy worker; a later attempt resumes it from its journal."""
        workers = self._ensure_workers()
        with self._lock:
            worker = min(workers, key=lambda w: (not w.ready.is_set(), len(w.runs)))
            worker.runs[run_id] = attempt
        if not worker.ready.wait(READY_TIMEOUT_S):
            raise HubError(f"worker {worker.number} did not start within {READY_TIMEOUT_S:.0f} s",
                           hint="see the hub's log (`agentenv up` in a terminal shows it)")
        try:
            worker.link.call("run.start", [run_id, attempt])
        except Exception:
            with self._lock:
                worker.runs.pop(run_id, None)
            raise

    def _owner(self, run_id: str) -> _Worker | None:
        with self._lock:
            return next((w for w in self._workers if run_id in w.runs and not w.gone), None)

    def owns(self, run_id: str) -> bool:
        return self._owner(run_id) is not None

    def cancel(self, run_id: str, reason: str = "cancelled", interrupted: bool = False) -> bool:
        worker = self._owner(run_id)
        if worker is None:
            return False
        try:
            return bool(worker.link.call("run.cancel", [run_id, reason, interrupted]))
        except LinkClosed:
            return False

    def notify_review(self, review_id: str) -> None:
        with self._lock:
            workers = [w for w in self._workers if not w.gone]
        for worker in workers:
            worker.link.note("review.notify", [review_id])

    def env_instance_call(self, method: str, args: list, kwargs: dict) -> tuple[bool, Any]:
        """Ask the workers for the env instance `args[0]`: (True, the answer) from the one running it, else
        (False, None)."""
        with self._lock:
            workers = [w for w in self._workers if not w.gone and w.ready.is_set()]
        for worker in workers:
            try:
                return True, worker.link.call(method, args, kwargs)
            except (LinkClosed, NotFoundError):  # gone, or not the worker that runs it
                continue
        return False, None

    def in_flight(self) -> list[str]:
        with self._lock:
            return [run_id for w in self._workers if not w.gone for run_id in w.runs]

    # -- losing and stopping workers ---------------------------------------------------------------------------
    def _lost(self, worker: _Worker) -> None:
        """A worker's link closed: it exited or was killed. Its unfinished runs go on elsewhere."""
        with self._lock:
            worker.gone = True
            runs, worker.runs = dict(worker.runs), {}
            closing = self._closing
        worker.ready.set()  # nobody waits for a worker that is gone
        if closing:
            return
        for run_id, attempt in runs.items():
            try:
                self._resume_elsewhere(run_id, attempt, f"worker {worker.number} (pid {worker.proc.pid}) exited")
            except Exception:
                log.exception("run %s: its worker was lost and it could not be resumed", run_id)

    def _resume_elsewhere(self, run_id: str, attempt: int, reason: str) -> None:
        store = self.hub.store
        run = store.runs.get(run_id)
        if run["status"] in FINAL:
            return
        executor = run.get("executor") or {}
        attempts = list(executor.get("attempts") or []) + [{"attempt": attempt, "lost": reason,
                                                            "pid": executor.get("pid")}]
        # What the lost worker deployed went with it: the resume redeploys and redoes what depended on it.
        store.runs.update(run_id, {"executor": {**executor, "attempts": attempts}, "torn_down": True,
                                   "status": "interrupted"})
        store.events.append("run.attempt_lost", {"attempt": attempt, "reason": reason}, run_id=run_id)
        if attempt + 1 >= self.max_attempts:
            store.runs.update(run_id, {"status": "error", "finished_at": time.time(), "current_step": None,
                                       "error": f"its worker was lost {len(attempts)} times (last: {reason})"})
            store.events.append("run.finished", {"status": "error", "score": None, "error": reason}, run_id=run_id)
            return
        log.info("run %s lost its worker (%s); attempt %d resumes it", run_id, reason, attempt + 1)
        self.dispatch(run_id, attempt + 1)

    def close(self, timeout: float = STOP_GRACE_S) -> None:
        """Stop every worker: each interrupts its runs (resumable) and stops what they deployed; a worker still
        there after `timeout` is killed."""
        with self._lock:
            self._closing = True
            workers = [w for w in self._workers if not w.gone]
        for worker in workers:
            try:
                worker.link.call("worker.stop", timeout=5)
            except Exception:  # gone already, or stuck: killed below
                pass
        deadline = time.monotonic() + timeout
        for worker in workers:
            try:
                worker.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("worker %d did not stop within %.0f s; killing it", worker.number, timeout)
                worker.proc.kill()
                worker.proc.wait(5)
            worker.link.close()
