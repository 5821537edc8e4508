"""The hub process side: owns the DuckDB store, runs the runner on an asyncio loop thread, and
serves the control API on a unix socket (one thread per client connection)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import queue
import socket
import socketserver
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentenv_local import __version__
from agentenv_local.errors import AgentenvError, HubError
from agentenv_local.paths import ProjectPaths
from agentenv_local.tasks.options import RunOptions

from . import wire
from .engine import RunEngine
from .lock import HubLock

if TYPE_CHECKING:
    from agentenv_local.executors.dispatch import Executors
    from agentenv_local.hosting.agents.instances import AgentInstances
    from agentenv_local.hosting.envs.manager import EnvManager
    from agentenv_local.tasks.runner import Runner
    from agentenv_local.tasks.services import RunServices

log = logging.getLogger(__name__)

STORE_NAMESPACES = tuple(wire.STORE_METHODS)


class Hub:
    """Owns the store for one project. Create with `Hub.start(paths, config, lock)`."""

    def __init__(self, paths: ProjectPaths, config: Any, lock: HubLock, long_lived: bool = False):
        from agentenv_local.plugins import registry

        self.paths = paths
        self.config = config
        self.lock = lock
        self.long_lived = long_lived
        self.session_id = f"{os.getpid()}-{time.time_ns()}"
        flush_ms = int(config.get("store.flush_interval_ms") or 200)
        store_cls = registry().get("stores", "duckdb")
        if store_cls is None:
            raise HubError("the duckdb store is not installed or failed to load: "
                           f"{registry().failure('stores', 'duckdb')}", hint="reinstall agentenv-local")
        from agentenv_local.config import object_stores

        objects = object_stores.resolve(config)  # [store] objects; ConfigError before anything is opened
        self.store = store_cls(paths.store_file, paths.objects_dir, flush_interval=flush_ms / 1000,
                               objects=None if objects.name == object_stores.DEFAULT else objects.factory())
        # Whatever was queued or running under an earlier hub died with it.
        self.interrupted_at_start = self.store.runs.mark_interrupted(lambda owner: False)
        for run_id in self.interrupted_at_start:
            steps = self.store.runs.get(run_id).get("steps") or {}
            for info in steps.values():  # the steps it was running are not running any more
                if info.get("status") in ("running", "retrying"):
                    info["status"] = "interrupted"
            self.store.runs.update(run_id, {"steps": steps, "current_step": None})
            self.store.events.append("run.interrupted", {"reason": "its hub stopped"}, run_id=run_id)
        from agentenv_local.loops import hub_event_loop

        self.loop = hub_event_loop()
        self._loop_thread = threading.Thread(target=self.loop.run_forever, name="hub-loop", daemon=True)
        self._loop_thread.start()
        self._engine: RunEngine | None = None  # built at start if long-lived, else on first need (engine.py)
        self._engine_lock = threading.Lock()
        self._connections: set[int] = set()
        self._attached: dict[int, set[str]] = {}  # connection -> runs it waits on
        self._conn_lock = threading.Lock()
        self._inflight = 0  # requests being answered right now
        # Set (under _conn_lock) once this hub has decided to stop: from then on it takes no new
        # connection, so a client that connects while it closes retries and finds the next hub.
        self._closing = False
        self.shutdown_requested = threading.Event()
        self._server: socketserver.UnixStreamServer | None = None
        from agentenv_local.hosting.leftovers import any_left_running

        if long_lived or any_left_running(self.store):
            self.engine  # noqa: B018 (built now: building it sweeps what a dead hub left running)
        self._serve_socket()
        paths.hub_info_file.write_text(json.dumps({
            "pid": os.getpid(), "started_at": time.time(), "socket": str(paths.socket_file),
            "long_lived": long_lived, "version": __version__}))

    # -- the engine: what executing work needs (engine.py) -------------------------------
    @property
    def engine(self) -> RunEngine:
        with self._engine_lock:
            if self._engine is None:
                if self._closing:  # never start the machinery of a hub that is stopping
                    raise HubError("the hub is stopping", hint="run the command again: it starts a new hub")
                self._engine = RunEngine(self)
            return self._engine

    @property
    def services(self) -> RunServices:
        return self.engine.services

    @property
    def envs(self) -> EnvManager:
        return self.engine.envs

    @property
    def agents(self) -> AgentInstances:
        return self.engine.agents

    @property
    def runner(self) -> Runner:
        return self.engine.runner

    @property
    def executors(self) -> Executors:
        return self.engine.executors

    def _active_runs(self) -> list[str]:
        """The runs in flight; none before the engine is built (nothing could have started one)."""
        return self._engine.active_runs() if self._engine is not None else []

    # -- the socket -------------------------------------------------------------------
    def _serve_socket(self) -> None:
        sock_path = self.paths.socket_file
        sock_path.unlink(missing_ok=True)  # stale: we hold the lock, so no live hub owns it
        hub = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                hub._handle_connection(self.rfile, self.wfile)

        class Server(socketserver.ThreadingUnixStreamServer):
            daemon_threads = True
            # socketserver's default backlog is 5: a burst of commands started together overflowed it (their
            # connects wait for room now, session.connect_unix, but room they should find)
            request_queue_size = socket.SOMAXCONN

        self._server = Server(str(sock_path), Handler)
        os.chmod(sock_path, 0o600)
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
                         name="hub-socket", daemon=True).start()

    def _handle_connection(self, rfile, wfile) -> None:
        conn_id = id(rfile)
        with self._conn_lock:
            if self._closing:
                return  # hang up unanswered: the client's hello fails and it tries again
            self._connections.add(conn_id)
        try:
            for line in rfile:
                if not line.strip():
                    continue
                try:
                    request = wire.decode(line)
                except ValueError:
                    wfile.write(wire.encode({"id": None, "error": {"type": "AgentenvError",
                                                                   "message": "malformed request"}}))
                    continue
                if request.get("method") == "events.subscribe":
                    self._stream_events(request, wfile)
                    return
                response = {"id": request.get("id")}
                with self._conn_lock:
                    self._inflight += 1
                try:
                    response["result"] = self.call(request.get("method", ""), request.get("args") or [],
                                                   request.get("kwargs") or {}, conn_id=conn_id)
                except AgentenvError as exc:
                    response["error"] = exc.to_wire()
                except (TypeError, ValueError, KeyError) as exc:
                    response["error"] = {"type": "AgentenvError", "message": f"{type(exc).__name__}: {exc}"}
                except Exception as exc:
                    log.exception("hub call %s failed", request.get("method"))
                    response["error"] = {"type": "AgentenvError", "message": f"hub error: {type(exc).__name__}: {exc}"}
                finally:
                    with self._conn_lock:
                        self._inflight -= 1
                wfile.write(wire.encode(response))
                wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            with self._conn_lock:
                self._connections.discard(conn_id)
                orphaned = self._attached.pop(conn_id, set())
            for run_id in orphaned if self._engine is not None else ():
                # a worker process interrupts it as the hub would; a Ray run: its worker tears it down
                if self.executors.cancel(run_id, "the command that started it stopped before it finished",
                                         interrupted=True):
                    continue
                # The command waiting on this run is gone (killed, terminal closed): interrupt it
                # without tearing down, so `agentenv runs resume` can pick it up.
                self.on_loop(functools.partial(
                    self.runner.cancel, run_id, "the command that started it stopped before it finished",
                    interrupted=True))

    def _stream_events(self, request: dict, wfile) -> None:
        from .session import event_filter

        params = request.get("kwargs") or {}
        kinds = params.get("kinds")
        wanted = event_filter(params.get("run_ids") or None,
                              [str(k) for k in kinds][:64] if isinstance(kinds, list) else None)
        events: queue.Queue = queue.Queue()
        unsubscribe = self.store.events.subscribe(lambda e: events.put(e) if wanted(e) else None)
        try:
            wfile.write(wire.encode({"id": request.get("id"), "result": "subscribed"}))
            wfile.flush()
            while not self.shutdown_requested.is_set():
                try:
                    batch = [events.get(timeout=0.5)]
                except queue.Empty:
                    wfile.write(b"\n")  # keepalive: also detects a client that went away
                    wfile.flush()
                    continue
                while len(batch) < 500:  # batch bursts into one write
                    try:
                        batch.append(events.get_nowait())
                    except queue.Empty:
                        break
                wfile.write(b"".join(wire.encode({"event": e}) for e in batch))
                wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass
        finally:
            unsubscribe()

    # -- dispatch ---------------------------------------------------------------------
    def call(self, method: str, args: list | None = None, kwargs: dict | None = None, conn_id: int | None = None):
        args, kwargs = list(args or []), dict(kwargs or {})
        namespace, _, name = method.partition(".")
        if namespace in STORE_NAMESPACES:
            store = getattr(self.store, namespace)
            if name not in wire.STORE_METHODS[namespace]:
                if name.startswith("_") or hasattr(store, name):
                    raise HubError(f"{method} is not callable through the hub")
                raise HubError(f"unknown hub method {method!r}")
            return getattr(store, name)(*args, **kwargs)
        handler = self._ops().get(method) if wire.is_hub_method(method) else None
        if handler is None:
            raise HubError(f"unknown hub method {method!r}")
        return handler(*args, conn_id=conn_id, **kwargs)

    def _ops(self) -> dict[str, Callable]:
        return {
            "hub.hello": self._op_hello,
            "hub.status": self._op_status,
            "hub.shutdown": self._op_shutdown,
            "runner.submit": self._op_submit,
            "runner.resume": self._op_resume,
            "runner.cancel": self._op_cancel,
            "runner.review": self._op_review,
            "runner.attach": self._op_attach,
            "envs.deploy": self._op_envs_deploy,
            "envs.instances": self._op_envs_instances,
            "envs.teardown": self._op_envs_teardown,
            "envs.bind_role": self._op_envs_bind_role,
            "envs.admin_token": self._op_envs_admin_token,
            "envs.advance_clock": self._op_envs_advance_clock,  # added for the TUI (issue 6)
            "agents.deploy": self._op_agents_deploy,
            "agents.instances": self._op_agents_instances,
            "agents.teardown": self._op_agents_teardown,
        }

    def on_loop(self, fn: Callable[[], Any], timeout: float | None = 30) -> Any:
        """Run `fn` on the hub's loop thread (the runner is not thread-safe) and return its result."""
        async def call():
            return fn()
        if threading.current_thread() is self._loop_thread:
            return fn()
        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(timeout)

    def _op_hello(self, conn_id=None) -> dict:
        """The handshake every client makes: once answered, this hub stays up for that client."""
        return {"pid": os.getpid(), "version": __version__, "session_id": self.session_id}

    def _op_status(self, conn_id=None) -> dict:
        return {"pid": os.getpid(), "state_dir": str(self.paths.state_dir), "long_lived": self.long_lived,
                "version": __version__, "active_runs": sorted(self._active_runs()),
                "connections": len(self._connections)}

    def _op_shutdown(self, conn_id=None) -> dict:
        self.shutdown_requested.set()
        return {"stopping": True, "pid": os.getpid()}

    def _op_attach(self, run_ids: list[str], conn_id=None) -> bool:
        if conn_id is not None:
            with self._conn_lock:
                self._attached.setdefault(conn_id, set()).update(run_ids)
        return True

    def _op_submit(self, task_id: str, version: int | None = None, seed: dict | None = None,
                   group_id: str | None = None, options: RunOptions | dict | None = None,
                   attach: bool = False, labels: dict | None = None, conn_id=None) -> dict:
        """Start a run; `options` is a RunOptions (a dict of its fields over the socket); `labels` are kept on
        the run record (e.g. the eval that started it)."""
        run_options = RunOptions.from_wire(options)
        run_labels = _checked_labels(labels)
        # The checks and the store writes of a new run here, on the client's thread; only scheduling it
        # takes the loop (which runs every other episode meanwhile).
        remote = self.executors.kind(run_options) != "local"
        if remote:
            self.executors.check(run_options)  # an unusable cluster fails before a run is recorded
        active, run = self.runner.prepare(task_id, version, seed, group_id, run_options, labels=run_labels)
        if remote:
            self.executors.dispatch(run_options, run["run_id"])
        else:
            self.on_loop(lambda: self.runner.start(active))
        if attach:
            self._op_attach([run["run_id"]], conn_id=conn_id)
        return run

    def _op_resume(self, run_id: str, attach: bool = False, conn_id=None) -> dict:
        run_id = self.store.runs.resolve(run_id)
        run = self.on_loop(lambda: self.runner.resume(run_id))
        if attach:
            self._op_attach([run_id], conn_id=conn_id)
        return run

    def _op_cancel(self, run_id: str, conn_id=None) -> dict:
        run_id = self.store.runs.resolve(run_id)
        if self.executors.cancel(run_id):  # its worker tears it down and records it cancelled
            return {"run_id": run_id, "status": "cancelling"}
        if not self.on_loop(lambda: self.runner.cancel(run_id)):
            run = self.store.runs.get(run_id)
            if run["status"] in ("interrupted",):
                # Nothing is executing it any more: tear down what it left and close it.
                self.on_loop(lambda: asyncio.ensure_future(self._close_interrupted(run_id)))
                return {"run_id": run_id, "status": "cancelling"}
            raise HubError(f"run {run_id} is {run['status']}, not running; nothing to cancel")
        return {"run_id": run_id, "status": "cancelling"}

    async def _close_interrupted(self, run_id: str) -> None:
        from agentenv_local.tasks.runner import ActiveRun, _replay_journal

        run = self.store.runs.get(run_id)
        task = self.runner.load_task(run["task_id"], run["task_version"], run.get("seed"))
        state, done, executed = _replay_journal(self.store.runs.journal(run_id), task)
        active = ActiveRun(run_id, task, state, done=done, executed=executed)
        await self.runner._finish(active, "cancelled", "cancelled after it was interrupted")

    def _op_envs_deploy(self, env_id: str | None = None, version: int | None = None,
                        gateway_mode: str | None = None, resume: str | None = None,
                        control_plane_auth: bool | None = None, ttl_seconds: int | None = None,
                        conn_id=None) -> dict:
        future = asyncio.run_coroutine_threadsafe(
            self.envs.deploy(env_id, version, gateway_mode=gateway_mode, resume=resume,
                             control_plane_auth=control_plane_auth, ttl_seconds=ttl_seconds), self.loop)
        return future.result(600)

    def _op_envs_admin_token(self, instance_id: str, conn_id=None) -> str | None:
        """An instance's control-plane credential (the socket is the owner's only: mode 0600)."""
        self.envs.instance(instance_id)  # NotFoundError for an unknown instance
        return self.envs.admin_token(instance_id)

    def _op_envs_instances(self, status: str | None = None, conn_id=None) -> list[dict]:
        return self.envs.instances(status)

    def _op_envs_bind_role(self, instance_id: str, role: str, conn_id=None) -> str:
        found, answer = self._on_a_worker("envs.bind_role", instance_id, role=role)
        return answer if found else self.on_loop(lambda: self.envs.bind_role(instance_id, role))

    def _on_a_worker(self, method: str, instance_id: str, **kwargs: Any) -> tuple[bool, Any]:
        """An `envs.*` call on an instance a run deployed in a worker process: (True, that worker's answer);
        (False, None) for the hub's own instances."""
        if self._engine is None or self.envs.is_live(instance_id):
            return False, None
        return self.executors.env_instance_call(method, [instance_id], kwargs)

    # -- added for the TUI (issue 6): advance a live env instance's virtual clock by hand -----
    def _op_envs_advance_clock(self, instance_id: str, seconds: float | str, conn_id=None) -> dict:
        """Move a deployed env's (stepped or frozen) clock forward, then let its time triggers fire."""
        found, answer = self._on_a_worker("envs.advance_clock", instance_id, seconds=seconds)
        if found:
            return answer
        return asyncio.run_coroutine_threadsafe(self.envs.advance_clock(instance_id, seconds), self.loop).result(30)

    def _op_envs_teardown(self, instance_id: str, conn_id=None) -> dict:
        found, answer = self._on_a_worker("envs.teardown", instance_id)
        if found:
            return answer
        return asyncio.run_coroutine_threadsafe(self.envs.teardown(instance_id), self.loop).result(120)

    def _op_agents_deploy(self, agent_id: str, version: int | None = None, runtime: str = "in_hub",
                          config: dict | None = None, ttl_seconds: int | None = None, conn_id=None) -> dict:
        return asyncio.run_coroutine_threadsafe(
            self.agents.deploy(agent_id, version, runtime=runtime, config=config, ttl_seconds=ttl_seconds),
            self.loop).result(300)

    def _op_agents_instances(self, status: str | None = None, conn_id=None) -> list[dict]:
        return self.agents.instances(status)

    def _op_agents_teardown(self, instance_id: str, conn_id=None) -> dict:
        return asyncio.run_coroutine_threadsafe(self.agents.teardown(instance_id), self.loop).result(120)

    def _op_review(self, review_id: str, decision: str, conn_id=None) -> dict:
        if decision not in ("continue", "abort"):
            raise HubError(f"a review decision is 'continue' or 'abort', not {decision!r}")
        record = self.store.records.find("reviews", review_id)
        if record is None:
            raise HubError(f"no review {review_id!r} is pending",
                           hint="see pending reviews with `agentenv runs show RUN`")
        if record["body"].get("decision"):
            raise HubError(f"review {review_id} was already decided: {record['body']['decision']}")
        self.store.records.save("reviews", review_id, {**record["body"], "decision": decision,
                                                       "status": "decided", "decided_at": time.time()})
        self.on_loop(lambda: self.services.notify_review(review_id))
        self.executors.notify_review(review_id)  # a run in a worker process waits there
        return {"review_id": review_id, "decision": decision}

    # -- lifetime ---------------------------------------------------------------------
    def busy(self) -> bool:
        with self._conn_lock:
            return bool(self._connections) or bool(self._active_runs())

    def serve_until_shutdown(self) -> None:
        while not self.shutdown_requested.wait(0.2):
            pass

    def linger(self, extra_s: float = 0.0) -> None:
        """A short-lived hub stays while clients are attached or runs are active."""
        idle_since = None
        while not self.shutdown_requested.is_set():
            if self.busy():
                idle_since = None
            else:
                idle_since = idle_since or time.monotonic()
                if time.monotonic() - idle_since >= extra_s and self._stop_taking_clients(only_if_idle=True):
                    return
            time.sleep(0.05)

    def _stop_taking_clients(self, only_if_idle: bool = False) -> bool:
        """Refuse new connections from now on; with only_if_idle, only when none is open and no
        run is active (checked under the same lock new connections register under, so no client
        slips in between the check and the decision)."""
        with self._conn_lock:
            if only_if_idle and (self._connections or self._active_runs()):
                return False
            self._closing = True
            return True

    def close(self) -> None:
        self._stop_taking_clients()
        with self._engine_lock:  # none is built from now on: _closing is set
            engine = self._engine
        if engine is not None:
            engine.stop_runs()
        self.shutdown_requested.set()  # ends event streams
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        deadline = time.monotonic() + 5  # let calls being answered finish before the store closes
        while self._inflight and time.monotonic() < deadline:
            time.sleep(0.01)
        if engine is not None:
            engine.close()
        with contextlib.suppress(Exception):  # e.g. a library's watcher task, left to be destroyed pending otherwise
            asyncio.run_coroutine_threadsafe(_cancel_leftover_tasks(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._loop_thread.join(timeout=5)
        if not self._loop_thread.is_alive():
            # Closed here, not by the garbage collector at exit: by then its self-pipe's socket may be gone
            # first, and BaseEventLoop.__del__ prints "Invalid file descriptor: -1" into the command's stderr.
            self.loop.close()
        try:
            self.store.close()  # raises a StoreError (disk full, damaged) after closing the file
        finally:
            self.paths.socket_file.unlink(missing_ok=True)
            self.paths.hub_info_file.unlink(missing_ok=True)
            self.lock.release()


async def _cancel_leftover_tasks() -> None:
    """Cancel what still runs on the hub's loop once everything it owns has stopped, and let it unwind:
    a task still pending when the loop stops is destroyed at exit with an error on stderr (sse_starlette's
    per-loop shutdown watcher, started by any SSE response, never ends by itself)."""
    current = asyncio.current_task()
    leftovers = [task for task in asyncio.all_tasks() if task is not current]
    for task in leftovers:
        task.cancel()
    if leftovers:
        await asyncio.wait(leftovers, timeout=5)


def _checked_labels(labels: Any) -> dict[str, Any]:
    """A run's labels as a client sent them: a small flat object of names to plain values."""
    from agentenv_local.errors import ValidationError

    if labels is None:
        return {}
    if (not isinstance(labels, dict) or len(labels) > 32
            or not all(isinstance(k, str) and len(k) <= 64 for k in labels)
            or not all(v is None or isinstance(v, str | int | float | bool) for v in labels.values())):
        raise ValidationError("run labels must be an object of at most 32 names (<= 64 characters) to plain values")
    return dict(labels)
