"""Sessions: how every command reaches the store.

    with connect() as session:
        session.store.documents.put("tasks", "t", {...})
        run = HubMethods(session).submit_run("t")  # the hub's own methods, typed (methods.py)

If no hub runs for the project, this process becomes it (opens the DuckDB file, serves the
socket) and stays up, once its own command is done, until its clients are done (at the end of
the command, so its output is not held up). Otherwise calls go over the socket.
"""

from __future__ import annotations

import json
import queue
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
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

    def subscribe(self, run_ids: list[str] | None = None, kinds: list[str] | None = None) -> "EventStream":
        """The hub's events as they happen: of `run_ids` (None: every run), of `kinds` (a name ending in "."
        is every kind it starts; None: every kind)."""
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def event_filter(run_ids: list[str] | None, kinds: list[str] | None) -> Callable[[dict], bool]:
    """Whether an event is of `run_ids` (None: any run) and `kinds` (a name ending in "." is every kind it
    starts; None: any kind)."""
    runs = set(run_ids or [])
    exact = {k for k in kinds or () if not k.endswith(".")}
    prefixes = tuple(k for k in kinds or () if k.endswith("."))

    def wanted(event: dict) -> bool:
        if runs and event.get("run_id") not in runs:
            return False
        if kinds is None:
            return True
        kind = str(event.get("kind") or "")
        return kind in exact or kind.startswith(prefixes)
    return wanted


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

    def subscribe(self, run_ids: list[str] | None = None, kinds: list[str] | None = None) -> EventStream:
        stream = EventStream()
        wanted = event_filter(run_ids, kinds)
        stream._closer = self.store.events.subscribe(lambda e: stream.queue.put(e) if wanted(e) else None)
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


# Calls the hub bounds itself (deploying an env waits up to 600 s): the client waits as long as
# the hub is alive. Every other call (the store, hub.*) is short: it fails after SHORT_CALL_MAX_S.
_LONG_NAMESPACES = ("runner.", "envs.", "agents.")
SHORT_CALL_MAX_S = 120.0
_INSTANT = ("hub.hello", "hub.status", "hub.shutdown", "events.subscribe")
_TICK_S = 1.0  # how often a waiting client checks that the hub is still alive
_SEND_TIMEOUT_S = 60.0


def connect_unix(path: Path, timeout: float) -> socket.socket:
    """A connected socket to the hub at `path`, waiting up to `timeout` seconds for room in its listen backlog.

    Not `settimeout()` before `connect()`: that makes the socket non-blocking, and a non-blocking connect to a
    unix socket whose backlog is full fails at once with EAGAIN ("Resource temporarily unavailable") instead of
    waiting, which is how 12 commands started together lost runs. A blocking connect waits for room, bounded by
    SO_SNDTIMEO (the kernel's bound for a unix connect); when that runs out it is a TimeoutError, as before."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        seconds = max(timeout, 0.001)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO,
                        struct.pack("ll", int(seconds), int((seconds % 1) * 1_000_000)))
        try:
            sock.connect(str(path))
        except BlockingIOError:
            raise TimeoutError(f"the hub's socket {path} had no room for a new connection within {timeout:g} s") \
                from None
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 0, 0))
        sock.settimeout(timeout)
    except BaseException:
        sock.close()
        raise
    return sock


class _Connection:
    """One socket to the hub. Reads never block for good: while it waits for an answer, it checks
    every second that the hub's process is not stopped (kill -STOP, Ctrl-Z), and every `answer_s`/2
    that the hub still answers a hello on another connection (a busy hub does, a stuck one not)."""

    def __init__(self, paths: ProjectPaths, answer_s: float = 5.0, pid: int | None = None):
        # the project's paths, not just the socket's: a deep project's socket is not in its state folder
        self.paths, self.answer_s, self.pid = paths, answer_s, pid
        self.sock = connect_unix(paths.socket_file, answer_s)
        self._buf = bytearray()
        self.lock = threading.Lock()
        self.next_id = 0

    def send(self, message: dict) -> None:
        self.sock.settimeout(_SEND_TIMEOUT_S)
        self.sock.sendall(wire.encode(message))

    def readline(self, method: str = "", timeout: float | None = 0.0, watch: bool = True) -> bytes:
        """The next line (b"" when the hub hung up). `timeout` 0: the call's own bound (short or
        long by `method`); None: wait as long as the hub is alive. `watch` False: just block."""
        if timeout == 0.0:
            timeout = None if method.startswith(_LONG_NAMESPACES) else SHORT_CALL_MAX_S
        started = last_probe = time.monotonic()
        self.sock.settimeout(_TICK_S if watch else None)
        searched = 0  # a long answer comes in many chunks: look for the newline in new bytes only
        while (end := self._buf.find(b"\n", searched)) < 0:
            searched = len(self._buf)
            try:
                chunk = self.sock.recv(1 << 16)
            except TimeoutError:
                now = time.monotonic()
                if _stopped(self._hub_pid()):
                    raise _unresponsive(self.paths, self._hub_pid(), method, stopped=True) from None
                if method in _INSTANT:  # a live hub answers these at once, busy or not
                    if now - started >= self.answer_s:
                        raise _unresponsive(self.paths, self._hub_pid(), method) from None
                elif now - last_probe >= self.answer_s / 2:  # a busy hub still answers a hello
                    last_probe = now
                    if not _answers_hello(self.paths.socket_file, self.answer_s / 2):
                        raise _unresponsive(self.paths, self._hub_pid(), method) from None
                if timeout is not None and now - started > timeout:
                    raise HubError(f"the hub (pid {self._hub_pid() or '?'}) did not answer {method} within "
                                   f"{timeout:.0f} s, though it is alive",
                                   hint="it may be overloaded: try again, or restart it with `agentenv down`")
                continue
            if not chunk:
                line, self._buf = bytes(self._buf), bytearray()
                return line
            self._buf += chunk
        line = bytes(self._buf[:end + 1])
        del self._buf[:end + 1]
        return line

    def _hub_pid(self) -> int | None:
        if self.pid is None:
            self.pid = hub_pid(self.paths)
        return self.pid

    def request(self, method: str, args: list, kwargs: dict) -> Any:
        with self.lock:
            self.next_id += 1
            self.send({"id": self.next_id, "method": method, "args": args, "kwargs": kwargs})
            while True:
                line = self.readline(method)
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
            self.sock.close()
        except OSError:
            pass


def hub_pid(paths: ProjectPaths) -> int | None:
    """The pid the running hub wrote into hub.json (None when there is none to read)."""
    try:
        return int(json.loads(paths.hub_info_file.read_text())["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _stopped(pid: int | None) -> bool:
    """True when the process is stopped (SIGSTOP, Ctrl-Z) or traced: it cannot answer at all."""
    if pid is None:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:][:1] in ("T", "t")


def _answers_hello(path: Path, timeout: float) -> bool:
    """Whether the hub answers a hello on a new connection within `timeout` (a busy hub does)."""
    try:
        with connect_unix(path, timeout) as sock:
            sock.sendall(wire.encode({"id": 1, "method": "hub.hello", "args": [], "kwargs": {}}))
            return sock.recv(1) != b""  # a hub that is closing hangs up: not stuck either
    except TimeoutError:
        return False
    except OSError:
        return True  # gone or going: the call's own connection will say so


def _unresponsive(paths: ProjectPaths, pid: int | None, method: str = "", stopped: bool = False) -> HubError:
    who = f"the hub of this project (pid {pid})" if pid else f"the hub for {paths.state_dir}"
    if stopped:
        return HubError(f"{who} is stopped (by kill -STOP or Ctrl-Z), so it cannot answer",
                        hint=f"let it go on with `kill -CONT {pid}`, or stop it with `agentenv down --force`; "
                             "its runs become interrupted and `agentenv runs resume RUN` finishes them")
    waiting = f" (a {method} call waits on it)" if method else ""
    return HubError(f"{who} holds the lock but does not answer{waiting}",
                    hint="if that process is stuck, stop it with `agentenv down --force` "
                         f"(or `kill {pid or 'PID'}`) and run the command again")


class _StoreProxy:
    """One sub-store of the hub's, over the socket: its methods listed in wire.STORE_METHODS."""

    def __init__(self, session: "RemoteSession", namespace: str):
        self._session, self._namespace = session, namespace
        self._methods = wire.STORE_METHODS[namespace]

    def __getattr__(self, name: str):
        if name.startswith("_") or name not in self._methods:
            raise AttributeError(f"the hub's {self._namespace} store has no method {name!r} a client may call")
        return lambda *args, **kwargs: self._session.call(f"{self._namespace}.{name}", *args, **kwargs)


class _RemoteStore:
    def __init__(self, session: "RemoteSession"):
        for namespace in wire.STORE_METHODS:
            setattr(self, namespace, _StoreProxy(session, namespace))


class RemoteSession(Session):
    def __init__(self, paths: ProjectPaths, config: Any, conn: _Connection):
        self.paths, self.config, self._conn = paths, config, conn
        self.store = _RemoteStore(self)
        self._streams: list[_Connection] = []

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._conn.request(method, list(args), kwargs)

    def subscribe(self, run_ids: list[str] | None = None, kinds: list[str] | None = None) -> EventStream:
        conn = _Connection(self.paths, self._conn.answer_s, self._conn.pid)
        self._streams.append(conn)
        conn.send({"id": 0, "method": "events.subscribe", "kwargs": {"run_ids": run_ids, "kinds": kinds}})
        conn.readline("events.subscribe")  # "subscribed"
        stream = EventStream()

        def pump() -> None:
            # Long-lived: a stopped hub shows up in the short calls made meanwhile, not here.
            try:
                while line := conn.readline("events.stream", watch=False):
                    if line.strip():
                        stream.queue.put(wire.decode(line)["event"])
            except (OSError, ValueError, HubError):  # closed by us (stream.close) or reset by the hub
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
            conn = _Connection(paths, answer_s=timeout)
        except (FileNotFoundError, ConnectionRefusedError, TimeoutError):
            if not become_hub and not lock.is_held_elsewhere():
                raise HubError(f"no hub is running for {paths.state_dir}")
        else:
            # The hello makes the hub count us as a client; a hub that is closing hangs up on it
            # instead, and we go round again (its lock is released in a moment: we become the hub).
            # A stopped or stuck hub raises a HubError that says so (within `hub.start_timeout_s`).
            try:
                hello = conn.request("hub.hello", [], {})
                conn.pid = hello.get("pid") if isinstance(hello, dict) else None
                return RemoteSession(paths, config, conn)
            except (_HubGone, OSError):
                conn.close()
            except BaseException:
                conn.close()
                raise
        if time.monotonic() > deadline:
            raise _not_answering(paths)
        time.sleep(0.02)  # the hub is still starting: its socket appears in a moment


def _not_answering(paths: ProjectPaths) -> HubError:
    """What to say about a hub that holds the lock but did not let us in: stopped, or stuck."""
    pid = hub_pid(paths)
    return _unresponsive(paths, pid, stopped=_stopped(pid))


def _pid_note(paths: ProjectPaths) -> str:
    pid = hub_pid(paths)
    return f" (pid {pid})" if pid else ""


def hub_status(start: Path | None = None, answer_s: float = 5.0) -> dict | None:
    """The running hub's status, or None when none runs. Never becomes the hub. Raises a
    HubError when the hub is stopped or stuck."""
    paths = project_paths(start)
    if not paths.state_dir.exists() or not HubLock(paths.lock_file).is_held_elsewhere():
        return None
    try:
        conn = _Connection(paths, answer_s=answer_s)
    except (FileNotFoundError, ConnectionRefusedError):
        return {"pid": None, "state": "starting or stuck", "state_dir": str(paths.state_dir)}
    except TimeoutError:
        raise _not_answering(paths) from None
    try:
        return conn.request("hub.status", [], {})
    except (_HubGone, OSError):  # it is closing: it hangs up on new connections
        return {"pid": None, "state": "stopping", "state_dir": str(paths.state_dir)}
    finally:
        conn.close()
