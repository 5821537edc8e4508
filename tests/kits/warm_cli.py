"""Run `agentenv ARGS` as a test would with subprocess.run, for a fraction of the CPU: forked from a warm process
that has imported what commands import (tests/kits/warm_cli_server.py), one per test worker.

    done = run_agentenv(["runs", "list", "--json"], cwd=project, env=clean_env(), timeout=120)
    done.returncode, done.stdout, done.stderr          # a subprocess.CompletedProcess, text

Why: the suite starts thousands of short `agentenv` commands, and most of a short command's CPU (~0.3 of ~0.45 s)
was importing; on two cores running three test workers the suite waits on CPU (docs/testing.md). The command is
still a process of its own, started as the console script starts it, with its own working folder, environment
and standard streams; only the interpreter's start and the imports are shared.

A command runs cold (a real `agentenv` process, as before) when the warm process cannot stand for a fresh one:
its environment sets interpreter start-up variables (PYTHON*, the locale) other than the warm process's, it
gives input on stdin, the test asks for a fresh process (`fresh=True`: it reads the command's /proc/PID/environ,
which a fork does not set), or TESTS_COLD_CLI=1 asks for cold commands throughout (to compare, or to debug).
"""

from __future__ import annotations

import array
import atexit
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from kits.servers import agentenv_exe

_SERVER = Path(__file__).with_name("warm_cli_server.py")
# What the interpreter reads as it starts (so a forked child could not honour a different value).
_STARTUP_PREFIXES = ("PYTHON",)
_STARTUP_NAMES = ("LANG", "LC_ALL", "LC_CTYPE")


class _Warm:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        self.socket_path = ""
        self.environ: dict[str, str] = {}
        self.failed = False

    def address(self) -> str | None:
        """The warm server's socket, started on first use; None when it cannot serve."""
        with self.lock:
            if self.failed:
                return None
            if self.proc is not None and self.proc.poll() is None:
                return self.socket_path
            folder = tempfile.mkdtemp(prefix="agentenv-warm-cli-")
            self.socket_path = os.path.join(folder, "s")
            self.environ = {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_")}
            self.proc = subprocess.Popen([sys.executable, str(_SERVER), self.socket_path, agentenv_exe()],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                         cwd="/", env=self.environ, text=True)
            assert self.proc.stdout is not None
            if self.proc.stdout.readline().strip() != "ready":
                self.failed = True
                self.stop_locked()
                return None
            return self.socket_path

    def stop_locked(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            for stream in (self.proc.stdin, self.proc.stdout):
                if stream is not None:
                    stream.close()
            self.proc = None
        if self.socket_path:
            Path(self.socket_path).unlink(missing_ok=True)
            os.rmdir(os.path.dirname(self.socket_path))
            self.socket_path = ""

    def stop(self) -> None:
        with self.lock:
            self.stop_locked()


_WARM = _Warm()
atexit.register(_WARM.stop)


def stop() -> None:
    """Stop this process's warm server (the session's leak check runs after it)."""
    _WARM.stop()


def _can_fork_for(env: dict[str, str]) -> bool:
    if os.environ.get("TESTS_COLD_CLI") == "1":
        return False
    mine = _WARM.environ or {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_")}
    names = {k for k in (*env, *mine) if k.startswith(_STARTUP_PREFIXES) or k in _STARTUP_NAMES}
    return all(env.get(k) == mine.get(k) for k in names)


def run_agentenv(args: list[str], *, cwd: Path | str, env: dict[str, str], timeout: float,
                 input: str | None = None, fresh: bool = False) -> subprocess.CompletedProcess:
    """`agentenv ARGS` in `cwd` with exactly `env`, stdin closed (or `input`), output captured as text.

    `fresh`: a process of its own all the same, for a test that reads what only an exec sets: /proc/PID/environ
    holds the environment a process was started with, and a forked command's is set after its start."""
    argv = [agentenv_exe(), *args]
    address = _WARM.address() if input is None and not fresh and _can_fork_for(env) else None
    if address is None:
        return subprocess.run(argv, cwd=cwd, env=env, input=input, capture_output=True, text=True, timeout=timeout,
                              stdin=None if input is not None else subprocess.DEVNULL)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, open(os.devnull, "rb") as null, \
            socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as conn:
        conn.settimeout(timeout)
        conn.connect(address)
        request = json.dumps({"args": list(args), "cwd": str(cwd), "env": dict(env)}).encode()
        fds = array.array("i", (null.fileno(), out.fileno(), err.fileno())).tobytes()
        conn.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
        pid = int(json.loads(conn.recv(4096))["pid"])
        try:
            answer = conn.recv(4096)
        except TimeoutError:  # as subprocess.run does: killed, and waited for (the server reaps it, then answers)
            os.kill(pid, signal.SIGKILL)
            conn.settimeout(60)
            conn.recv(4096)
            raise subprocess.TimeoutExpired(argv, timeout) from None
        code = int(json.loads(answer)["exit"])
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(argv, code, _text(out.read()), _text(err.read()))


def _text(data: bytes) -> str:
    """As subprocess.run(text=True) reads it: UTF-8 here, universal newlines."""
    return data.decode(errors="replace").replace("\r\n", "\n").replace("\r", "\n")
