"""A warm worker for host Python scripts (`run_code`, `env_outcome_verifier`): a fork server ("zygote").

A cold script pays for a fresh interpreter and its imports of mcp/httpx (about a second). The zygote is a
long-lived helper process, started lazily by the process that runs steps (the hub) as `python -c` with the
environment a cold script gets; it imports what verifier and code scripts import (PRELOAD) once, then forks
one child per script. It is never a fork of the hub itself (the hub is multi-threaded).

Each child gets what a cold `run_process` child got: its own session (so a timeout kills its whole process
group), the request's cwd, argv and environment (exactly the variables the step passes; the zygote's own
environment is those same variables), stdin from /dev/null, stdout and stderr into the caller's temporary
files (the same size caps on reading), no other open descriptor, and the runner run as `__main__`. A fresh
fork per script means nothing a script does (a monkeypatched module, sys.path, env vars, cwd) reaches the
next script or the zygote, and the hub is another process. What differs from a cold start: the preloaded
modules are already imported, and every child shares the zygote's hash seed (PYTHONHASHSEED); `random`
reseeds in each child.

Protocol: the hub holds one end of a SOCK_SEQPACKET pair; each request is one message (JSON: argv, cwd, env)
carrying three descriptors: a stream socket for this script's answers, its stdout file and its stderr file.
The zygote answers `{"pid": N}` once the child leads its own session, then `{"exit": code}`; a `kill` line
(or the hub closing that socket) makes the zygote kill the child's group. End-of-file on the pair (the hub
exited, even by SIGKILL) makes the zygote kill its children and exit; a dead zygote is started again on the
next script. If it cannot start, callers run the script cold (WorkerUnavailable says why).
"""

from __future__ import annotations

import asyncio
import atexit
import builtins
import contextlib
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import types
from dataclasses import dataclass

from agentenv_local.procs import _read_capped, kill_group  # the same output caps as a cold run_process

# What verifier and code scripts import (measured: mcp and its HTTP transport are most of a cold start), and
# what the runner imports; each is optional (the zygote serves without one that fails to import).
# mcp's client imports its HTTP transport (httpcore2, h11, anyio's asyncio backend, truststore) only when a session
# opens: without them here, every env_outcome_verifier script imported them again (about 50 ms of CPU each).
PRELOAD = ("asyncio", "json", "inspect", "importlib.util", "traceback", "httpx", "mcp", "mcp.client.streamable_http",
           "httpcore2", "h11", "anyio._backends._asyncio", "truststore",
           "agentenv_local.compat.mcp1", "agentenv_local.compat.run_view")
WORKER_MODULE = "agentenv_local.script_worker"  # what the zygote runs (`serve`)
START_TIMEOUT_S = 60.0  # imports on a loaded 2-core machine
RETRY_AFTER_S = 60.0  # after a failed start, scripts run cold this long before the next try
KILL_GRACE_S = 10.0  # how long a timed-out script's exit report may take before we kill its group ourselves


class WorkerUnavailable(Exception):
    """The warm worker cannot take this script (it cannot start, or the request differs from what it serves)."""


@dataclass
class ScriptExit:
    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool


# -- the hub's side -----------------------------------------------------------------------------


class _Zygote:
    def __init__(self, proc: subprocess.Popen, ctrl: socket.socket, env: dict[str, str]):
        self.proc, self.ctrl, self.env = proc, ctrl, env

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        self.ctrl.close()  # its end-of-file: the zygote kills its children and exits
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            kill_group(self.proc.pid)
            self.proc.wait()


_lock = threading.Lock()
_current: _Zygote | None = None
_failure: tuple[float, str] | None = None  # (when, why) of the last failed start
starts = 0  # how many zygotes this process started (tests count restarts)
_stop_at_exit = False


def worker_pid() -> int | None:
    """The running zygote's pid, or None."""
    zygote = _current
    return zygote.proc.pid if zygote is not None and zygote.alive() else None


def stop() -> None:
    """Stop the zygote (the hub's exit does the same through end-of-file on the pair)."""
    global _current
    with _lock:
        if _current is not None:
            _current.stop()
            _current = None


def _start(env: dict[str, str]) -> _Zygote:
    global starts
    hub_end, worker_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    log = tempfile.TemporaryFile()
    # `-c` puts "" (the cwd) first on sys.path: drop it before importing anything, so only the environment's
    # paths (as for a cold script) are searched
    code = f"import sys; del sys.path[0]; from {WORKER_MODULE} import serve; serve({worker_end.fileno()})"
    try:
        proc = subprocess.Popen([sys.executable, "-c", code], cwd="/", env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=log, pass_fds=[worker_end.fileno()],
                                start_new_session=True)
    except OSError as exc:
        hub_end.close()
        log.close()
        raise WorkerUnavailable(f"cannot start {sys.executable}: {exc}") from exc
    finally:
        worker_end.close()
    starts += 1
    hub_end.settimeout(START_TIMEOUT_S)
    try:
        ready = hub_end.recv(4096)
    except OSError:
        ready = b""
    if not ready:
        kill_group(proc.pid)
        proc.wait()
        hub_end.close()
        why = _read_capped(log).strip().splitlines()
        log.close()
        raise WorkerUnavailable(f"it did not come up within {START_TIMEOUT_S:g}s" if not why else why[-1][:300])
    log.close()
    hub_end.setblocking(False)
    return _Zygote(proc, hub_end, env)


def _zygote_for(env: dict[str, str], failed: _Zygote | None = None) -> _Zygote:
    """The running zygote (started on first use, again when it died or is the one that `failed`); blocking, so call
    it off the event loop."""
    global _current, _failure, _stop_at_exit
    with _lock:
        if _current is not None and (_current is failed or not _current.alive()):
            with contextlib.suppress(OSError):
                _current.stop()
            _current = None
        if _current is None:
            if _failure is not None and time.monotonic() - _failure[0] < RETRY_AFTER_S:
                raise WorkerUnavailable(_failure[1])
            try:
                _current = _start(env)
            except WorkerUnavailable as exc:
                _failure = (time.monotonic(), str(exc))
                raise
            _failure = None
            if not _stop_at_exit:  # a prompt, clean stop; a killed hub's zygote goes by end-of-file anyway
                atexit.register(stop)
                _stop_at_exit = True
        if _current.env != env:  # it was started for other variables: it would give the script the wrong ones
            raise WorkerUnavailable("the script's environment differs from the worker's")
        return _current


async def run_warm(argv: list[str], *, cwd: str, env: dict[str, str], timeout: float | None) -> ScriptExit:
    """Run a Python script (`argv`: the script's path and its arguments, as after `python`) in a fresh fork of the
    zygote. Raises WorkerUnavailable before anything ran when the zygote can't take it (run it cold then)."""
    zygote = _current
    if zygote is None or not zygote.alive() or zygote.env != env:
        zygote = await asyncio.to_thread(_zygote_for, env)
    request = json.dumps({"argv": argv, "cwd": cwd, "env": env}).encode()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        mine, theirs = socket.socketpair()
        try:
            for attempt in (1, 2):
                try:
                    await _send(zygote, request, [theirs.fileno(), out.fileno(), err.fileno()])
                    break
                except OSError as exc:  # it died since: nothing ran yet, so start it again once
                    if attempt == 2:
                        raise WorkerUnavailable(f"cannot reach the script worker: {exc}") from exc
                    zygote = await asyncio.to_thread(_zygote_for, env, zygote)
        except BaseException:
            mine.close()
            raise
        finally:
            theirs.close()
        with mine:
            code, timed_out, note = await _follow(mine, timeout)
        stderr = _read_capped(err) + note
        return ScriptExit(code, _read_capped(out), stderr, timed_out)


async def _send(zygote: _Zygote, request: bytes, fds: list[int]) -> None:
    """One request message with its descriptors; a full socket buffer (a busy zygote) means wait, not dead."""
    while True:
        try:
            socket.send_fds(zygote.ctrl, [request], fds)
            return
        except BlockingIOError:
            if not zygote.alive():
                raise
            await asyncio.sleep(0.005)


async def _follow(conn: socket.socket, timeout: float | None) -> tuple[int, bool, str]:
    """Wait for the child's exit report on `conn`: (exit code as a shell reports it, timed out, a note)."""
    loop = asyncio.get_running_loop()
    conn.setblocking(False)
    buffer = bytearray()
    pid: int | None = None

    async def message() -> dict | None:
        while b"\n" not in buffer:
            chunk = await loop.sock_recv(conn, 4096)
            if not chunk:
                return None
            buffer.extend(chunk)
        line, _, rest = bytes(buffer).partition(b"\n")
        buffer[:] = rest
        return json.loads(line)

    async def exit_report() -> dict | None:
        nonlocal pid
        while (answer := await message()) is not None:
            if "pid" in answer:
                pid = answer["pid"]
            elif "exit" in answer:
                return answer
        return None

    timed_out = False
    try:
        try:
            report = await asyncio.wait_for(exit_report(), timeout)
        except TimeoutError:
            timed_out = True
            with contextlib.suppress(OSError):
                await loop.sock_sendall(conn, b"kill\n")  # the zygote kills the group and reaps the child
            try:
                report = await asyncio.wait_for(exit_report(), KILL_GRACE_S)
            except TimeoutError:
                report = None
    except BaseException:  # cancelled: leave nothing of the script running
        if pid is not None:
            kill_group(pid)
        raise
    if report is None:  # the zygote went away under the script
        if pid is not None:
            kill_group(pid)
        return 137, timed_out, "\n[the script worker stopped while the script ran; it was killed]"
    code = int(report["exit"])
    return (128 - code if code < 0 else code), timed_out, ""


# -- the zygote ------------------------------------------------------------------------------------


def serve(ctrl_fd: int) -> None:
    """The zygote's main loop: preload, say ready, fork one child per request, report exits."""
    ctrl = socket.socket(fileno=ctrl_fd)
    preloaded = _preload()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a Python handler, so the wakeup fd hears of children
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    selector = selectors.DefaultSelector()
    selector.register(ctrl, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    children: dict[int, socket.socket] = {}  # pid -> its answer socket
    ctrl.send(json.dumps({"ready": os.getpid(), "preloaded": preloaded}).encode())
    try:
        while True:
            for key, _ in selector.select():
                if key.fileobj is ctrl:
                    data, fds, _flags, _addr = socket.recv_fds(ctrl, 1 << 20, 3)
                    if not data:  # the hub is gone
                        return
                    pid = _fork(json.loads(data), fds, selector, ctrl, children)
                    if pid is not None:
                        selector.register(children[pid], selectors.EVENT_READ, pid)
                elif key.fileobj == wake_r:
                    with contextlib.suppress(OSError):
                        os.read(wake_r, 512)
                else:  # the hub asked for a kill, or stopped listening
                    _killpg(key.data)
                    selector.unregister(key.fileobj)
            _reap(children, selector)
    finally:
        for pid in children:
            _killpg(pid)


def _preload() -> list[str]:
    import importlib

    done = []
    for name in PRELOAD:
        try:
            importlib.import_module(name)
            done.append(name)
        except Exception:  # noqa: BLE001 -- a script that needs it reports the error itself
            pass
    return done


def _killpg(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _reap(children: dict[int, socket.socket], selector: selectors.BaseSelector) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is None:
            continue
        with contextlib.suppress(KeyError, ValueError):
            selector.unregister(conn)
        with contextlib.suppress(OSError):
            conn.sendall(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
        conn.close()


def _fork(request: dict, fds: list[int], selector: selectors.BaseSelector, ctrl: socket.socket,
          children: dict[int, socket.socket]) -> int | None:
    if len(fds) != 3:
        for fd in fds:
            os.close(fd)
        return None
    conn = socket.socket(fileno=fds[0])
    sync_r, sync_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(sync_r)
        _child(request, fds[1], fds[2], sync_w, [ctrl, conn, *children.values()], selector)
    os.close(sync_w)
    os.read(sync_r, 1)  # the child leads its own session now, so killing its group reaches it
    os.close(sync_r)
    os.close(fds[1])
    os.close(fds[2])
    with contextlib.suppress(OSError):
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    conn.setblocking(False)
    children[pid] = conn
    return pid


def _child(request: dict, out_fd: int, err_fd: int, sync_w: int, sockets: list[socket.socket],
           selector: selectors.BaseSelector) -> None:
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.setsid()
        os.write(sync_w, b"x")
        selector.close()
        for sock in sockets:
            sock.close()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        # what close_fds leaves a cold child: 0, 1 and 2 only (this closes the wakeup pipe and sync_w too)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None  # chosen again from this environment's TMPDIR
        argv = [str(a) for a in request["argv"]]
        sys.argv = argv
        sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))  # as `python SCRIPT` puts it first
        main = types.ModuleType("__main__")
        main.__dict__.update(__file__=argv[0], __builtins__=builtins, __package__=None, __spec__=None)
        sys.modules["__main__"] = main
        with open(argv[0], "rb") as f:
            source = f.read()
        exec(compile(source, argv[0], "exec"), main.__dict__)
        code = 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 -- reported as python reports an uncaught exception
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)
