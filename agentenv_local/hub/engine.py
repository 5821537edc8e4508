"""What a hub needs to execute work: the run services, the env and agent instances (and the sweep that ends
those whose TTL ran out), the runner and the executors.

A long-lived hub (`agentenv up`) builds its engine as it starts, and so does any hub whose store records instances
a dead hub left running (building it sweeps them: hosting/leftovers.py). Otherwise the hub a one-shot command runs
in builds it the first time a call needs it: `runs list`, `task list` or `artifact get` only read the store, and
building the engine imports the step types, pydantic and the hosting code, half of such a command's CPU.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .server import Hub


class RunEngine:
    def __init__(self, hub: Hub) -> None:
        from agentenv_local.executors.dispatch import Executors
        from agentenv_local.hosting.agents.instances import AgentInstances
        from agentenv_local.hosting.envs.manager import EnvManager
        from agentenv_local.hosting.expiry import sweep_forever
        from agentenv_local.tasks.runner import Runner
        from agentenv_local.tasks.services import RunServices

        self._hub = hub
        self.services = RunServices(hub.store, hub.config, hub.paths)
        # Instances a dead hub left running are marked terminated and their processes killed here.
        self.envs = EnvManager(hub.store, hub.paths, hub.loop, services=self.services)
        self.services.envs = self.envs
        self.agents = AgentInstances(hub.store, hub.paths)  # `agentenv agent deploy`: agents that stay up
        # instances deployed with a TTL are torn down once it runs out
        self._ttl_sweep = asyncio.run_coroutine_threadsafe(sweep_forever(self.envs, self.agents), hub.loop)
        self.runner = Runner(self.services, hub.session_id, hub.loop)
        self.executors = Executors(hub)  # runs executed elsewhere (--executor ray)

    def active_runs(self) -> list[str]:
        return [*self.runner.active, *self.executors.active()]

    def stop_runs(self) -> None:
        """Interrupt the runs in flight (Ray's are cancelled, their workers' sandboxes torn down); wait up to 5 s."""
        with contextlib.suppress(Exception):
            self.executors.close()
        for run_id in list(self.runner.active):
            self._hub.on_loop(functools.partial(self.runner.cancel, run_id, "the hub stopped", interrupted=True))
        deadline = time.monotonic() + 5
        while self.runner.active and time.monotonic() < deadline:
            time.sleep(0.02)

    def close(self) -> None:
        """Stop what the engine started; the hub's loop still runs."""
        loop = self._hub.loop
        self._ttl_sweep.cancel()
        self.envs.close()  # deployed env instances: their gateways and servers stop with the hub
        with contextlib.suppress(Exception):  # agents `agentenv agent deploy` started
            asyncio.run_coroutine_threadsafe(self.agents.aclose(), loop).result(30)
        with contextlib.suppress(Exception):  # warm pools, a Podman service we started
            asyncio.run_coroutine_threadsafe(self.services.aclose(), loop).result(30)
