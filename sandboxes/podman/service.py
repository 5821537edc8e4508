"""The Podman REST service the provider talks to (through libpod.py, and podman-py for the rest).

A configured `socket` (say, your own `podman system service`) is used as it is. Otherwise the project
has one service of its own on `<state_dir>/podman/podman.sock`, shared by every process of the project:
the first one that needs it starts it detached (its own session, output to `service.log`) with an idle
exit (`podman system service --time=N`, N = `service_idle_s`, default IDLE_EXIT_S), and nobody stops it
at exit: the next one-shot command finds it answering and saves its start. A long-lived hub uses the
same service; when it exits from idleness under the hub, the hub's next call starts a new one (the hub's
containers and warm pool do not depend on the service).

`service.json` beside the log says which process serves (pid, socket, the containers.conf it started
with); `service.lock` there makes concurrent starts wait for the first instead of racing it. A service
that died (its socket left behind) or hangs is replaced; one started with another containers.conf is
stopped so a fresh one gets this machine's current fixes.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentenv_local.paths import short_socket_path

from .engine import PodmanUnavailable, conf_path, podman_binary, podman_env
from .libpod import LibpodClient

if TYPE_CHECKING:
    import podman

START_TIMEOUT_S = 15.0
IDLE_EXIT_S = 120  # a service nobody asks for exits after this long (setting `service_idle_s`)
PING_TIMEOUT_S = 3.0
STOP_WAIT_S = 5.0


def default_socket(state_dir: Path) -> Path:
    return short_socket_path(Path(state_dir).resolve() / "podman" / "podman.sock", "podman")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's: alive
        return True
    return True


def _serves(pid: int, socket: Path) -> bool:
    """Is `pid` a `podman system service` on `socket` (not a recycled pid of another program)?"""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"service" in argv and f"unix://{socket}".encode() in argv


def _terminate(pid: int, wait_s: float = STOP_WAIT_S) -> None:
    """SIGTERM the service's process group, SIGKILL it if it lingers."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG)[0] == pid:  # our own child: reap it
                    return
            if not _pid_alive(pid):
                return
            time.sleep(0.02)


class PodmanService:
    def __init__(self, state_dir: Path, config: dict[str, Any] | None = None):
        self.config = dict(config or {})
        configured = self.config.get("socket")
        self.external = bool(configured)
        self.socket = Path(str(configured).removeprefix("unix://")) if configured else default_socket(state_dir)
        self.folder = Path(state_dir) / "podman"
        self.log_file = self.folder / "service.log"
        self.info_file = self.folder / "service.json"
        self.lock_file = self.folder / "service.lock"
        self.idle_exit_s = int(self.config.get("service_idle_s", IDLE_EXIT_S))
        self._proc: subprocess.Popen | None = None  # the service, when this process started it
        self._pid: int | None = None  # the service's pid, whoever started it
        self._unmanaged = False  # a service on our socket that no service.json describes: used as it is
        self._client: podman.PodmanClient | None = None
        self._answering = False  # found answering (or started) since the last close: a pid check is enough
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"unix://{self.socket}"

    def _answers(self) -> bool:
        if not self.socket.exists():
            return False
        try:  # over our own small client: finding the service does not import podman-py
            return LibpodClient(self.socket).ping(PING_TIMEOUT_S)
        except Exception:  # any failure means "does not answer"
            return False

    def _alive(self) -> bool:
        """Is the service our client talks to still there? (A pid check, no request.)"""
        if self._proc is not None:
            return self._proc.poll() is None
        if self._unmanaged:
            return True
        return self._pid is not None and _pid_alive(self._pid)

    def client(self) -> Any:
        """A podman-py client on a service that answers (starting one if needed)."""
        with self._lock:
            self._ensure_answering()
            if self._client is None:
                import podman

                self._client = podman.PodmanClient(base_url=self.base_url, timeout=120)
            return self._client

    def api(self) -> LibpodClient:
        """Our small client (libpod.py) on a service that answers (starting one if needed): what making a
        sandbox needs, without importing podman-py."""
        with self._lock:
            self._ensure_answering()
            return LibpodClient(self.socket)

    def _ensure_answering(self) -> None:
        """With self._lock held: find the service (or start one) unless it was found and is still there."""
        if self._answering and (self.external or self._alive()):
            return
        self._close_client()
        if self.external:
            if not self._answers():
                raise PodmanUnavailable(f"the Podman service at {self.socket} does not answer",
                                        hint="start it (`podman system service --time=0 unix://"
                                             f"{self.socket} &`) or drop the `socket` setting")
        else:
            with self._start_lock():
                self._find_or_start()
        self._answering = True

    @contextlib.contextmanager
    def _start_lock(self) -> Iterator[None]:
        """Held while one process checks for a service and starts one: a second waits, then finds it."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.lock_file, "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def read_info(self) -> dict[str, Any]:
        try:
            info = json.loads(self.info_file.read_text())
        except (OSError, ValueError):
            return {}
        return info if isinstance(info, dict) else {}

    def _conf_text(self) -> str:
        path = conf_path(self.config)
        try:
            return path.read_text() if path else ""
        except OSError:
            return ""

    def _find_or_start(self) -> None:
        """Reuse the project's service when it answers with this machine's current fixes; else replace it."""
        info = self.read_info()
        pid = info.get("pid") if isinstance(info.get("pid"), int) else None
        ours = pid is not None and _serves(pid, self.socket)
        if ours and info.get("conf") == self._conf_text() and self._answers():
            if self._proc is not None and self._proc.pid != pid:
                self._proc = None
            self._pid = pid
            return
        if ours and pid is not None:
            # dead-but-not-gone, hung, or started with another containers.conf (which would ignore this
            # machine's current fixes): stop it, so a fresh one starts
            _terminate(pid)
        elif pid is None and self._answers():
            self._pid, self._unmanaged = None, True  # one we know nothing about answers: use it as it is
            return
        self.info_file.unlink(missing_ok=True)
        self._unmanaged = False
        self._start()

    def _start(self) -> None:
        binary = podman_binary(self.config)
        self.socket.parent.mkdir(parents=True, exist_ok=True)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.socket.unlink(missing_ok=True)
        with open(self.log_file, "ab") as log:
            self._proc = subprocess.Popen(
                [binary, "system", "service", f"--time={self.idle_exit_s}", self.base_url],
                env=podman_env(self.config),
                # its own folder as cwd: conmon drops files (an `oom` marker) into its working directory;
                # its own session: it outlives this process (the next command reuses it) and no signal
                # meant for this command's process group reaches it
                cwd=self.folder, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        self._pid = self._proc.pid
        self.info_file.write_text(json.dumps({"pid": self._proc.pid, "socket": str(self.socket),
                                              "conf": self._conf_text(), "idle_exit_s": self.idle_exit_s}))
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                break
            if self._answers():
                return
            time.sleep(0.02)
        self._stop_started()
        tail = ""
        with contextlib.suppress(OSError):
            tail = self.log_file.read_text(errors="replace")[-1500:].strip()
        raise PodmanUnavailable("the Podman service did not start" + (f": {tail}" if tail else ""),
                                hint=f"try `podman system service --time=0 {self.base_url}` by hand; "
                                     "see `podman info`")

    def _close_client(self) -> None:
        self._answering = False
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
            self._client = None

    def _stop_started(self) -> None:
        proc, self._proc, self._pid = self._proc, None, None
        if proc is None:
            return
        if proc.poll() is None:
            _terminate(proc.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=STOP_WAIT_S)
        self.socket.unlink(missing_ok=True)
        self.info_file.unlink(missing_ok=True)

    def release(self) -> None:
        """Drop our client and leave the service running: it exits by itself once nobody uses it."""
        with self._lock:
            self._close_client()
            self._proc = None  # not ours to stop any more: the next command may reuse it
            self._pid = None

    def stop(self) -> None:
        """Stop the service if this process started it (a service someone else runs is left alone)."""
        with self._lock:
            self._close_client()
            self._stop_started()


def stop_project_service(state_dir: Path) -> bool:
    """Stop the project's own Podman service, whoever started it (tests and `down`-like clean-ups).
    True when one was running."""
    service = PodmanService(state_dir)
    info = service.read_info()
    pid = info.get("pid")
    socket = Path(str(info.get("socket") or service.socket))
    if not isinstance(pid, int) or not _serves(pid, socket):
        service.info_file.unlink(missing_ok=True)
        return False
    _terminate(pid)
    socket.unlink(missing_ok=True)
    service.info_file.unlink(missing_ok=True)
    return True
