"""The warm `agentenv` process behind tests/kits/warm_cli.py: it imports what commands import, once, then forks
one child per command it is asked to run. Run by the kit, never by hand:

    .venv/bin/python tests/kits/warm_cli_server.py SOCKET_PATH AGENTENV_SCRIPT

A request is one SOCK_SEQPACKET message, JSON {"args", "cwd", "env"}, carrying the command's stdin, stdout and
stderr as file descriptors. The server answers {"pid": N} once the child runs, then {"exit": CODE} (negative: the
signal that ended it) when it is gone. The child becomes the command exactly as the console script starts it:
those three descriptors as 0, 1 and 2, the request's working folder and environment (nothing of the server's
left), sys.path[0] the script's folder, then `main()`; it ends as a Python process ends, threads joined, atexit
handlers run and output flushed, without tearing down every module (see _run_command).

The server itself runs no command and holds no thread: what it imported is code, never state (nothing in those
modules reads the environment or the working folder at import; tests/kits/warm_cli.py sends a cold command
wherever the interpreter's own start-up reads differ: PYTHON* variables, locale).
"""

from __future__ import annotations

import array
import atexit
import gc
import importlib
import json
import os
import select
import socket
import sys
import threading
import time

# What `task list`, `runs list`, `env list` and `run hello` import between them (their sys.modules, read for
# this list), and the command modules: importing them is most of a short command's CPU.
PRELOAD = (
    "agentenv_local.cli.main", "agentenv_local.cli.run", "agentenv_local.cli._drive", "agentenv_local.hub.server",
    "agentenv_local.hub.session", "agentenv_local.hub.engine", "agentenv_local.hub.launch",
    "agentenv_local.tasks.runner", "agentenv_local.tasks.services", "agentenv_local.tasks.resume",
    "agentenv_local.tasks.scoring", "agentenv_local.bundles.loader", "agentenv_local.bundles.materialize",
    "agentenv_local.hosting.envs.manager", "agentenv_local.hosting.envs.in_hub", "agentenv_local.hosting.agents.hosted",
    "agentenv_local.executors.dispatch", "agentenv_local.steps.sandbox", "agentenv_local.steps.verify_sandbox",
    "agentenv_local.steps.load_artifact", "agentenv_local.steps.collect_artifacts", "agentenv_local.steps.url_loads",
    "agentenv_local.query", "agentenv_local.config.loader", "agentenv_local.loops", "stores.runs", "stores.writer",
    "stores.database", "stores.migrations", "stores.objects", "stores.events", "stores.secrets",
    "sandboxes.podman.provider", "pydantic", "asyncio", "uvloop", "zoneinfo", "difflib", "csv", "zipfile",
    # the commands the tests type most (each module imports only click and its own helpers at the top)
    *(f"agentenv_local.cli.{name}" for name in ("commands", "task", "runs", "env", "artifact", "eval", "agent",
                                                 "bundle", "sandbox", "export", "hub", "config")),
)
_FDS = 3


def _recv_request(conn: socket.socket) -> tuple[dict, list[int]]:
    fds = array.array("i")
    message, ancillary, _flags, _addr = conn.recvmsg(1 << 20, socket.CMSG_SPACE(_FDS * fds.itemsize))
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    return json.loads(message), list(fds)


def _become(request: dict, fds: list[int], script: str) -> None:
    """In the child: turn into the command the request describes."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    time.tzset()
    sys.argv = [script, *request["args"]]
    sys.path[0] = os.path.dirname(script)


def _serve(listener: socket.socket, script: str) -> tuple[dict, list[int]]:
    """Fork a child per request; answer in the parent, return (the request, its fds) in the child."""
    running: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, the requester's connection)
    while True:
        ready, _, _ = select.select([listener.fileno(), 0, *running], [], [])
        for item in ready:
            if item == 0:  # stdin is the kit's pipe: at its end (the test process is gone), so is the server
                if not os.read(0, 4096):
                    os._exit(0)
            elif item == listener.fileno():
                conn, _ = listener.accept()
                try:
                    request, fds = _recv_request(conn)
                except (OSError, ValueError):
                    conn.close()
                    continue
                if len(fds) != _FDS:
                    for fd in fds:
                        os.close(fd)
                    conn.close()
                    continue
                pid = os.fork()
                if pid == 0:
                    listener.close()  # (stdin is replaced by the request's)
                    for pidfd, (_pid, other) in running.items():
                        os.close(pidfd)
                        other.close()
                    conn.close()
                    return request, fds
                for fd in fds:
                    os.close(fd)
                running[os.pidfd_open(pid)] = (pid, conn)
                conn.sendall(json.dumps({"pid": pid}).encode())
            else:
                pid, conn = running.pop(item)
                os.close(item)
                _, status = os.waitpid(pid, 0)
                try:
                    conn.sendall(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode())
                except OSError:  # the requester gave up (its timeout killed the child)
                    pass
                conn.close()


def main() -> None:
    socket_path, script = sys.argv[1], sys.argv[2]
    sys.path[0] = os.path.dirname(script)  # as the console script sees it
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 -- an optional module missing here: the command imports it itself
            pass
    threads = os.listdir("/proc/self/task")
    if len(threads) != 1:  # a fork would lose the other threads: refuse to serve rather than fork broken children
        print(f"not forking: the preloads left {len(threads)} threads", flush=True)
        return
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(socket_path)
    listener.listen(64)
    print("ready", flush=True)
    gc.freeze()  # what is preloaded stays out of the children's collections (which would copy every page)
    request, fds = _serve(listener, script)
    _become(request, fds, script)
    os._exit(_run_command())


def _run_command() -> int:
    """The command, then the end of a Python process without its teardown of every module (which, in a forked
    child, wrote to every page the server had, copying them all: half the CPU of a short command). What a
    process does at exit and a test can see is done as Python does it: non-daemon threads joined, atexit
    handlers run, the streams flushed. multiprocessing ends its forked children the same way."""
    from agentenv_local.cli.main import main as agentenv_main

    try:
        agentenv_main()
        code = 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:  # sys.exit("message"): printed to stderr, status 1
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 -- an uncaught error: the traceback and status 1, as Python gives them
        sys.excepthook(*sys.exc_info())
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]  # the interpreter's own join of non-daemon threads
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    return code


if __name__ == "__main__":
    main()
