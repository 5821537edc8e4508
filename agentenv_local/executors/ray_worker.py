"""One run on a Ray worker: its own runner, sandboxes and env instances on this node; the hub's store through
the mailbox.

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


def config_snapshot(config: Any) -> dict[str, Any]:
    """The hub's configuration as a worker takes it: every value resolved, and the secret values to mask."""
    try:
        values = config.get("")
    except Exception:  # a reference that cannot resolve: take the sections that can
        values = {}
        for name in (config.show().get("keys") or {}):
            top = name.split(".", 1)[0]
            if top in values:
                continue
            try:
                values[top] = config.get(top)
            except Exception:
                continue
    secrets = config.secret_values() if hasattr(config, "secret_values") else []
    return {"values": values, "secrets": list(secrets)}


class _WorkerConfig:
    """A worker's configuration: the hub's values over a config of its own folder, masking the hub's secrets."""

    def __init__(self, snapshot: dict[str, Any], state_dir: Path):
        from agentenv_local.config import load_config

        self._config = load_config(state_dir.parent, overrides=snapshot["values"], environ={})
        self._secrets = list(snapshot["secrets"])

    def __getattr__(self, name: str) -> Any:
        return getattr(self._config, name)

    def get(self, path: str, default: Any = None) -> Any:
        return self._config.get(path, default)

    def secret_values(self) -> list[str]:
        return sorted(set(self._secrets) | set(self._config.secret_values()))


def run_on_worker(mailbox: Any, run_id: str, snapshot: dict[str, Any], attempt: int) -> dict[str, Any]:
    """The Ray task: run `run_id` here to its end; what this node made of it is gone when this returns."""
    return asyncio.run(_run(mailbox, run_id, snapshot, attempt))


async def _run(mailbox: Any, run_id: str, snapshot: dict[str, Any], attempt: int) -> dict[str, Any]:
    import os
    import socket

    import ray

    from agentenv_local.hosting.envs.manager import EnvManager
    from agentenv_local.paths import ProjectPaths
    from agentenv_local.tasks.runner import Runner
    from agentenv_local.tasks.services import RunServices

    from .ray_mailbox import MailboxStore

    node: dict[str, Any] = {"node_id": ray.get_runtime_context().get_node_id(), "host": socket.gethostname(),
                            "pid": os.getpid()}
    _remove_earlier_attempts(run_id)
    workdir = Path(tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{run_id}-"))
    paths = ProjectPaths(workdir / ".agentenv")
    paths.ensure()
    loop = asyncio.get_running_loop()
    store = MailboxStore(mailbox, run_id)
    services = RunServices(store, _WorkerConfig(snapshot, paths.state_dir), paths)
    envs = EnvManager(store, paths, loop, services=services, sweep_at_start=False)
    services.envs = envs
    runner = Runner(services, f"ray:{node['node_id'][:12]}:{node['pid']}", loop)
    stop_watch = threading.Event()
    try:
        earlier = store.runs.get(run_id).get("executor") or {}  # keeps the lost attempts the hub recorded
        store.runs.update(run_id, {"executor": {**earlier, "kind": "ray", "attempt": attempt, **node}})
        if attempt == 0:
            runner.start_recorded(run_id)
        else:
            runner.resume(run_id)
        watcher = threading.Thread(target=_watch_cancel, args=(store, runner, run_id, loop, stop_watch),
                                   name="agentenv-ray-cancel", daemon=True)
        watcher.start()
        final = await runner.wait(run_id)
        return {"run_id": run_id, "status": final["status"], "attempt": attempt, **node}
    finally:
        stop_watch.set()
        await envs.aclose()
        await services.aclose()
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
