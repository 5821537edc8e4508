"""What executes runs outside the hub's process, whatever carries its store calls: a local worker process
(`worker_process.py`, over a socket to its hub) or a Ray worker (`ray_worker.py`, through the mailbox actor).

A worker has its own runner, env instances, agents and sandboxes; the store is the hub's, reached through a
`RemoteStore`. The hub records a run (queued) before it hands it over, so a worker starts it from the store as
recorded, or resumes it from its journal when an earlier worker was lost. The configuration is the hub's,
resolved into plain values (`config_snapshot`): a worker on another node has neither the hub's environment nor
its secret store.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentenv_local.errors import HubError, NotFoundError

# The store methods a worker may call, by sub-store: what the runner and the steps use.
WORKER_STORE_METHODS: dict[str, frozenset[str]] = {
    "documents": frozenset({"find", "get", "latest_version", "put", "query", "versions"}),
    "records": frozenset({"delete", "find", "get", "query", "save"}),
    "runs": frozenset({"find", "get", "journal", "journal_append", "update"}),
    "events": frozenset({"append", "append_many", "flush", "query"}),
    "objects": frozenset({"exists", "get", "list", "metadata", "put"}),
}
# The writes whose result no worker code reads: sent as notes, batched, with no round trip each. A record saved
# against a rev (which may conflict) is a call: its caller must hear of the conflict.
NOTE_METHODS = frozenset({"runs.journal_append", "runs.update", "events.append", "events.append_many",
                          "records.save"})


def is_note(method: str, args: list, kwargs: dict) -> bool:
    if method == "records.save":
        return len(args) < 4 and kwargs.get("rev") is None
    return method in NOTE_METHODS


def is_worker_store_method(method: str) -> bool:
    namespace, _, name = method.partition(".")
    return name in WORKER_STORE_METHODS.get(namespace, frozenset())


class _SubStore:
    def __init__(self, store: RemoteStore, namespace: str):
        self._store, self._namespace = store, namespace
        self._methods = WORKER_STORE_METHODS[namespace]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in self._methods:
            raise AttributeError(f"a worker's {self._namespace} store has no method {name!r}: the hub does not "
                                 "take that call from workers")
        method = f"{self._namespace}.{name}"
        return lambda *args, **kwargs: self._store.call(method, list(args), kwargs)


class RemoteStore:
    """The hub's store as a worker sees it. `call(method, args, kwargs)` carries a call to the hub and returns
    its answer; `note(method, args, kwargs)`, where given, carries a write that is not waited for (NOTE_METHODS),
    in order with the calls.

    What a worker would otherwise ask the hub again and again is answered here: the record of each run it runs
    (`track`: no one else writes it while it runs here, so its own updates keep the copy true; `forget` when the
    run leaves), write-once objects, and documents read at an explicit version (versions never change)."""

    documents: Any
    records: Any
    runs: Any
    events: Any
    objects: Any

    def __init__(self, call: Callable[[str, list, dict], Any],
                 note: Callable[[str, list, dict], None] | None = None):
        self._call, self._note = call, note
        self._runs: dict[str, dict] = {}  # the tracked runs' records, as this worker last wrote them
        self._objects: dict[tuple[str, str], Any] = {}  # ("get" | "metadata", key) -> answer
        self._versions: dict[tuple, Any] = {}  # documents.find(collection, id, version) with a version
        for namespace in WORKER_STORE_METHODS:
            setattr(self, namespace, _SubStore(self, namespace))

    def track(self, run_id: str) -> None:
        """Keep `run_id`'s record here from now on (read once from the hub)."""
        self._runs[run_id] = self._call("runs.get", [run_id], {})

    def forget(self, run_id: str) -> None:
        self._runs.pop(run_id, None)

    def call(self, method: str, args: list, kwargs: dict) -> Any:
        answered, answer = self._answer_here(method, args, kwargs)
        if answered:
            return answer
        if self._note is not None and is_note(method, args, kwargs):
            self._note(method, args, kwargs)
            return None
        result = self._call(method, args, kwargs)
        self._keep(method, args, kwargs, result)
        return result

    def _answer_here(self, method: str, args: list, kwargs: dict) -> tuple[bool, Any]:
        if method in ("runs.get", "runs.find") and len(args) == 1 and args[0] in self._runs:
            return True, copy.deepcopy(self._runs[args[0]])
        if method == "runs.update" and args and args[0] in self._runs and kwargs.get("rev") is None:
            run_id, changes = args[0], (args[1] if len(args) > 1 else kwargs["changes"])
            current = self._runs[run_id]
            merged = {**current, **copy.deepcopy(changes), "rev": current["rev"] + 1}
            self._runs[run_id] = merged
            if self._note is not None:
                self._note(method, [run_id, changes], {})
            else:
                self._call(method, [run_id, changes], {})
            return True, copy.deepcopy(merged)
        if method in ("objects.get", "objects.metadata") and len(args) == 1 and not kwargs:
            key = (method, args[0])
            if key in self._objects:
                return True, self._objects[key]
        if method == "documents.find" and len(args) == 3 and args[2] is not None and not kwargs:
            key = tuple(args)
            if key in self._versions:
                return True, copy.deepcopy(self._versions[key])
        return False, None

    def _keep(self, method: str, args: list, kwargs: dict, result: Any) -> None:
        if method in ("objects.get", "objects.metadata") and len(args) == 1 and not kwargs and result is not None:
            self._objects[(method, args[0])] = result
        elif method == "documents.find" and len(args) == 3 and args[2] is not None and not kwargs and result:
            self._versions[tuple(args)] = copy.deepcopy(result)


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


class WorkerConfig:
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


class RunWorker:
    """A runner with its services and env instances, on this process's loop, fed runs the hub recorded. One
    lives as long as its process (a local worker) or its run (a Ray task)."""

    def __init__(self, store: Any, snapshot: dict[str, Any], paths: Any, owner: str,
                 loop: asyncio.AbstractEventLoop):
        from agentenv_local.hosting.envs.manager import EnvManager
        from agentenv_local.tasks.runner import Runner
        from agentenv_local.tasks.services import RunServices

        self.store, self.loop = store, loop
        self.services = RunServices(store, WorkerConfig(snapshot, paths.state_dir), paths)
        # The hub sweeps what dead hubs left; a worker shares the hub's records and leaves its instances alone.
        self.envs = EnvManager(store, paths, loop, services=self.services, sweep_at_start=False)
        self.services.envs = self.envs
        self.runner = Runner(self.services, owner, loop)

    def start(self, run_id: str, attempt: int, where: dict[str, Any]) -> None:
        """Start a run the hub recorded (attempt 0) or resume it from its journal (a later attempt, after a lost
        worker). Call on the loop."""
        if isinstance(self.store, RemoteStore):
            self.store.track(run_id)
        earlier = self.store.runs.get(run_id).get("executor") or {}  # keeps the lost attempts the hub recorded
        self.store.runs.update(run_id, {"executor": {**earlier, **where, "attempt": attempt}})
        if attempt == 0:
            self.runner.start_recorded(run_id)
        else:
            self.runner.resume(run_id)

    async def wait(self, run_id: str) -> dict:
        """The run's record once it has ended here; the worker stops keeping it."""
        final = await self.runner.wait(run_id)
        if isinstance(self.store, RemoteStore):
            self.store.forget(run_id)
        return final

    def cancel(self, run_id: str, reason: str = "cancelled", interrupted: bool = False) -> bool:
        """Call on the loop."""
        return self.runner.cancel(run_id, reason, interrupted=interrupted)

    def notify_review(self, review_id: str) -> None:
        self.services.notify_review(review_id)

    def env_instance_call(self, method: str, args: list, kwargs: dict) -> Any:
        """The hub's `envs.*` calls on an env instance one of this worker's runs deployed (the TUI's clock,
        role binding, teardown); a coroutine for the ones that await. Call on the loop."""
        instance_id = str(args[0] if args else kwargs.get("instance_id"))
        if not self.envs.is_live(instance_id):
            raise NotFoundError(f"env instance {instance_id!r} is not live on this worker")
        rest = dict(kwargs)
        rest.pop("instance_id", None)
        if method == "envs.bind_role":
            return self.envs.bind_role(instance_id, *args[1:], **rest)
        if method == "envs.advance_clock":
            return self.envs.advance_clock(instance_id, *args[1:], **rest)
        if method == "envs.teardown":
            return self.envs.teardown(instance_id)
        raise HubError(f"{method} is not an env instance call")

    async def stop(self, reason: str = "the hub stopped") -> None:
        """Interrupt the runs in flight (resumable, as the hub's own stop leaves them), then stop what they
        deployed."""
        for run_id in list(self.runner.active):
            self.runner.cancel(run_id, reason, interrupted=True)
        for run_id in list(self.runner.active):
            await self.runner.wait(run_id)
        await self.aclose()

    async def aclose(self) -> None:
        await self.envs.aclose()
        await self.services.aclose()
