"""What a test session leaves behind: threads, processes, hubs, listening sockets and Podman containers.

tests/conftest.py takes a `Snapshot` when the session starts and, once every other fixture is torn down,
fails the session on what `left_behind` finds (a test that leaks is a bug: it slows every later test and,
under load, makes others fail). Each finding names what it is, so the leak can be traced to its test."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

# Threads of libraries that live for the whole process by design, not per test: asyncio's and
# concurrent.futures' idle pool threads are reclaimed at exit, pytest-timeout's and xdist's are the runner's.
LIFELONG_THREAD_PREFIXES = ("asyncio_", "ThreadPoolExecutor-", "pytest_timeout", "execnet", "Dummy-")


def _threads() -> dict[int, str]:
    return {t.ident or 0: t.name for t in threading.enumerate() if t.is_alive()}


def _socket_inodes(pid: int) -> set[str]:
    inodes: set[str] = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    try:
        fds = list(fd_dir.iterdir())
    except OSError:
        return inodes
    for fd in fds:
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def pids_listening_on(port: int) -> set[int]:
    """The processes holding a socket that listens on TCP `port` on 127.0.0.1 (from /proc)."""
    rows = [line.split() for line in Path("/proc/net/tcp").read_text().splitlines()[1:]]
    wanted = {cols[9] for cols in rows if cols[1] == f"0100007F:{port:04X}" and cols[3] == "0A"}  # 0A: LISTEN
    return {int(entry.name) for entry in Path("/proc").iterdir()
            if entry.name.isdigit() and wanted & _socket_inodes(int(entry.name))}


def sockets_on(port: int) -> list[str]:
    """Every TCP socket whose local or remote end is 127.0.0.1:`port` (any state), with its owner: what keeps the
    port from being bound."""
    wanted = f"0100007F:{port:04X}"
    rows = [cols for cols in (line.split() for line in Path("/proc/net/tcp").read_text().splitlines()[1:])
            if wanted in (cols[1], cols[2])]
    owners: dict[str, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            owners.update(dict.fromkeys(_socket_inodes(int(entry.name)), int(entry.name)))
    out = []
    for cols in rows:
        pid = owners.get(cols[9])
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:120] if pid else ""
        except OSError:
            command = ""
        out.append(f"{cols[1]} -> {cols[2]} state {cols[3]} pid {pid or '-'} {command}".strip())
    return out


def _listening_ports(pid: int) -> set[int]:
    """The TCP ports process `pid` listens on (IPv4 and IPv6)."""
    mine = _socket_inodes(pid)
    ports: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) > 9 and cols[3] == "0A" and cols[9] in mine:  # 0A: LISTEN
                ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


def _processes_in(folder: Path) -> dict[int, str]:
    """Processes whose working directory or command line is inside `folder` (the session's temporary folders:
    every test project, sandbox and server a test starts lives there), this process excluded."""
    found = {}
    root = str(folder.resolve())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state == "Z":
            continue
        if cwd == root or cwd.startswith(root + "/") or root + "/" in cmdline:
            found[int(entry.name)] = f"{cmdline[:160]} (cwd {cwd})"
    return found


def _children() -> dict[int, str]:
    found = {}
    me = str(os.getpid())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        after = stat.rsplit(")", 1)[1].split()
        if after[1] == me and after[0] != "Z":
            found[int(entry.name)] = cmdline[:160]
    return found


def _live_hubs(folder: Path) -> list[str]:
    import json

    hubs = []
    for info in folder.rglob("hub.json"):
        try:
            pid = int(json.loads(info.read_text()).get("pid") or 0)
        except (OSError, ValueError, AttributeError):
            continue
        if pid and Path(f"/proc/{pid}").exists() and pid != os.getpid():
            hubs.append(f"the hub of {info.parent} (pid {pid})")
    return hubs


def _containers_of(folder: Path) -> list[str]:
    """Podman containers of projects under `folder` (each labelled with its project's hash)."""
    import hashlib
    import shutil

    if shutil.which("podman") is None:
        return []
    projects = {hashlib.sha256(str(d.resolve()).encode()).hexdigest()[:12]: d
                for d in folder.rglob(".agentenv") if d.is_dir()}
    if not projects:
        return []
    from sandboxes.podman.engine import podman_env

    out = subprocess.run(["podman", "ps", "-a", "--format", '{{.Names}} {{index .Labels "agentenv.project"}}'],
                         capture_output=True, text=True, env=podman_env({}), timeout=60).stdout
    left = []
    for line in out.splitlines():
        name, _, project = line.partition(" ")
        if project.strip() in projects:
            left.append(f"container {name} of {projects[project.strip()]}")
    return left


@dataclass
class Snapshot:
    threads: dict[int, str] = field(default_factory=_threads)
    ports: set[int] = field(default_factory=lambda: _listening_ports(os.getpid()))
    children: dict[int, str] = field(default_factory=_children)


def left_behind(before: Snapshot, folder: Path, settle_s: float = 10.0) -> list[str]:
    """What is alive now that was not at `before`: a thread, a child process, a process working in `folder`, a
    live hub or a container of a project in `folder`, a port this process listens on. Things that are on their
    way out (a thread finishing, a detached removal) get `settle_s` seconds to go first."""
    deadline = time.monotonic() + settle_s
    while True:
        found = _find(before, folder)
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def _find(before: Snapshot, folder: Path) -> list[str]:
    found = [f"thread {name!r}" for ident, name in _threads().items()
             if ident not in before.threads and not name.startswith(LIFELONG_THREAD_PREFIXES)]
    found += [f"child process {pid}: {cmd}" for pid, cmd in _children().items() if pid not in before.children]
    found += [f"process {pid}: {what}" for pid, what in _processes_in(folder).items()]
    found += _live_hubs(folder)
    found += [f"listening port {port} of this process" for port in sorted(_listening_ports(os.getpid()) - before.ports)]
    found += _containers_of(folder)
    return found
