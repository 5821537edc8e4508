"""The file lock that decides who is the hub. The kernel drops it when its holder dies, so a
`kill -9`'d hub never leaves a stale lock behind; only its socket file needs cleaning."""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path


class HubLock:
    def __init__(self, path: Path):
        self.path = Path(path)
        self._fd: int | None = None
        self._release_lock = threading.Lock()

    def try_acquire(self) -> bool:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def is_held_elsewhere(self) -> bool:
        """True when another process holds the lock (probes without keeping it)."""
        if self._fd is not None:
            return False
        if self.try_acquire():
            self.release()
            return False
        return True

    def release(self) -> None:
        # Take the descriptor out first, under a lock: two threads releasing at once must not both close it (the
        # second close would hit whatever file or socket got the same number in between).
        with self._release_lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
