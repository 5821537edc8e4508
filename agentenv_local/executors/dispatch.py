"""The hub's choice of executor per run: its own runner (`local`), its worker processes (`workers`), or the Ray
executor; the pool and the Ray executor are made when a run first asks for them (`--executor`, or
`[executor] kind`) and kept for the hub's life."""

from __future__ import annotations

import threading
from typing import Any

from agentenv_local.errors import ValidationError


class Executors:
    """What the hub asks before it runs, cancels or stops: is this run (to be) executed elsewhere?"""

    def __init__(self, hub: Any):
        self._hub = hub
        self._ray: Any = None
        self._ray_address: str | None = None
        self._workers: Any = None
        self._lock = threading.Lock()

    def kind(self, options: Any) -> str:
        """`local`, `workers` or `ray`. `auto` (the default) is the worker processes of a hub that stays: they are
        started once and kept warm for its batches. A one-shot command's hub runs its runs itself: starting
        workers (a second of CPU each) would cost such a command more than they save it."""
        kind = options.executor or str(self._hub.config.get("executor.kind") or "auto")
        if kind == "auto":
            return "workers" if self._hub.long_lived else "local"
        return kind

    def check(self, options: Any) -> None:
        """Connect to the executor `options` name (Ray: fail in seconds, saying what to do, when the cluster
        cannot be reached), before a run is recorded for it."""
        if self.kind(options) == "ray":
            self._ray_for(options)

    def dispatch(self, options: Any, run_id: str) -> None:
        """Hand a run the hub recorded (queued) to its executor; for `local` the caller starts it itself."""
        if self.kind(options) == "workers":
            self.workers().dispatch(run_id)
        else:
            self._ray_for(options).dispatch(run_id)

    def workers(self) -> Any:
        """The hub's worker processes (local_workers.py), made on first use."""
        with self._lock:
            if self._workers is None:
                from .local_workers import WorkerPool

                config = self._hub.config
                self._workers = WorkerPool(self._hub, size=int(config.get("executor.workers") or 0),
                                           max_attempts=int(config.get("executor.max_attempts")))
            return self._workers

    def _ray_for(self, options: Any) -> Any:
        address = options.ray_address or str(self._hub.config.get("executor.ray_address") or "auto")
        with self._lock:
            if self._ray is None:
                from .ray_executor import RayExecutor

                config = self._hub.config
                self._ray = RayExecutor(self._hub, address, max_attempts=int(config.get("executor.max_attempts")),
                                        cancel_grace_s=float(config.get("executor.cancel_grace_s")))
                self._ray_address = address
            elif address != self._ray_address:
                raise ValidationError(f"this hub already drives the Ray cluster at {self._ray_address}; it cannot "
                                      f"also use {address}",
                                      hint="stop the hub (`agentenv down`) to switch clusters, or drop --ray-address")
            return self._ray

    def owns(self, run_id: str) -> bool:
        return (self._ray is not None and self._ray.owns(run_id)) or (
            self._workers is not None and self._workers.owns(run_id))

    def cancel(self, run_id: str, reason: str = "cancelled", interrupted: bool = False) -> bool:
        """Ask the executor running `run_id` elsewhere to cancel it (a worker process: or interrupt it,
        resumable); False when none runs it."""
        if self._workers is not None and self._workers.cancel(run_id, reason, interrupted):
            return True
        return self._ray is not None and self._ray.cancel(run_id)

    def notify_review(self, review_id: str) -> None:
        if self._workers is not None:
            self._workers.notify_review(review_id)

    def env_instance_call(self, method: str, args: list, kwargs: dict) -> tuple[bool, Any]:
        """An `envs.*` call on an instance a worker process runs: (True, its answer), or (False, None)."""
        if self._workers is None:
            return False, None
        return self._workers.env_instance_call(method, args, kwargs)

    def active(self) -> list[str]:
        return [*(self._ray.in_flight() if self._ray is not None else []),
                *(self._workers.in_flight() if self._workers is not None else [])]

    def close(self) -> None:
        if self._workers is not None:
            self._workers.close()
        if self._ray is not None:
            self._ray.close()
