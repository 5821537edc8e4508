"""A local worker process: `python -m agentenv_local.executors.worker_process FD`, started by its hub
(`local_workers.py`) with one end of a socket pair as FD.

It asks the hub for its configuration (`worker.hello`), then runs what the hub hands it (`run.start`) on a
`RunWorker` of its own, on its own event loop and core, its store calls going to the hub over the link. It
stops when the hub says so (`worker.stop`) or when the link breaks (the hub exited or was killed): either way
its runs are interrupted, resumable, and what they deployed is stopped.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from typing import Any

from agentenv_local.errors import HubError

from .link import Link
from .run_worker import RemoteStore, RunWorker

CALL_TIMEOUT_S = 120  # a hub that does not answer a store call in this long is stuck or gone


class WorkerProcess:
    def __init__(self, sock: socket.socket):
        from agentenv_local.loops import hub_event_loop

        self.loop = hub_event_loop()
        asyncio.set_event_loop(self.loop)
        self.stopping: asyncio.Event | None = None
        self.link = Link(sock, self._handle, name=f"worker {os.getpid()}", inline=False,
                         on_close=self._hub_gone)
        self.worker: RunWorker | None = None
        self._stop_reason = "the hub stopped"

    def run(self) -> None:
        self.link.start()
        self.loop.run_until_complete(self._main())
        self.loop.close()

    async def _main(self) -> None:
        from agentenv_local.paths import ProjectPaths

        self.stopping = asyncio.Event()
        hello = await asyncio.to_thread(self.link.call, "worker.hello", [os.getpid()], {}, CALL_TIMEOUT_S)
        store = RemoteStore(lambda method, args, kwargs: self.link.call(method, args, kwargs, CALL_TIMEOUT_S),
                            self.link.note)
        from pathlib import Path

        self.worker = RunWorker(store, hello["config"], ProjectPaths(Path(hello["state_dir"])), hello["owner"],
                                self.loop)
        self.link.note("worker.ready", [os.getpid()])
        await self.stopping.wait()
        await self.worker.stop(self._stop_reason)
        self.link.close()

    def _hub_gone(self) -> None:
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._stop_soon, "its hub went away")

    def _stop_soon(self, reason: str) -> None:
        self._stop_reason = reason
        if self.stopping is not None:
            self.stopping.set()

    # -- what the hub sends (on the link's threads) ----------------------------------------------------------
    def _handle(self, method: str, args: list, kwargs: dict) -> Any:
        if method == "worker.stop":
            self.loop.call_soon_threadsafe(self._stop_soon, "the hub stopped")
            return True
        worker = self.worker
        if worker is None:
            raise HubError("this worker is still starting")
        if method == "run.start":
            run_id, attempt = args
            self._on_loop(lambda: worker.start(run_id, attempt, {"kind": "workers", "pid": os.getpid()}))
            asyncio.run_coroutine_threadsafe(self._tell_when_done(run_id), self.loop)
            return True
        if method == "run.cancel":
            run_id, reason, interrupted = args
            return self._on_loop(lambda: worker.cancel(run_id, reason, interrupted))
        if method == "review.notify":
            return self._on_loop(lambda: worker.notify_review(args[0]))
        if method.startswith("envs."):
            result = self._on_loop(lambda: worker.env_instance_call(method, args, kwargs))
            if asyncio.iscoroutine(result):
                return asyncio.run_coroutine_threadsafe(result, self.loop).result(CALL_TIMEOUT_S)
            return result
        raise HubError(f"a worker has no method {method!r}")

    def _on_loop(self, fn: Any) -> Any:
        async def call() -> Any:
            return fn()
        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(CALL_TIMEOUT_S)

    async def _tell_when_done(self, run_id: str) -> None:
        assert self.worker is not None
        final = await self.worker.wait(run_id)
        self.link.note("worker.run_done", [run_id, (final or {}).get("status")])


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not argv[1].isdigit():
        print("usage: python -m agentenv_local.executors.worker_process FD (its hub starts it)", file=sys.stderr)
        return 2
    # Ctrl-C in the terminal reaches the hub, which stops its workers; a worker never dies of it half-way.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    WorkerProcess(socket.socket(fileno=int(argv[1]))).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
