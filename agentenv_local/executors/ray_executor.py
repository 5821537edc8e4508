"""The hub's Ray executor: runs recorded in the hub's store, executed on a Ray cluster's workers.

`dispatch(run_id)` hands a queued run to a worker (`ray_worker.run_on_worker`); a monitor thread watches the
tasks. A task that ends because its worker process or its node died (the run is not final in the store) is
dispatched again, resuming from the journal, up to `max_attempts` in all; each attempt is recorded on the run
(`executor.attempts`) and as a `run.attempt_lost` event. `cancel(run_id)` asks the worker through the mailbox
(it tears its sandboxes down and records the run cancelled); a worker that does not answer within
`cancel_grace_s` is killed and the hub records the run cancelled itself.

Ray tasks here never retry on their own (max_retries=0): a retry must resume from the journal, which only
the hub can decide.
"""

from __future__ import annotations

import logging
import socket
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from agentenv_local.errors import AgentenvError

log = logging.getLogger(__name__)

FINAL = ("passed", "failed", "error", "cancelled", "interrupted")
CONNECT_TIMEOUT_S = 3.0


class RayUnavailable(AgentenvError):
    """The Ray cluster cannot be used (not installed, not reachable)."""


@dataclass
class _Dispatched:
    ref: Any
    attempt: int
    cancel_asked_at: float | None = None


def check_reachable(address: str) -> None:
    """Fail in seconds, with what to do, when nothing answers at a cluster's HOST:PORT."""
    if address in ("auto", "local", ""):
        return
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise RayUnavailable(f"--ray-address {address!r} is not HOST:PORT",
                             hint="give the head node's address, e.g. 127.0.0.1:6379 (`ray start --head` prints it)")
    try:
        with socket.create_connection((host.removeprefix("ray://") or "127.0.0.1", int(port)), CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        raise RayUnavailable(f"no Ray cluster answers at {address}: {exc.strerror or exc}",
                             hint="start one with `ray start --head --port PORT`, or check --ray-address") from None


def connect(address: str) -> None:
    """This process as a driver of the cluster at `address` (once; a second address is refused)."""
    try:
        import ray
    except ImportError:
        raise RayUnavailable("the Ray executor needs Ray, which is not installed",
                             hint="pip install 'agentenv-local[ray]'") from None
    if ray.is_initialized():
        return
    check_reachable(address)
    options: dict[str, Any] = {"log_to_driver": False, "configure_logging": False, "include_dashboard": False}
    if address == "auto":  # the cluster RAY_ADDRESS or `ray start` on this machine names, as `ray.init()` finds it
        try:
            ray.init(address="auto", **options)
            return
        except ConnectionError:  # none runs: start one here, as `ray.init()` does, and say so
            print("agentenv: no Ray cluster runs here: starting a local one for this hub (`ray start --head` "
                  "starts one that outlives it; --ray-address joins another)", file=sys.stderr, flush=True)
            ray.init(**options)
            return
    ray.init(address=None if address == "local" else address, **options)


class RayExecutor:
    """Executes the hub's runs on Ray workers. `hub`: what it needs of the hub (`call`, `store`, `on_loop`)."""

    def __init__(self, hub: Any, address: str, max_attempts: int = 3, cancel_grace_s: float = 15.0):
        import ray

        from .ray_bridge import HubBridge
        from .ray_worker import run_on_worker
        from .run_worker import config_snapshot

        connect(address)
        self.hub, self.address = hub, address
        self.max_attempts, self.cancel_grace_s = max_attempts, cancel_grace_s
        self.bridge = HubBridge(lambda method, args, kwargs: hub.call(method, args, kwargs))
        self._task = ray.remote(max_retries=0, num_cpus=1)(run_on_worker)
        self._snapshot = config_snapshot(hub.config)
        self._runs: dict[str, _Dispatched] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._monitor = threading.Thread(target=self._watch, name="agentenv-ray-monitor", daemon=True)
        self._monitor.start()

    # -- the runs --------------------------------------------------------------------------------
    def dispatch(self, run_id: str, attempt: int = 0) -> None:
        ref = self._task.remote(self.bridge.mailbox, run_id, self._snapshot, attempt)
        with self._lock:
            self._runs[run_id] = _Dispatched(ref, attempt)

    def owns(self, run_id: str) -> bool:
        with self._lock:
            return run_id in self._runs

    def cancel(self, run_id: str) -> bool:
        with self._lock:
            entry = self._runs.get(run_id)
            if entry is None:
                return False
            entry.cancel_asked_at = entry.cancel_asked_at or time.monotonic()
        self.bridge.cancel(run_id)
        return True

    def in_flight(self) -> list[str]:
        with self._lock:
            return list(self._runs)

    # -- watching --------------------------------------------------------------------------------
    def _watch(self) -> None:
        import ray

        while not self._stop.is_set():
            with self._lock:
                refs = {entry.ref: run_id for run_id, entry in self._runs.items()}
            if not refs:
                self._stop.wait(0.2)
                continue
            ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=0.5)
            for ref in ready:
                self._settle(refs[ref], ref)
            self._kill_unanswered_cancels()

    def _settle(self, run_id: str, ref: Any) -> None:
        import ray

        with self._lock:
            entry = self._runs.pop(run_id, None)
        if entry is None:
            return
        try:
            ray.get(ref)
            return  # the worker recorded the run's end itself
        except Exception as exc:  # the worker process or its node died, or the task itself failed
            reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".strip()
        run = self.hub.store.runs.get(run_id)
        if run["status"] in FINAL:
            return
        if entry.cancel_asked_at is not None:
            self._close(run_id, "cancelled", "cancelled by the operator (its Ray worker stopped)")
            return
        attempts = list((run.get("executor") or {}).get("attempts") or []) + [
            {"attempt": entry.attempt, "lost": reason, "node_id": (run.get("executor") or {}).get("node_id")}]
        # What the lost worker deployed (sandboxes, env instances, agents) went with it: the resume on the next
        # worker deploys again and redoes what depended on it (tasks/resume.py), keeping what only recorded.
        self.hub.store.runs.update(run_id, {"executor": {**(run.get("executor") or {}), "attempts": attempts},
                                            "torn_down": True})
        self.hub.store.events.append("run.attempt_lost", {"attempt": entry.attempt, "reason": reason},
                                     run_id=run_id)
        if entry.attempt + 1 >= self.max_attempts:
            self._close(run_id, "error", f"its Ray worker was lost {len(attempts)} times (last: {reason})")
            return
        log.info("run %s lost its Ray worker (%s); attempt %d resumes it", run_id, reason, entry.attempt + 1)
        self.dispatch(run_id, entry.attempt + 1)

    def _kill_unanswered_cancels(self) -> None:
        import ray

        now = time.monotonic()
        with self._lock:
            late = [(run_id, e) for run_id, e in self._runs.items()
                    if e.cancel_asked_at is not None and now - e.cancel_asked_at > self.cancel_grace_s]
        for _, entry in late:
            ray.cancel(entry.ref, force=True)

    def _close(self, run_id: str, status: str, error: str) -> None:
        """Record the end of a run no worker will finish (the hub's own record of it)."""
        self.hub.store.runs.update(run_id, {"status": status, "error": error, "finished_at": time.time(),
                                            "current_step": None})
        self.hub.store.events.append("run.finished", {"status": status, "score": None, "error": error},
                                     run_id=run_id)

    def close(self, timeout: float = 30) -> None:
        """Cancel what still runs, wait for the workers to tear down, and leave the cluster."""
        import ray

        for run_id in self.in_flight():
            self.cancel(run_id)
        deadline = time.monotonic() + timeout
        while self.in_flight() and time.monotonic() < deadline:
            time.sleep(0.1)
        self._stop.set()
        self._monitor.join(timeout=2)
        self.bridge.close()
        ray.shutdown()
