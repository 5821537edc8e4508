"""The hub's choice of executor per run: its own runner (`local`), or the Ray executor, made when a run first
asks for it (`--executor ray`, or `[executor] kind = "ray"`) and kept for the hub's life."""

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
        self._lock = threading.Lock()

    def kind(self, options: Any) -> str:
        return options.executor or str(self._hub.config.get("executor.kind") or "local")

    def check(self, options: Any) -> None:
        """Connect to the executor `options` name (Ray: fail in seconds, saying what to do, when the cluster
        cannot be reached), before a run is recorded for it."""
        self._ray_for(options)

    def dispatch(self, options: Any, run_id: str) -> None:
        """Hand a run the hub recorded (queued) to its executor; for `local` the caller starts it itself."""
        self._ray_for(options).dispatch(run_id)

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
        return self._ray is not None and self._ray.owns(run_id)

    def cancel(self, run_id: str) -> bool:
        """Ask the executor running `run_id` elsewhere to cancel it; False when none runs it."""
        return self._ray is not None and self._ray.cancel(run_id)

    def active(self) -> list[str]:
        return self._ray.in_flight() if self._ray is not None else []

    def close(self) -> None:
        if self._ray is not None:
            self._ray.close()
