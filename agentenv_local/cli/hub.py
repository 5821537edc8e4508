"""`agentenv up` / `agentenv down`: a long-lived hub for the project, and stopping it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import click


@click.command()
@click.option("--detach", is_flag=True, help="Run in the background; logs go to .agentenv/logs/hub.log.")
def up(detach):
    """Start a long-lived hub for this project (foreground unless --detach).

    Every other command finds it by itself; `agentenv down` stops it.
    """
    from agentenv_local.hub import connect, hub_status
    from agentenv_local.paths import project_paths

    if detach:
        status = hub_status()
        deadline = time.monotonic() + 10
        while status and status.get("pid") is None and time.monotonic() < deadline:
            # A hub that is starting or stopping (or whose lock a dying process still holds): give it a moment.
            time.sleep(0.1)
            status = hub_status()
        if status and status.get("long_lived"):
            click.echo(f"A hub is already running (pid {status.get('pid')}).")
            return 0
        if status:  # another command's hub, gone when that command is done: not what was asked for
            raise click.ClickException(
                f"another command (pid {status.get('pid') or '?'}) is the hub of this project right now; "
                "run `agentenv up --detach` again when it is done")
        paths = project_paths().ensure()
        log = open(paths.logs_dir / "hub.log", "ab")
        env = {**os.environ, "AGENTENV_HOME": str(paths.state_dir)}
        proc = subprocess.Popen([sys.executable, "-m", "agentenv_local.cli.main", "up"], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=log, env=env, start_new_session=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise click.ClickException(f"the hub exited at start (code {proc.returncode}); "
                                           f"see {paths.logs_dir / 'hub.log'}")
            status = hub_status()
            if status and status.get("pid"):
                click.echo(f"Hub running in the background (pid {status['pid']}) for {paths.state_dir}.")
                return 0
            time.sleep(0.05)
        raise click.ClickException("the hub did not answer within 10s; see .agentenv/logs/hub.log")
    from agentenv_local.hub.session import LocalSession

    session = connect(long_lived=True)
    assert isinstance(session, LocalSession)  # long-lived: this process became the hub, or connect raised
    hub = session.hub
    signal.signal(signal.SIGTERM, lambda *_: hub.shutdown_requested.set())
    click.echo(f"Hub up for {session.paths.state_dir} (pid {os.getpid()}). Ctrl-C or `agentenv down` stops it.")
    if hub.interrupted_at_start:
        click.echo(f"Marked {len(hub.interrupted_at_start)} run(s) left by an earlier hub as interrupted.")
    try:
        hub.serve_until_shutdown()
    except KeyboardInterrupt:
        pass
    finally:
        session.close()
    click.echo("Hub stopped.")
    return 0


@click.command()
@click.option("--force", is_flag=True,
              help="Stop a hub that does not answer (stopped or stuck): SIGCONT and SIGTERM, then SIGKILL after 10s.")
def down(force):
    """Stop this project's hub (runs still going are marked interrupted; resume them later)."""
    from agentenv_local.hub import hub_status
    from agentenv_local.hub.session import _Connection, _HubGone
    from agentenv_local.paths import project_paths

    if force:
        return _force_down(project_paths())
    status = hub_status()  # a stopped or stuck hub: a HubError that says so, within about 5 s
    if not status:
        click.echo("No hub is running for this project.")
        return 0
    paths = project_paths()
    try:
        conn = _Connection(paths)
    except OSError:
        conn = None  # it is starting or already stopping: wait for the lock below
    if conn is not None:
        try:
            conn.request("hub.shutdown", [], {})
        except (_HubGone, OSError):
            pass  # it hung up: it was stopping already
        finally:
            conn.close()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and _held(paths):
        time.sleep(0.05)
    if _held(paths):
        raise click.ClickException(f"the hub (pid {status.get('pid')}) did not stop within 15s; "
                                   "if it is stuck, stop it with `agentenv down --force`")
    click.echo(f"Hub stopped (pid {status.get('pid')}).")
    return 0


def _held(paths) -> bool:
    from agentenv_local.hub.lock import HubLock

    return paths.state_dir.exists() and HubLock(paths.lock_file).is_held_elsewhere()


def _force_down(paths) -> int:
    """Signal the hub's process without asking it: the only way to stop one that cannot answer."""
    from agentenv_local.hub.session import hub_pid

    if not _held(paths):
        click.echo("No hub is running for this project.")
        return 0
    pid = hub_pid(paths)
    from agentenv_local.procs import cmdline

    if pid is None or b"agentenv" not in cmdline(pid):
        raise click.ClickException(f"cannot tell which process holds {paths.lock_file}; find it with "
                                   f"`fuser {paths.lock_file}` and stop it with `kill PID`")
    for first in (signal.SIGCONT, signal.SIGTERM):  # a stopped process acts on SIGTERM once continued
        os.kill(pid, first)
    kills: list[tuple[signal.Signals | None, float]] = [(signal.SIGKILL, 10.0), (None, 5.0)]
    for sig, wait_s in kills:
        deadline = time.monotonic() + wait_s
        while _held(paths) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not _held(paths):
            click.echo(f"Hub stopped (pid {pid}); runs it had going are interrupted: "
                       "`agentenv runs resume RUN` finishes them.")
            return 0
        if sig is not None:
            os.kill(pid, sig)
    raise click.ClickException(f"the hub (pid {pid}) still holds {paths.lock_file} after SIGKILL")
