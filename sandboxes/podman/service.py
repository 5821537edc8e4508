"""The Podman REST service that podman-py talks to.

A configured `socket` (say, your own `podman system service`) is used as it is. Otherwise we look for
a service on `<state_dir>/podman/podman.sock`; when none answers we start `podman system service` there
(with our containers.conf) and stop it again in `close()`, i.e. with the hub. A service left by a hub
that was killed keeps answering and is reused by the next one; with nobody using it, it exits by itself
after IDLE_EXIT_S.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentenv_local.paths import short_socket_path

from .engine import PodmanUnavailable, conf_path, podman_binary, podman_env

if TYPE_CHECKING:
    import podman

START_TIMEOUT_S = 15.0
IDLE_EXIT_S = 600  # the service exits after this long without a request (so a killed hub's does too)
RECHECK_S = 60.0  # a service we did not start may have exited since: ping it again after this long


def default_socket(state_dir: Path) -> Path:
    return short_socket_path(Path(state_dir).resolve() / "podman" / "podman.sock", "podman")


class PodmanService:
    def __init__(self, state_dir: Path, config: dict[str, Any] | None = None):
        self.config = dict(config or {})
        configured = self.config.get("socket")
        self.external = bool(configured)
        self.socket = Path(str(configured).removeprefix("unix://")) if configured else default_socket(state_dir)
        self.log_file = Path(state_dir) / "podman" / "service.log"
        self._proc: subprocess.Popen | None = None
        self._client: podman.PodmanClient | None = None
        self._checked_at = 0.0
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"unix://{self.socket}"

    def _answers(self) -> bool:
        if not self.socket.exists():
            return False
        import podman

        try:
            with podman.PodmanClient(base_url=self.base_url, timeout=3) as client:
                return bool(client.ping())
        except Exception:  # any failure means "does not answer"
            return False

    def client(self):
        """A podman-py client on a service that answers (starting one if needed)."""
        with self._lock:
            if self._client is not None:
                if self._proc is not None and self._proc.poll() is None:
                    return self._client
                if self._proc is None and time.monotonic() - self._checked_at < RECHECK_S:
                    return self._client
            self._client = None
            if not self.external:
                self._drop_stale_service()
            if not self._answers():
                if self.external:
                    raise PodmanUnavailable(f"the Podman service at {self.socket} does not answer",
                                            hint="start it (`podman system service --time=0 unix://"
                                                 f"{self.socket} &`) or drop the `socket` setting")
                self._start()
            import podman

            self._client = podman.PodmanClient(base_url=self.base_url, timeout=120)
            self._checked_at = time.monotonic()
            return self._client

    @property
    def _info_file(self) -> Path:
        return self.socket.parent / "service.json"

    def _conf_text(self) -> str:
        path = conf_path(self.config)
        try:
            return path.read_text() if path else ""
        except OSError:
            return ""

    def _drop_stale_service(self) -> None:
        """A service a dead hub left running with another containers.conf would ignore this machine's
        current fixes: stop it, so a fresh one starts with them."""
        import json

        try:
            info = json.loads(self._info_file.read_text())
        except (OSError, ValueError):
            return
        if info.get("conf") == self._conf_text() or not isinstance(info.get("pid"), int):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(info["pid"], signal.SIGTERM)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and self._answers():
            time.sleep(0.05)
        self._info_file.unlink(missing_ok=True)

    def _start(self) -> None:
        binary = podman_binary(self.config)
        self.socket.parent.mkdir(parents=True, exist_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        self.socket.unlink(missing_ok=True)
        with open(self.log_file, "ab") as log:
            self._proc = subprocess.Popen(
                [binary, "system", "service", f"--time={IDLE_EXIT_S}", self.base_url], env=podman_env(self.config),
                # its own folder as cwd: conmon drops files (an `oom` marker) into its working directory
                cwd=self.log_file.parent, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        import json

        self._info_file.write_text(json.dumps({"pid": self._proc.pid, "conf": self._conf_text()}))
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                break
            if self._answers():
                return
            time.sleep(0.05)
        self.stop()
        tail = ""
        with contextlib.suppress(OSError):
            tail = self.log_file.read_text(errors="replace")[-1500:].strip()
        raise PodmanUnavailable("the Podman service did not start" + (f": {tail}" if tail else ""),
                                hint=f"try `podman system service --time=0 {self.base_url}` by hand; "
                                     "see `podman info`")

    def stop(self) -> None:
        """Stop the service if we started it (a service someone else runs is left alone)."""
        with self._lock:
            if self._client is not None:
                with contextlib.suppress(Exception):
                    self._client.close()
                self._client = None
            proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
        self.socket.unlink(missing_ok=True)
        self._info_file.unlink(missing_ok=True)
