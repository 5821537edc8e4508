"""The rollouts API: episodes for a trainer, each yielded as soon as it finishes.

    import agentenv_local

    async for episode in agentenv_local.rollouts("examples/support", k=8, agent="tool-loop", model="qwen3"):
        print(episode["task_id"], episode["seed"], episode["score"], len(episode["messages"]))

    for episode in agentenv_local.rollouts_sync(task_ids=["@local/my/bundle/task"], seeds=[{"n": 1}], k=4):
        ...

Each episode is the record `agentenv export runs` writes (record.py: reward, per-criterion scores, the
conversation as OpenAI-style messages, the trajectory, usage, timings). The runs go through this project's
hub (the one running, or this process becomes it), at most `concurrency` at once, and stay in the store like
any other run. The model endpoint is the project's `[model]` configuration; `model`, `user_model` and
`judge_model` pick model names for the roles, as `--model` and its kin do.

Stopping early (breaking out of the loop, cancelling the task) cancels the runs still going; their sandboxes
are torn down.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentenv_local.errors import ValidationError


@dataclass(frozen=True)
class RolloutSpec:
    """What to roll out: a bundle's tasks or stored tasks, each seed row, `k` times each."""

    source: str | Path | None = None  # a bundle folder or a known bundle's name
    tasks: Sequence[str] = ()  # the bundle's task names to run (default: all, or its evals' tasks)
    task_ids: Sequence[str] = ()  # stored tasks, "ID" (latest) or "ID:VERSION"
    seeds: Sequence[dict] | None = None
    k: int = 1
    agent: str | None = None
    model: str | None = None
    user_model: str | None = None
    judge_model: str | None = None
    sandbox: str | None = None
    executor: str | None = None  # local (the hub) or ray, as --executor
    ray_address: str | None = None
    concurrency: int = 4
    project: Path | None = None  # the project folder (default: found from the current directory)

    def check(self) -> None:
        if (self.source is None) == (not self.task_ids):
            raise ValidationError("rollouts need a bundle or task ids (one of the two)",
                                  hint='rollouts("examples/support") or rollouts(task_ids=["@local/b/task"])')
        if self.k < 1 or self.concurrency < 1:
            raise ValidationError(f"k and concurrency must be at least 1 (got k={self.k}, "
                                  f"concurrency={self.concurrency})")


async def rollouts(source: str | Path | None = None, **fields: Any) -> AsyncIterator[dict[str, Any]]:
    """Episodes as they finish (an async iterator); see the module's docstring for the arguments."""
    spec = RolloutSpec(source, **fields)
    spec.check()
    loop = asyncio.get_running_loop()
    items: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    stop = threading.Event()

    def put(kind: str, value: Any) -> None:
        loop.call_soon_threadsafe(items.put_nowait, (kind, value))

    worker = _start(spec, put, stop)
    try:
        while (episode := _episode_or_end(*await items.get())) is not None:
            yield episode
    finally:
        stop.set()
        await asyncio.to_thread(worker.join)


def rollouts_sync(source: str | Path | None = None, **fields: Any) -> Iterator[dict[str, Any]]:
    """The same episodes for code without an event loop (a plain iterator)."""
    spec = RolloutSpec(source, **fields)
    spec.check()
    items: queue.Queue[tuple[str, Any]] = queue.Queue()
    stop = threading.Event()
    worker = _start(spec, lambda kind, value: items.put((kind, value)), stop)
    try:
        while (episode := _episode_or_end(*items.get())) is not None:
            yield episode
    finally:
        stop.set()
        worker.join()


def _start(spec: RolloutSpec, put: Any, stop: threading.Event) -> threading.Thread:
    worker = threading.Thread(target=_produce, args=(spec, put, stop), name="agentenv-rollouts", daemon=True)
    worker.start()
    return worker


def _episode_or_end(kind: str, value: Any) -> dict[str, Any] | None:
    """What the producer handed over: an episode, None at the end, or its error raised here."""
    if kind == "error":
        raise value
    return value if kind == "episode" else None


def _produce(spec: RolloutSpec, put: Any, stop: threading.Event) -> None:
    """Run the rollouts on this thread, handing each finished episode to `put`."""
    try:
        _run(spec, put, stop)
    except KeyboardInterrupt:  # stopped by the consumer: the runs in flight were cancelled
        put("done", None)
    except BaseException as exc:  # the consumer sees it where it iterates
        put("error", exc)
    else:
        put("done", None)


def _run(spec: RolloutSpec, put: Any, stop: threading.Event) -> None:
    from agentenv_local.config import load_config
    from agentenv_local.hub import connect
    from agentenv_local.hub.launch import RunWatcher, drive_jobs
    from agentenv_local.tasks.options import RunOptions

    from .record import episode_record

    config = load_config(spec.project)
    options = RunOptions(sandbox=spec.sandbox, agent=spec.agent, agent_model=spec.model,
                         user_model=spec.user_model, judge_model=spec.judge_model, executor=spec.executor,
                         ray_address=spec.ray_address)
    session = connect(spec.project, config=config, defer_linger=False)
    try:
        store = session.store

        def load(key: str) -> bytes | None:
            return store.objects.get(key) if store.objects.exists(key) else None

        class Episodes(RunWatcher):
            event_kinds = ()  # only the runs' ends

            def finished(self, run: dict) -> None:
                put("episode", episode_record(run, load))

        jobs = _jobs(session, spec, options, config)
        drive_jobs(session, jobs, spec.concurrency, Episodes(), stop=stop)
    finally:
        session.close()


def _jobs(session: Any, spec: RolloutSpec, options: Any, config: Any) -> list[Any]:
    from agentenv_local.hub.launch import Job

    if spec.source is not None:
        targets = _bundle_tasks(session, spec, options, config)
    else:
        targets = [_task_ref(session.store, ref) for ref in spec.task_ids]
    seeds: Sequence[dict | None] = list(spec.seeds) if spec.seeds else [None]
    return [Job(task_id, version, seed, label=task_id, options=options)
            for task_id, version in targets for seed in seeds for _ in range(spec.k)]


def _bundle_tasks(session: Any, spec: RolloutSpec, options: Any, config: Any) -> list[tuple[str, int]]:
    """Store the bundle (as `agentenv run` does) and name the tasks to roll out, at their versions."""
    from agentenv_local.bundles import find_bundle, load_bundle, materialize

    folder, package = find_bundle(str(spec.source))
    loaded = load_bundle(folder, package, config=config)
    names = [t.removesuffix(".json").removeprefix("tasks/") for t in spec.tasks] or list(loaded.tasks)
    unknown = [n for n in names if n not in loaded.tasks]
    if unknown:
        raise ValidationError(f"no task named {', '.join(unknown)} in {folder}",
                              hint=f"tasks here: {', '.join(loaded.tasks) or 'none'}")
    result = materialize(session.store, loaded, sandbox=options.sandbox, agent=options.agent)
    return [result.task_versions[name] for name in names]


def _task_ref(store: Any, ref: str) -> tuple[str, int]:
    """"ID" or "ID:VERSION" as a stored task at a version (its latest when none is given)."""
    base, sep, tail = ref.rpartition(":")
    task_id, version = (base, int(tail)) if sep and tail.isdigit() and base else (ref, None)
    doc = store.documents.find("tasks", task_id, version)
    if doc is None:
        raise ValidationError(f"no stored task {ref!r}",
                              hint="store it with `agentenv task create FILE --id ID`, or pass a bundle")
    return task_id, int(doc["version"])
