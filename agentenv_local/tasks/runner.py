"""The task runner: runs ready steps concurrently, journals each outcome, tears down what the run
deployed, and resumes an interrupted run from its journal.

It lives in the hub and runs on the hub's asyncio loop; its run updates and journal appends go to the store's
writer thread (stores/writer.py) and are awaited, so the loop keeps serving other episodes while DuckDB
writes, and a step is reported finished only once its journal entry is committed. Run states:
queued -> running -> passed | failed (a verifier scored below 1) | error (a step failed the task) | cancelled |
interrupted.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import secrets
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

from agentenv_local.errors import AgentenvError, NotFoundError, StoreError, ValidationError

from .context import StepContext, new_state
from .env_capture import capture_envs
from .env_capture import enabled as capture_enabled
from .journal import StateTracker, apply_entry
from .model import Task, parse_task
from .model import ancestors as _ancestors
from .options import RunOptions
from .resume import forget as forget_lost
from .resume import plan as resume_plan
from .seeds import apply_seed
from .services import RunServices

log = logging.getLogger(__name__)

MAX_ACTIVE_RUNS = 256
FINAL_STATUSES = ("passed", "failed", "error", "cancelled", "interrupted")


def new_run_id(task_id: str) -> str:
    base = task_id.rsplit("/", 1)[-1] or "task"
    return f"{base}-{time.strftime('%Y%m%d')}-{secrets.token_hex(4)}"


def run_score(metadata: dict, task: Task) -> float | None:
    """The run's score: the last aggregate_verifiers result if any, else the mean of verifiers."""
    verifications = metadata.get("verifications") or {}
    if not verifications:
        return None
    aggregate_steps = {s.id for s in task.steps if s.type == "aggregate_verifiers"}
    aggregates = [v for v in verifications.values() if v.get("step_id") in aggregate_steps]
    if aggregates:
        return float(aggregates[-1]["score"])
    scores = [float(v["score"]) for v in verifications.values()]
    return sum(scores) / len(scores)


@dataclass
class ActiveRun:
    run_id: str
    task: Task
    state: dict
    done: dict[str, str] = field(default_factory=dict)  # step id -> success | failure
    executed: list[str] = field(default_factory=list)  # steps whose teardown is owed, in order
    generation: int = 0
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    future: asyncio.Future | None = None
    options: RunOptions = field(default_factory=RunOptions)  # --sandbox/--agent/--keep, what steps see
    interrupt_reason: str | None = None
    # Set (on the store's writer thread) once the run's end is recorded: from then on it is over, whatever a late
    # cancel says (a client that saw run.finished and left must not turn a passed run into an interrupted one).
    ended: bool = False
    # What the journal holds of the state so far: each step's entry carries only what changed (tasks/journal.py).
    # Made from `state` as given, which is what the journal holds when a run is made, started or resumed.
    tracker: StateTracker | None = None

    def __post_init__(self) -> None:
        if self.tracker is None:
            self.tracker = StateTracker(self.state)


class Runner:
    def __init__(self, services: RunServices, owner: str, loop: asyncio.AbstractEventLoop):
        self.services = services
        self.store = services.store
        self.owner = owner
        self.loop = loop
        self.active: dict[str, ActiveRun] = {}
        # A machine-wide cap across every client of this hub; how many runs one command starts
        # at once is its --concurrency (default [runner] concurrency).
        self._run_slots = asyncio.Semaphore(MAX_ACTIVE_RUNS)
        self._step_concurrency = int(services.config.get("runner.step_concurrency") or 8)

    # -- submitting -------------------------------------------------------------------
    def load_task(self, task_id: str, version: int | None, seed: dict | None) -> Task:
        doc = self.store.documents.find("tasks", task_id, version)
        if doc is None:
            raise NotFoundError(f"task {task_id!r}" + (f" v{version}" if version else "") + " not found",
                                hint="create it with `agentenv task create FILE --id ID` or run its bundle")
        steps = apply_seed(doc["body"]["steps"], seed or {})
        return parse_task(steps, task_id, source=f"task {task_id} v{doc['version']}", version=doc["version"],
                          config=self.services.config)

    def submit(self, task_id: str, version: int | None = None, seed: dict | None = None,
               group_id: str | None = None, options: RunOptions | None = None,
               labels: dict | None = None) -> dict:
        """Create a queued run and schedule it; returns the run record. Call on the loop thread."""
        active, run = self.prepare(task_id, version, seed, group_id, options, labels)
        self._start(active)
        return run

    def prepare(self, task_id: str, version: int | None = None, seed: dict | None = None,
                group_id: str | None = None, options: RunOptions | None = None,
                labels: dict | None = None) -> tuple[ActiveRun, dict]:
        """Check the task and record the queued run (store calls only: any thread may do it, which keeps
        them off the loop); `start` it on the loop thread next."""
        options = options or RunOptions()
        keep, overrides = options.keep, options.overrides()
        task = self.load_task(task_id, version, seed)
        if options.start_step >= len(task.steps):
            raise ValidationError(f"--start-step {options.start_step} is past the last step of task {task_id} "
                                  f"(its {len(task.steps)} steps are 0 to {len(task.steps) - 1}); nothing was started",
                                  hint="`agentenv task get --id ID` lists the steps in order")
        self._config_preflight(task, task_id, overrides, skip=options.start_step)
        run_id = new_run_id(task_id)
        state = new_state(seed) if options.context is None else starting_state(options.context, seed, task,
                                                                               options.start_step)
        state["metadata"].update({"task_id": task_id, "run_group_id": group_id, "user_overrides": overrides})
        if options.start_step:
            state["metadata"]["start_step"] = options.start_step
        run = self.store.runs.create({
            "run_id": run_id, "task_id": task_id, "task_version": task.version, "group_id": group_id,
            "status": "queued", "owner": self.owner, "task_name": task_id.rsplit("/", 1)[-1],
            "total_steps": len(task.steps), "seed": seed or {}, "labels": labels or {}, "generation": 0,
            "steps": {s.id: {"status": "waiting", "type": s.type} for s in task.steps},
            "levels": task.levels(), "edges": task.edges, "keep": keep, "overrides": overrides,
        })
        self.store.runs.journal_append(run_id, "__seed__", "seed", {"state": state}, 0)
        self.store.events.append("run.queued", {"task_id": task_id, "task_version": task.version,
                                                "total_steps": len(task.steps)}, run_id=run_id)
        active = ActiveRun(run_id, task, state, options=options)
        if options.start_step:
            run = self._skip_to(active, options.start_step)
        return active, run

    def start(self, active: ActiveRun) -> None:
        """Schedule a run `prepare` recorded. Call on the loop thread."""
        self._start(active)

    def start_recorded(self, run_id: str) -> None:
        """Start a run another runner's `prepare` recorded (a Ray worker takes a run its hub queued): its state,
        and the steps --start-step skipped, come from the journal; its generation stays. Call on the loop."""
        run = self.store.runs.get(run_id)
        task = self.load_task(run["task_id"], run["task_version"], run.get("seed"))
        state, done, executed = _replay_journal(self.store.runs.journal(run_id), task)
        options = RunOptions.from_stored(run.get("overrides"), keep=bool(run.get("keep")))
        self._start(ActiveRun(run_id, task, state, done=done, executed=executed,
                              generation=int(run.get("generation") or 0), options=options))

    def _skip_to(self, active: ActiveRun, start_step: int) -> dict:
        """--start-step: the steps before it count as done (the reference's completed steps), journaled as
        such so a resume keeps them; their teardown is owed, for what the starting context says they deployed."""
        skipped = active.task.steps[:start_step]
        for step in skipped:
            active.done[step.id] = "success"
            active.executed.append(step.id)
            self.store.runs.journal_append(active.run_id, step.id, "success", {
                "state": copy.deepcopy(active.state), "error": None, "duration_s": 0.0, "skipped": "start_step"}, 0)
        run = self.store.runs.get(active.run_id)
        steps = run.get("steps") or {}
        for step in skipped:
            steps[step.id] = {**steps.get(step.id, {}), "status": "skipped",
                              "reason": f"before --start-step {start_step}"}
        self.store.runs.update(active.run_id, {"steps": steps, "start_step": start_step})
        self.store.events.append("run.start_step", {"start_step": start_step, "skipped_steps": [s.id for s in skipped]},
                                 run_id=active.run_id)
        active.tracker = StateTracker(active.state)  # the skipped steps' entries hold the whole state
        return self.store.runs.get(active.run_id)

    def _config_preflight(self, task: Any, task_id: str, overrides: dict, skip: int = 0) -> None:
        """Steps that need configuration (a model endpoint, say) say so before anything deploys (the
        first `skip`, before --start-step, are not run)."""
        problems = []
        for step in task.steps[skip:]:
            for problem in step.config_preflight(self.services.config, overrides):
                problems.append(f"step {step.id!r} ({step.type}): {problem}")
        if problems:
            raise ValidationError(f"task {task_id} cannot run with this configuration; nothing was started",
                                  problems=problems, hint="see `agentenv config show`; docs/models.md")

    def resume(self, run_id: str) -> dict:
        """Continue an interrupted, failed or errored run from its journal."""
        run = self.store.runs.get(run_id)
        if run["status"] in ("queued", "running") and run_id in self.active:
            raise ValidationError(f"run {run_id} is still {run['status']}; nothing to resume")
        if run["status"] == "passed":
            raise ValidationError(f"run {run_id} already passed; nothing to resume",
                                  hint="start a new run with `agentenv task run` or `agentenv run`")
        task = self.load_task(run["task_id"], run["task_version"], run.get("seed"))
        generation = int(run.get("generation", 0)) + 1
        state, done, executed = _replay_journal(self.store.runs.journal(run_id), task)
        tracker = StateTracker(state)  # what the journal holds; what forget_lost drops goes in the next entry
        # A step that failed is tried again; only successes are kept, unless what they did is gone.
        done = {sid: st for sid, st in done.items() if st == "success"}
        lost, redo = resume_plan(task, state, set(done), self.services, bool(run.get("torn_down")))
        forget_lost(state, lost, redo)
        done = {sid: st for sid, st in done.items() if sid not in redo}
        if run["status"] == "failed" and len(done) == len(task.steps):
            raise ValidationError(f"run {run_id} finished every step; its score is final",
                                  hint="start a new run to try again")
        self.store.runs.update(run_id, {"status": "queued", "owner": self.owner, "generation": generation,
                                        "error": None, "finished_at": None, "resumed_at": time.time(),
                                        "torn_down": False})
        self.store.events.append("run.resumed", {"generation": generation, "done_steps": sorted(done),
                                                 "lost_steps": lost, "redo_steps": sorted(redo)}, run_id=run_id)
        options = RunOptions.from_stored(run.get("overrides"), keep=bool(run.get("keep")))
        active = ActiveRun(run_id, task, state, done=done, executed=executed, generation=generation,
                           options=options, tracker=tracker)
        self._start(active)
        return self.store.runs.get(run_id)

    def _start(self, active: ActiveRun) -> None:
        self.active[active.run_id] = active
        active.future = asyncio.ensure_future(self._guarded(active))

    def cancel(self, run_id: str, reason: str = "cancelled", interrupted: bool = False) -> bool:
        active = self.active.get(run_id)
        if active is None or active.ended:
            return False
        active.interrupt_reason = reason if interrupted else None
        active.cancelled.set()
        if active.future is not None:
            active.future.cancel()
        return True

    async def wait(self, run_id: str) -> dict:
        active = self.active.get(run_id)
        if active is not None and active.future is not None:
            try:
                await asyncio.shield(active.future)
            except (asyncio.CancelledError, Exception):
                pass
        return self.store.runs.get(run_id)

    # -- running ----------------------------------------------------------------------
    async def _write(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """`fn(*args, **kwargs)` on the store's writer thread, awaited (committed when this returns); run
        here on the loop with a store that has no writer. A cancelled caller still lets the write land."""
        writer = getattr(self.store, "writer", None)
        if writer is None:
            return fn(*args, **kwargs)
        return await asyncio.shield(asyncio.wrap_future(writer.submit(fn, *args, **kwargs)))

    async def _guarded(self, active: ActiveRun) -> None:
        try:
            async with self._run_slots:
                await self._run(active)
        except asyncio.CancelledError:
            if active.ended:  # cancelled while its end was being recorded: it ended as recorded
                return
            await self._finish(active, "interrupted" if active.interrupt_reason else "cancelled",
                               active.interrupt_reason or "cancelled by the operator",
                               teardown=not active.interrupt_reason)
        except StoreError as exc:  # the store's file failed (disk full, damaged): the command reports it
            log.info("run %s stopped: %s", active.run_id, exc.message)
            try:  # still tear its sandboxes down; recording the end fails the same way
                await self._finish(active, "error", exc.message)
            except StoreError:
                pass
        except Exception as exc:  # a runner bug must still leave the run in a final state
            log.exception("run %s crashed", active.run_id)
            await self._finish(active, "error", f"internal error: {exc}")
        finally:
            self.active.pop(active.run_id, None)

    async def _run(self, active: ActiveRun) -> None:
        run_id, task = active.run_id, active.task
        started = time.time()
        self.services.refresh_secrets()
        await self._write(self.store.runs.update, run_id, {"status": "running", "started_at": started})
        self.store.events.append("run.started", {"total_steps": len(task.steps), "generation": active.generation},
                                 run_id=run_id)
        retries: dict[str, int] = {}
        running: dict[str, asyncio.Task] = {}
        slots = asyncio.Semaphore(self._step_concurrency)
        try:
            failure = await self._schedule(active, running, slots, retries)
        except asyncio.CancelledError:
            for fut in running.values():  # cancel the steps too, and let them unwind
                fut.cancel()
            await asyncio.gather(*running.values(), return_exceptions=True)
            raise
        if failure:
            await self._finish(active, "error", failure)
            return
        score = run_score(active.state["metadata"], task)
        status = "passed" if score is None or score >= 1.0 else "failed"
        await self._finish(active, status, None, score=score)

    async def _schedule(self, active: ActiveRun, running: dict[str, asyncio.Task], slots: asyncio.Semaphore,
                        retries: dict[str, int]) -> str | None:
        """Dispatch ready steps until none is left; returns the failure that ended the run, if any."""
        task = active.task
        failure: str | None = None
        while True:
            if failure is None:
                for step in task.steps:
                    if step.id in active.done or step.id in running:
                        continue
                    if all(d in active.done for d in task.edges[step.id]):
                        running[step.id] = asyncio.ensure_future(self._run_step(active, step, slots))
            if not running:
                break
            finished, _ = await asyncio.wait(running.values(), return_when=asyncio.FIRST_COMPLETED)
            # Take every finished step off `running` before acting on any: several can finish in one
            # round, and a failure drains and clears `running` below.
            failed: list[tuple[str, str | None]] = []
            for step_id in [sid for sid, f in running.items() if f in finished]:
                ok, error = running.pop(step_id).result()
                if ok or not task.step(step_id).fail_task_on_error:
                    active.done[step_id] = "success" if ok else "failure"
                else:
                    failed.append((step_id, error))
            if not failed:
                continue
            retryable = [(sid, self._retry_anchor(task.step(sid), retries)) for sid, _ in failed]
            if all(anchor for _, anchor in retryable):
                await self._drain(active, running)
                running.clear()
                for step_id, anchor in retryable:
                    retries[step_id] = retries.get(step_id, 0) + 1
                    await self._roll_back(active, str(anchor), step_id, retries[step_id])
                continue
            failures = [f"step {sid!r} failed: {error}" for sid, error in failed]
            failures += await self._drain(active, running)
            failure = "; ".join(failures)
            running.clear()
        return failure

    @staticmethod
    def _retry_anchor(step: Any, retries: dict[str, int]) -> str | None:
        """Where a failed step's retry_config restarts it, while it has retries left; else None."""
        config = step.retry_config
        if config is None or retries.get(step.id, 0) >= config.max_retries:
            return None
        return config.retry_from_step_id or step.id

    async def _run_step(self, active: ActiveRun, step, slots: asyncio.Semaphore) -> tuple[bool, str | None]:
        run_id = active.run_id
        async with slots:
            ctx = StepContext(self.services, run_id, step, active.state, active.cancelled, active.options)
            began = time.time()
            await self._write(self._step_status, run_id, step.id, "running", started_at=began)
            self.store.events.append("step.started", {"type": step.type, "index": _index(active.task, step.id)},
                                     run_id=run_id, step_id=step.id)
            active.executed.append(step.id)
            error: str | None = None
            detail: str | None = None
            for note in step.cloud_only_notes():  # a reference field set here that means nothing locally
                ctx.log(note, level="warning")  # shown by `agentenv run` as a note
            try:
                await step.execute(ctx)
            except asyncio.CancelledError:
                raise
            except AgentenvError as exc:
                error = exc.message + (f" (hint: {exc.hint})" if exc.hint else "")
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
                detail = traceback.format_exc(limit=8)
            took = time.time() - began
            status = "success" if error is None else "failure"
            # What a step read from a secret (a script that found it) never reaches the store.
            error, detail = self.services.mask(error), self.services.mask(detail)
            self.services.mask(active.state)
            if error is not None and not step.fail_task_on_error:
                active.state["metadata"].setdefault("failed_steps", []).append({"step_id": step.id, "error": error})
            # Journal what the step changed in the state: enough to resume from here after a crash. The entry
            # and the step's status are one write, committed before the step counts as finished.
            assert active.tracker is not None
            journal = {**active.tracker.changes(active.state), "error": error, "duration_s": took}
            shown = "passed" if error is None else ("failed" if step.fail_task_on_error else "failed (tolerated)")
            await self._write(self._record_step_end, run_id, step.id, status, journal, active.generation, shown,
                              finished_at=time.time(), duration_s=round(took, 4), error=error)
            self.store.events.append("step.finished", {"status": shown, "duration_s": took, "error": error,
                                                       "traceback": detail, "type": step.type},
                                     run_id=run_id, step_id=step.id)
            return error is None, error

    def _record_step_end(self, run_id: str, step_id: str, status: str, journal: dict, generation: int, shown: str,
                         **fields: Any) -> None:
        self.store.runs.journal_append(run_id, step_id, status, journal, generation)
        self._step_status(run_id, step_id, shown, **fields)

    def _step_status(self, run_id: str, step_id: str, status: str, **fields: Any) -> None:
        """Set one step's status in the run record (a read-modify-write: run it through `_write`)."""
        def change(run: dict) -> dict:
            steps = run.get("steps") or {}
            steps[step_id] = {**steps.get(step_id, {}), "status": status, **fields}
            return {"steps": steps, "current_step": step_id if status == "running" else None}
        self._update_with(run_id, change)

    def _update_with(self, run_id: str, change: Callable[[dict], dict]) -> None:
        """Merge `change(run)` into the run: in one read where the store can (RunStore.update_with), else
        a get and an update."""
        update_with = getattr(self.store.runs, "update_with", None)
        if update_with is not None:
            update_with(run_id, change)
        else:
            self.store.runs.update(run_id, change(self.store.runs.get(run_id)))

    async def _drain(self, active: ActiveRun, running: dict[str, asyncio.Task]) -> list[str]:
        """Let the steps still going finish, and keep what they did (a retry must not run a
        step outside its span again just because it was finishing while another one failed).
        Returns the failures of the ones that failed the task meanwhile."""
        if not running:
            return []
        results = await asyncio.gather(*running.values(), return_exceptions=True)
        failures = []
        for step_id, result in zip(running, results):
            if isinstance(result, BaseException):
                continue
            ok, error = result
            if ok or not active.task.step(step_id).fail_task_on_error:
                active.done[step_id] = "success" if ok else "failure"
            else:
                failures.append(f"step {step_id!r} failed: {error}")
        return failures

    async def _roll_back(self, active: ActiveRun, anchor: str, failed_step: str, attempt: int) -> None:
        """Undo the span from `anchor` on and run it again (retry_config)."""
        task = active.task
        span = {anchor} | {s.id for s in task.steps if anchor in _ancestors(task.edges, s.id)}
        for step_id in reversed(list(active.executed)):
            if step_id in span:
                await self._teardown_step(active, step_id)
                active.executed.remove(step_id)
        for step_id in span:
            active.done.pop(step_id, None)
            await self._write(self._step_status, active.run_id, step_id,
                              "retrying" if step_id == failed_step else "waiting")
        active.generation += 1
        await self._write(self.store.runs.update, active.run_id, {"generation": active.generation})
        self.store.events.append("step.retry", {"anchor": anchor, "attempt": attempt}, run_id=active.run_id,
                                 step_id=failed_step)

    async def _teardown_step(self, active: ActiveRun, step_id: str) -> None:
        step = active.task.step(step_id)
        ctx = StepContext(self.services, active.run_id, step, active.state, asyncio.Event(), active.options)
        try:
            await step.teardown(ctx)
        except Exception as exc:
            self.store.events.append("teardown.failed", {"error": f"{type(exc).__name__}: {exc}"},
                                     run_id=active.run_id, step_id=step_id)

    async def _finish(self, active: ActiveRun, status: str, error: str | None, score: float | None = None,
                      teardown: bool = True) -> None:
        torn_down = teardown and not active.options.keep
        error = self.services.mask(error)
        self.services.mask(active.state)
        # the envs as the episode left them, read before teardown (what replay and `runs diff` compare)
        env_end = self.services.mask(await capture_envs(self.services, active.state)) \
            if teardown and capture_enabled() else None
        if torn_down:
            for step_id in reversed(active.executed):
                await self._teardown_step(active, step_id)
        # the state as it ends (nothing changes it after this: the run is over), and its run.finished event in the
        # same write, under the store's lock: a reader that sees the final status finds the event too (appended
        # after the write, a client that waited for the status could query the events a moment too early)
        def finish_and_tell() -> None:
            self._record_finish(active.run_id, status, error, score, torn_down, active.state, env_end)
            active.ended = True
            self.store.events.append("run.finished", {"status": status, "score": score, "error": error},
                                     run_id=active.run_id)

        await self._write(finish_and_tell)


    def _record_finish(self, run_id: str, status: str, error: str | None, score: float | None, torn_down: bool,
                       state: dict, env_end: dict | None = None) -> None:
        def change(run: dict) -> dict:
            finished = time.time()
            steps = run.get("steps") or {}
            for info in steps.values():
                if status == "interrupted":  # resume runs it again; what never started stays waiting
                    if info.get("status") in ("running", "retrying"):
                        info["status"] = "interrupted"
                elif info.get("status") in ("waiting", "running", "retrying"):
                    info["status"] = "skipped"
            return {
                "status": status, "finished_at": finished, "score": score, "error": error, "steps": steps,
                "current_step": None, "duration_s": round(finished - (run.get("started_at") or finished), 4),
                "torn_down": torn_down,
                "verifications": state["metadata"].get("verifications", {}),
                "context": state,
                **({"env_end": env_end} if env_end else {}),
            }
        self._update_with(run_id, change)


def starting_state(context: Any, seed: dict | None, task: Task, start_step: int) -> dict:
    """The state a run starts from with --context-json: the given context over a new state (the reference's
    TaskStepContext keys; others it writes, like agent_model or instance_id, are kept as they are). The
    run's seed, when given, replaces the context's; failed_steps of steps this run runs again are dropped."""
    state = new_state(seed)
    for key, value in copy.deepcopy(dict(context)).items():
        if key in state and key != "metadata" and not isinstance(value, list):
            raise ValidationError(f"the starting context's {key!r} is a list, not {type(value).__name__}",
                                  hint="give --context-json a file written by --output-dir")
        if key != "metadata":
            state[key] = value
    metadata = context.get("metadata", {})
    if not isinstance(metadata, dict):
        raise ValidationError(f"the starting context's 'metadata' is an object, not {type(metadata).__name__}",
                              hint="give --context-json a file written by --output-dir")
    state["metadata"] = {**state["metadata"], **copy.deepcopy(metadata)}
    if seed:
        state["metadata"]["seed"] = dict(seed)
    rerun = {s.id for s in task.steps[start_step:]}
    failed = state["metadata"].get("failed_steps")
    state["metadata"]["failed_steps"] = [f for f in failed if not (isinstance(f, dict) and f.get("step_id") in rerun)] \
        if isinstance(failed, list) else []
    return state


def _index(task: Task, step_id: str) -> int:
    return next(i for i, s in enumerate(task.steps) if s.id == step_id) + 1


def _replay_journal(entries: list[dict], task: Task) -> tuple[dict, dict[str, str], list[str]]:
    """State, outcomes and executed steps as the journal last recorded them."""
    state = new_state()
    done: dict[str, str] = {}
    executed: list[str] = []
    known = {s.id for s in task.steps}
    for entry in entries:
        state = apply_entry(state, entry["body"])
        if entry["step_id"] == "__seed__" or entry["step_id"] not in known:
            continue
        done[entry["step_id"]] = entry["status"]
        if entry["step_id"] not in executed:
            executed.append(entry["step_id"])
    return state, done, executed
