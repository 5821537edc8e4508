"""Sessions: how every command reaches the store.

    with connect() as session:
        session.store.documents.put("tasks", "t", {...})
        run = session.call("runner.submit", task_id="t")

If no hub runs for the project, this process becomes it (opens the DuckDB file, serves the
socket) and stays up, once its own command is done, until its clients are done (at the end of
the command, so its output is not held up). Otherwise calls go over the socket.
"""

from __future__ import annotations

import json
import queue
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from agentenv_local.errors import HubError, from_wire
from agentenv_local.paths import ProjectPaths, project_paths

from . import wire
from .lock import HubLock


class Session:
    is_hub = False
    paths: ProjectPaths
    config: Any
    store: Any

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def subscribe(self, run_ids: list[str] | None = None) -> "EventStream":
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class EventStream:
    """Live events; iterate with `get(timeout)` (None on timeout). Close when done."""

    def __init__(self) -> None:
        self.queue: queue.Queue = queue.Queue()
        self._closer = lambda: None

    def get(self, timeout: float | None = None) -> dict | None:
        try:
            return self.queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        self._closer()


# -- this process is the hub ---------------------------------------------------------
class LocalSession(Session):
    is_hub = True

    def __init__(self, hub, linger_s: float = 0.0, defer_linger: bool = True):
        self.hub = hub
        self.paths = hub.paths
        self.config = hub.config
        self.store = hub.store
        self._linger_s = linger_s
        self._defer_linger = defer_linger
        self._closed = False

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        kwargs.pop("attach", None)  # in-process runs die with us anyway
        return self.hub.call(method, list(args), kwargs)

    def subscribe(self, run_ids: list[str] | None = None) -> EventStream:
        stream = EventStream()
        wanted = set(run_ids or [])
        stream._closer = self.store.events.subscribe(
            lambda e: stream.queue.put(e) if not wanted or e.get("run_id") in wanted else None)
        return stream

    def close(self) -> None:
        """Close the hub, after serving the other commands that still use it.

        With `defer_linger` (the default) inside a CLI command, a hub that still has clients or
        runs does not hold up the rest of the command: it serves them when the command is over,
        after it has printed everything.
        """
        if self._closed:
            return
        self._closed = True
        if (not self.hub.long_lived and self._defer_linger and (self.hub.busy() or self._linger_s > 0)
                and _at_command_end(self._linger_and_close)):
            return
        self._linger_and_close()

    def _linger_and_close(self) -> None:
        try:
            if not self.hub.long_lived:
                for stream in (sys.stdout, sys.stderr):  # this command's output goes out first
                    try:
                        stream.flush()
                    except (OSError, ValueError, AttributeError):
                        pass
                if self.hub.busy() and _isatty(sys.stderr):
                    print("agentenv: this command is the hub for other commands still running in this project; "
                          "it exits when they finish (Ctrl-C interrupts their runs)", file=sys.stderr, flush=True)
                self.hub.linger(self._linger_s)
        except KeyboardInterrupt:
            pass
        finally:
            self.hub.close()


def _at_command_end(fn) -> bool:
    """Call `fn` when the running click command's root context closes; False outside a command."""
    click = sys.modules.get("click")
    ctx = click.get_current_context(silent=True) if click is not None else None
    if ctx is None:
        return False
    ctx.find_root().call_on_close(fn)
    return True


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


# -- another process is the hub ------------------------------------------------------
class _HubGone(HubError):
    """The hub closed the connection without answering."""


class _Connection:
    def __init__(self, path: Path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))
        self.file = self.sock.makefile("rwb")
        self.lock = threading.Lock()
        self.next_id = 0

    def request(self, method: str, args: list, kwargs: dict) -> Any:
        with self.lock:
            self.next_id += 1
            self.file.write(wire.encode({"id": self.next_id, "method": method, "args": args, "kwargs": kwargs}))
            self.file.flush()
            while True:
                line = self.file.readline()
                if not line:
                    raise _HubGone("the hub went away in the middle of a call",
                                   hint="run the command again; it becomes the hub if none is left")
                if line.strip():
                    break
        response = wire.decode(line)
        if "error" in response:
            raise from_wire(response["error"])
        return response.get("result")

    def close(self) -> None:
        try:
            self.file.close()
            self.sock.close()
        except OSError:
            pass


class _StoreProxy:
    def __init__(self, session: "RemoteSession", namespace: str):
        self._session, self._namespace = session, namespace

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda *args, **kwargs: self._session.call(f"{self._namespace}.{name}", *args, **kwargs)


class _RemoteStore:
    def __init__(self, session: "RemoteSession"):
        for namespace in ("documents", "records", "runs", "events", "objects"):
            setattr(self, namespace, _StoreProxy(session, namespace))


class RemoteSession(Session):
    def __init__(self, paths: ProjectPaths, config: Any, conn: _Connection):
        self.paths, self.config, self._conn = paths, config, conn
        self.store = _RemoteStore(self)
        self._streams: list[_Connection] = []

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._conn.request(method, list(args), kwargs)

    def subscribe(self, run_ids: list[str] | None = None) -> EventStream:
        conn = _Connection(self.paths.socket_file)
        self._streams.append(conn)
        conn.file.write(wire.encode({"id": 0, "method": "events.subscribe", "kwargs": {"run_ids": run_ids}}))
        conn.file.flush()
        conn.file.readline()  # "subscribed"
        stream = EventStream()

        def pump() -> None:
            try:
                for line in conn.file:
                    if line.strip():
                        stream.queue.put(wire.decode(line)["event"])
            except (OSError, ValueError):  # closed by us (stream.close) or reset by the hub
                pass
            stream.queue.put({"kind": "hub.gone", "body": {}})

        threading.Thread(target=pump, name="event-stream", daemon=True).start()
        stream._closer = conn.close
        return stream

    def close(self) -> None:
        for conn in self._streams:
            conn.close()
        self._conn.close()


# -- connecting ----------------------------------------------------------------------
def connect(start: Path | None = None, config: Any = None, long_lived: bool = False,
            become_hub: bool = True, defer_linger: bool = True) -> Session:
    """A session on this project's store: become the hub, or reach the one that runs.

    `defer_linger`: if this process becomes the hub and other commands still use it when the
    session closes inside a CLI command, serve them when the command ends (else, and with False,
    `close()` waits for them).
    """
    paths = project_paths(start)
    if config is None:
        from agentenv_local.config import load_config

        config = load_config(start)
    paths.ensure()
    from agentenv_local.plugins import register_config_impls

    for problem in register_config_impls(config):
        import logging

        logging.getLogger(__name__).warning(problem)
    lock = HubLock(paths.lock_file)
    timeout = float(config.get("hub.start_timeout_s") or 5.0)
    deadline = time.monotonic() + timeout
    while True:
        if become_hub and lock.try_acquire():
            from .server import Hub

            try:
                hub = Hub(paths, config, lock, long_lived=long_lived)
            except BaseException:
                lock.release()
                raise
            return LocalSession(hub, linger_s=float(config.get("hub.linger_s") or 0.0), defer_linger=defer_linger)
        if long_lived:
            raise HubError(f"a hub is already running for {paths.state_dir}" + _pid_note(paths),
                           hint="stop it with `agentenv down`, or just use it: commands reach it by themselves")
        try:
            conn = _Connection(paths.socket_file)
        except (FileNotFoundError, ConnectionRefusedError):
            if not become_hub and not lock.is_held_elsewhere():
                raise HubError(f"no hub is running for {paths.state_dir}")
        else:
            # The hello makes the hub count us as a client; a hub that is closing hangs up on it
            # instead, and we go round again (its lock is released in a moment: we become the hub).
            try:
                conn.request("hub.hello", [], {})
                return RemoteSession(paths, config, conn)
            except (_HubGone, OSError):
                conn.close()
        if time.monotonic() > deadline:
            raise HubError(f"the hub for {paths.state_dir} holds the lock but does not answer" + _pid_note(paths),
                           hint="if that process is stuck, stop it (kill PID) and run the command again")
        time.sleep(0.02)  # the hub is still starting: its socket appears in a moment


def _pid_note(paths: ProjectPaths) -> str:
    try:
        return f" (pid {json.loads(paths.hub_info_file.read_text())['pid']})"
    except (OSError, ValueError, KeyError):
        return ""


def hub_status(start: Path | None = None) -> dict | None:
    """The running hub's status, or None when none runs. Never becomes the hub."""
    paths = project_paths(start)
    if not paths.state_dir.exists() or not HubLock(paths.lock_file).is_held_elsewhere():
        return None
    try:
        conn = _Connection(paths.socket_file)
    except (FileNotFoundError, ConnectionRefusedError):
        return {"pid": None, "state": "starting or stuck", "state_dir": str(paths.state_dir)}
    try:
        return conn.request("hub.status", [], {})
    except (_HubGone, OSError):  # it is closing: it hangs up on new connections
        return {"pid": None, "state": "stopping", "state_dir": str(paths.state_dir)}
    finally:
        conn.close()
