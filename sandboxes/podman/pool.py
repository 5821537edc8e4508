"""The warm pool: containers started ahead of time, so a run's sandbox is there when it asks.

Per key (image, cpu, memory, pids) the pool keeps up to `pool_size` started `vm`-mode containers with
their command channel open. `acquire()` hands one out in a few milliseconds (it only writes the
sandbox's meta.json with the run it now belongs to) and starts a refill in the background. Only plain
sandboxes are pooled: network `none`, no exposed ports (env vars are passed with each command). The
pool fills for a key once that key has been asked for `fill_after` times (default 2: a one-shot command
such as `agentenv run hello` asks once, and warming containers it would only remove at exit cost it
~0.15 s); `fill()` warms one ahead of time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from typing import TYPE_CHECKING

from ..base import SandboxSpec

if TYPE_CHECKING:
    from .provider import PodmanSandbox, PodmanSandboxProvider

logger = logging.getLogger(__name__)


class WarmPool:
    def __init__(self, provider: PodmanSandboxProvider, size: int, fill_after: int = 2):
        self.provider = provider
        self.size = max(0, size)
        self.fill_after = max(1, fill_after)
        self._ready: dict[tuple, deque] = {}
        self._filling: dict[tuple, asyncio.Task] = {}
        self._asked: dict[tuple, int] = {}  # acquires per key so far
        self._closing = False

    @staticmethod
    def key(spec: SandboxSpec, image: str) -> tuple:
        return (image, spec.cpu, spec.memory_mb, spec.pids)

    def eligible(self, spec: SandboxSpec) -> bool:
        policy = spec.network_policy
        return (self.size > 0 and spec.mode == "vm" and not spec.exposed_ports and not spec.host_access
                and not spec.read_only_mounts
                and (policy is None or policy.mode == "none") and self.provider.use_socket_channel(spec))

    def ready_count(self, spec: SandboxSpec, image: str) -> int:
        return len(self._ready.get(self.key(spec, image), ()))

    def filling(self, spec: SandboxSpec, image: str) -> bool:
        task = self._filling.get(self.key(spec, image))
        return task is not None and not task.done()

    async def acquire(self, spec: SandboxSpec, image: str) -> PodmanSandbox | None:
        from .provider import _write_json

        key = self.key(spec, image)
        queue = self._ready.setdefault(key, deque())
        loop = asyncio.get_running_loop()
        sandbox = None
        while queue:
            candidate = queue.popleft()
            channel = self.provider._channels.get(candidate.sandbox_id)
            if channel is not None and channel.alive and channel.loop is loop:
                sandbox = candidate
                break
            asyncio.create_task(self.provider.remove(candidate.sandbox_id))  # stale: its channel died
        self._asked[key] = self._asked.get(key, 0) + 1
        if self._asked[key] >= self.fill_after:
            self.start_fill(spec, image)
        if sandbox is None:
            return None
        now = time.time()
        sandbox.spec = spec
        sandbox.meta.update(status="running", run_id=spec.run_id, acquired_at=now, created_at=now,
                            expires_at=now + spec.ttl_seconds, spec=spec.model_dump(mode="json"))
        _write_json(sandbox.folder / "meta.json", sandbox.meta)
        return sandbox

    def start_fill(self, spec: SandboxSpec, image: str) -> None:
        key = self.key(spec, image)
        task = self._filling.get(key)
        if self.size and not self._closing and (task is None or task.done()):
            self._filling[key] = asyncio.create_task(self.fill(spec, image))

    async def fill(self, spec: SandboxSpec, image: str) -> None:
        """Start containers until `size` of them wait for this key."""
        key = self.key(spec, image)
        template = SandboxSpec(name="warm-pool", mode="vm", image=image, cpu=spec.cpu, memory_mb=spec.memory_mb,
                               pids=spec.pids)
        queue = self._ready.setdefault(key, deque())
        while len(queue) < self.size and not self._closing:
            try:
                sandbox = await self.provider.start_container(template, image, pooled=True)
            except Exception as exc:  # the pool is an optimisation: a failure here only costs speed
                logger.warning("warm pool: could not start a container for %s: %s", image, exc)
                return
            queue.append(sandbox)

    async def aclose(self) -> None:
        # Let a fill finish the container it is starting, then stop: cancelled mid-start, the start went on in its
        # thread and its container, never queued, was left behind (CI, stop 33: the warm-pool test found one).
        self._closing = True
        for task in self._filling.values():
            with contextlib.suppress(Exception):
                await task
        self._filling.clear()
        doomed = [s.sandbox_id for queue in self._ready.values() for s in queue]
        self._ready.clear()
        await asyncio.gather(*(self.provider.remove(sid) for sid in doomed), return_exceptions=True)
