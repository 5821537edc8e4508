"""Running a host command in its own process group, with a timeout that kills the whole group, in a minimal
environment; reading the address a spawned server announces.

Shared by the process sandbox and by steps that run helpers on the host (run_code); `announced_url` by whatever
spawns an env or agent server with `--port 0` (agent hosting, the gateway's subprocess children); `start_logged`,
`pid_alive` and `stop_group` by the hub's env hosting (agentenv_local.hosting.envs), which starts long-lived servers
in their own sessions and stops them, or what a dead hub left of them, by process group; `tagged_pids` and
`kill_tagged` by sandbox providers (process, and plugins such as examples/plugins/bwrap) to find and kill every
process of a sandbox by the TAG_VAR each carries.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from agentenv_local.sandbox_api import ExecResult

MAX_OUTPUT_BYTES = 32 * 1024 * 1024
# The only variables of our own environment that a host process we start inherits.
PASSED_ENV = frozenset({"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "TERM", "TMPDIR", "TZ",
                        "PYTHONPATH", "VIRTUAL_ENV"})
_ANNOUNCE = re.compile(r"serving on (http://\S+)")
# Every process a sandbox provider starts carries TAG_VAR=<sandbox id> in its environment, so that a terminate
# (from any process, after a crash too) finds and kills all of them, the ones that left the group included.
TAG_VAR = "AGENTENV_SANDBOX"


def host_env() -> dict[str, str]:
    """The little of our own environment a process we start on the host gets (a sandboxed command, a script, an
    env or agent server): enough to find programs and a home, never our secrets (API keys in env vars stay out of
    steps, their output and the store)."""
    return {k: v for k, v in os.environ.items() if k in PASSED_ENV or k.startswith("LC_")}


def announced_url(line: str) -> str | None:
    """The base URL in a server's "... serving on http://HOST:PORT ..." line (as `agentenv env` and `agentenv agent`
    print it to stderr once listening), without a trailing slash; None for any other line."""
    match = _ANNOUNCE.search(line)
    return match.group(1).rstrip("/") if match else None


def kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def pid_alive(pid: int) -> bool:
    """Is there a process `pid` (one we may not signal counts as alive)?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running(pid: int) -> bool:
    """Whether `pid` still runs: unlike pid_alive, a zombie (dead, waiting to be reaped) does not."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def cmdline(pid: int) -> bytes:
    """The NUL-separated command line of `pid` (b"" when it is gone or unreadable): to check that a pid read
    from a file still is the process we started, not another one that got the number since."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def stop_group(pid: int, grace_s: float = 3.0) -> None:
    """Stop `pid` and its process group (a server started in its own session): SIGTERM, up to `grace_s` for it to
    go (reaping it when it is our child), then SIGKILL the same way. Blocking: call it off the event loop."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            if not pid_alive(pid):
                return
            time.sleep(0.02)


def start_logged(argv: list[str], *, cwd: str | Path, env: dict[str, str], log_path: Path) -> subprocess.Popen:
    """Start a long-lived server in its own session (so `stop_group` stops all of it), its stdout and stderr
    written to `log_path`, no stdin."""
    with open(log_path, "wb") as out:
        return subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)


def _read_capped(f) -> str:
    f.seek(0)
    data = f.read(MAX_OUTPUT_BYTES + 1)
    text = data[:MAX_OUTPUT_BYTES].decode("utf-8", errors="replace")
    if len(data) > MAX_OUTPUT_BYTES:
        text += f"\n[output truncated at {MAX_OUTPUT_BYTES} bytes]"
    return text


async def run_process(argv: list[str], *, cwd: str | Path, env: dict[str, str],
                      timeout: float | None) -> ExecResult:
    """Run argv in its own process group; on timeout (or cancellation) kill the whole group.

    Output goes to temporary files, not pipes, so a background job the command leaves running
    (a server started with `&`) never keeps us waiting for end-of-file.
    """
    started = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, cwd=str(cwd), env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                start_new_session=True,
            )
        except FileNotFoundError:
            return ExecResult(127, "", f"{argv[0]}: command not found", duration_s=time.monotonic() - started)
        except PermissionError:
            return ExecResult(126, "", f"{argv[0]}: permission denied", duration_s=time.monotonic() - started)
        timed_out = False
        try:
            await asyncio.wait_for(proc.wait(), timeout)
        except TimeoutError:
            timed_out = True
            kill_group(proc.pid)  # pgid == pid: start_new_session made it a group leader
            await proc.wait()
        except BaseException:  # cancelled: leave nothing of the command running
            kill_group(proc.pid)
            raise
        code = proc.returncode if proc.returncode is not None else -1
        if code < 0:  # killed by a signal: report it like a shell does (137 = SIGKILL)
            code = 128 - code
        return ExecResult(code, _read_capped(out), _read_capped(err), timed_out=timed_out,
                          duration_s=time.monotonic() - started)


# -- finding a sandbox's processes ------------------------------------------------------------
def tagged_pids(sandbox_id: str) -> list[int]:
    """Pids whose environment has AGENTENV_SANDBOX=<sandbox_id> (best effort; unreadable ones skipped)."""
    tag = f"{TAG_VAR}={sandbox_id}"
    me = os.getpid()
    pids: list[int] = []
    if os.path.isdir("/proc"):
        raw_tag = tag.encode()
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit() or int(entry.name) == me:
                continue
            try:
                with open(f"/proc/{entry.name}/environ", "rb") as f:
                    environ = f.read()
            except OSError:  # gone meanwhile, or another user's
                continue
            if raw_tag in environ.split(b"\0"):
                pids.append(int(entry.name))
        return pids
    # No /proc (macOS): BSD `ps e` prints each process's environment after its command.
    try:
        listing = subprocess.run(["ps", "eww", "-A", "-o", "pid=", "-o", "command="], capture_output=True,
                                 text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return pids
    for line in listing.splitlines():
        pid_text, _, rest = line.strip().partition(" ")
        if pid_text.isdigit() and int(pid_text) != me and re.search(rf"(^|\s){re.escape(tag)}(\s|$)", rest):
            pids.append(int(pid_text))
    return pids


def kill_tagged(sandbox_id: str, rounds: int = 10) -> int:
    """SIGKILL every process tagged with the sandbox id; rescan until two scans in a row find none (a process
    in the middle of an exec shows an empty environment for an instant, so one empty scan proves nothing).
    Returns the count."""
    killed: set[int] = set()
    empty_scans = 0
    for _ in range(rounds):
        pids = tagged_pids(sandbox_id)
        if not pids:
            empty_scans += 1
            if empty_scans == 2:
                break
            time.sleep(0.02)
            continue
        empty_scans = 0
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
        time.sleep(0.05)
    return len(killed)
