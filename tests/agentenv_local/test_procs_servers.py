"""agentenv_local.procs for long-lived servers: start_logged starts one in its own session with its output in a
file, stop_group stops its whole process group (a grandchild too), even one that ignores SIGTERM."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from agentenv_local.procs import pid_alive, start_logged, stop_group

# Prints its grandchild's pid, then waits; with IGNORE_TERM set both ignore SIGTERM.
SERVER = """
import os, signal, subprocess, sys, time
if os.environ.get("IGNORE_TERM"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import signal, time, os\\n"
                          "if os.environ.get('IGNORE_TERM'): signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n"
                          "time.sleep(600)"])
print("serving", os.getpid(), child.pid, os.environ.get("MARK"), flush=True)
time.sleep(600)
"""


def _gone(pid: int) -> bool:
    """Not running: no such process, or a zombie nobody has reaped yet (an orphan's reaper may be slow, or none)."""
    if not pid_alive(pid):
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _start(tmp_path: Path, **env: str) -> tuple[int, int, Path]:
    log = tmp_path / "server.log"
    proc = start_logged([sys.executable, "-c", SERVER], cwd=tmp_path, env={"MARK": "m1", **env}, log_path=log)
    for _ in range(2000):  # until it announces itself (no time bound asserted)
        text = log.read_text()
        if text.startswith("serving"):
            break
        assert proc.poll() is None, text
        time.sleep(0.01)
    _word, pid, grandchild, mark = log.read_text().split()
    assert int(pid) == proc.pid and mark == "m1"
    return proc.pid, int(grandchild), log


def test_stop_group_stops_the_server_and_what_it_started(tmp_path):
    pid, grandchild, _log = _start(tmp_path)
    assert pid_alive(pid) and pid_alive(grandchild)
    stop_group(pid)
    assert not pid_alive(pid)
    for _ in range(500):  # the grandchild was killed with the group; its new parent reaps it
        if _gone(grandchild):
            break
        time.sleep(0.01)
    assert _gone(grandchild)


def test_stop_group_kills_a_server_that_ignores_sigterm(tmp_path):
    pid, _grandchild, _log = _start(tmp_path, IGNORE_TERM="1")
    stop_group(pid, grace_s=0.2)
    assert not pid_alive(pid)


def test_pid_alive_of_a_process_that_is_gone():
    import subprocess

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert not pid_alive(proc.pid)
    stop_group(proc.pid)  # stopping what is already gone is harmless
