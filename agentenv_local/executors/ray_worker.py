"""One run on a Ray worker: a `RunWorker` (run_worker.py, the code local worker processes run too), with its own
runner, sandboxes and env instances on this node; the hub's store through the mailbox.

The worker gets the run's id (the hub recorded the run, queued, before dispatching it), the hub's
configuration resolved into plain values (a worker has neither the hub's environment nor its secret store),
and the attempt number. A first attempt starts the run as recorded; a later one resumes it from its journal,
as `agentenv runs resume` does, so what the lost worker finished is kept and what it left half done is done
again. Everything the run deployed on this node is torn down before the task returns, and its working folder
is deleted.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

CANCEL_POLL_S = 0.5
WORKDIR_PREFIX = "agentenv-ray-"  # + the run id: a later attempt on this node removes a lost one's folder


def run_on_worker(mailbox: Any, run_id: str, snapshot: dict[str, Any], attempt: int) -> dict[str, Any]:
    """The Ray task: run `run_id` here to its end; what this node made of it is gone when this returns."""
    return asyncio.run(_run(mailbox, run_id, snapshot, attempt))


async def _run(mailbox: Any, run_id: str, snapshot: dict[str, Any], attempt: int) -> dict[str, Any]:
    import os
    import socket

    import ray

    from agentenv_local.paths import ProjectPaths

    from .ray_mailbox import MailboxStore
    from .run_worker import RunWorker

    node: dict[str, Any] = {"node_id": ray.get_runtime_context().get_node_id(), "host": socket.gethostname(),
                            "pid": os.getpid()}
    _remove_earlier_attempts(run_id)
    workdir = Path(tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{run_id}-"))
    paths = ProjectPaths(workdir / ".agentenv")
    paths.ensure()
    loop = asyncio.get_running_loop()
    store = MailboxStore(mailbox, run_id)
    worker = RunWorker(store, snapshot, paths, f"ray:{node['node_id'][:12]}:{node['pid']}", loop)
    stop_watch = threading.Event()
    try:
        worker.start(run_id, attempt, {"kind": "ray", **node})
        watcher = threading.Thread(target=_watch_cancel, args=(store, worker.runner, run_id, loop, stop_watch),
                                   name="agentenv-ray-cancel", daemon=True)
        watcher.start()
        final = await worker.wait(run_id)
        return {"run_id": run_id, "status": final["status"], "attempt": attempt, **node}
    finally:
        stop_watch.set()
        await worker.aclose()
        shutil.rmtree(workdir, ignore_errors=True)


def _watch_cancel(store: Any, runner: Any, run_id: str, loop: asyncio.AbstractEventLoop,
                  stop: threading.Event) -> None:
    """Cancel the run here when the hub asks (`runs cancel`, Ctrl-C on the command that started it)."""
    while not stop.wait(CANCEL_POLL_S):
        try:
            if store.cancelled():
                loop.call_soon_threadsafe(runner.cancel, run_id)
                return
        except Exception:  # the mailbox is gone with the hub: the run ends on its own or the node goes
            return


def _remove_earlier_attempts(run_id: str) -> None:
    """A lost attempt of this run on this node left its folder (its worker was killed): it is ours to remove."""
    for folder in Path(tempfile.gettempdir()).glob(f"{WORKDIR_PREFIX}{run_id}-*"):
        shutil.rmtree(folder, ignore_errors=True)
