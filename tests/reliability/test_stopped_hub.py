"""A hub that cannot answer (issue 12): `kill -STOP`ped, or holding the lock while its socket
never answers. Every command that needs it must fail within a few seconds with an error that
names the pid and says what to do, instead of hanging; `agentenv down --force` stops it.

Real processes throughout: a detached hub (`agentenv up --detach`) and, for the stuck case, a
small process that holds the hub lock and accepts connections but never answers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from kits.warm_cli import run_agentenv

pytestmark = pytest.mark.timeout(120)
# Generous bounds: the error comes after about 1 s (stopped) or 5 s (stuck); a hang would hit them.
ANSWER_BOUND_S = 40


def agentenv(project: Path, *args: str, timeout: float = ANSWER_BOUND_S) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_")}
    return run_agentenv(list(args), cwd=project, env=env, timeout=timeout)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    return state != "Z"


@pytest.fixture
def detached_hub(tmp_path, request):
    # "deep": a project whose hub socket lives outside its state folder (paths.short_socket_path)
    project = tmp_path / ("deep-" * 20 if getattr(request, "param", "") == "deep" else "") / "proj"
    project.mkdir(parents=True)
    started = agentenv(project, "up", "--detach")
    assert started.returncode == 0, started.stderr
    pid = json.loads((project / ".agentenv" / "hub.json").read_text())["pid"]
    try:
        yield project, pid
    finally:
        if _pid_alive(pid):
            os.kill(pid, signal.SIGCONT)
            agentenv(project, "down")
        if _pid_alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("detached_hub", ["short", "deep"], indirect=True)
def test_a_stopped_hub_gives_a_clear_error_instead_of_a_hang(detached_hub):
    project, pid = detached_hub
    assert agentenv(project, "runs", "list").returncode == 0
    os.kill(pid, signal.SIGSTOP)
    try:
        for args in (("runs", "list"), ("down",), ("task", "list")):
            done = agentenv(project, *args)  # before the fix: hung until the timeout
            assert done.returncode == 1, (args, done.stdout, done.stderr)
            assert f"pid {pid}" in done.stderr and "is stopped" in done.stderr, done.stderr
            assert f"kill -CONT {pid}" in done.stderr and "agentenv down --force" in done.stderr
            assert "Traceback" not in done.stderr
    finally:
        os.kill(pid, signal.SIGCONT)
    # Once continued it answers again, and `down` stops it as usual.
    assert agentenv(project, "runs", "list").returncode == 0
    stopped = agentenv(project, "down")
    assert stopped.returncode == 0 and f"pid {pid}" in stopped.stdout, stopped.stderr


def test_down_force_stops_a_stopped_hub(detached_hub):
    project, pid = detached_hub
    os.kill(pid, signal.SIGSTOP)
    done = agentenv(project, "down", "--force")
    assert done.returncode == 0, done.stderr
    assert f"pid {pid}" in done.stdout
    deadline = time.monotonic() + 10
    while _pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _pid_alive(pid)
    # The next command becomes the hub by itself.
    assert agentenv(project, "runs", "list").returncode == 0


STUCK_HUB = textwrap.dedent("""
    import fcntl, json, os, socket, sys, time
    state = sys.argv[1]
    fd = os.open(os.path.join(state, "hub.lock"), os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    server = socket.socket(socket.AF_UNIX)
    server.bind(os.path.join(state, "hub.sock"))
    server.listen(64)
    with open(os.path.join(state, "hub.json"), "w") as f:
        json.dump({"pid": os.getpid()}, f)
    print("ready", flush=True)
    held = []
    while True:
        held.append(server.accept()[0])  # takes connections, never answers
""")


def test_a_hub_that_holds_the_lock_but_never_answers(tmp_path):
    project = tmp_path / "proj"
    state = project / ".agentenv"
    state.mkdir(parents=True)
    stuck = subprocess.Popen([sys.executable, "-c", STUCK_HUB, str(state)], stdout=subprocess.PIPE, text=True)
    try:
        assert stuck.stdout is not None and stuck.stdout.readline().strip() == "ready"
        for args in (("runs", "list"), ("down",)):
            done = agentenv(project, *args)
            assert done.returncode == 1, (args, done.stdout, done.stderr)
            assert f"pid {stuck.pid}" in done.stderr and "does not answer" in done.stderr, done.stderr
            assert "agentenv down --force" in done.stderr and "Traceback" not in done.stderr
    finally:
        stuck.kill()
        stuck.wait(10)
