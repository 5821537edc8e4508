"""Helpers for the hub and runner tests: real `agentenv` subprocesses in a project folder,
small bundles written to disk, polling for run states, and an in-process hub session.

Imported as `from kits.hub import ...` by the hub, runner, CLI, TUI and reliability tests.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

from kits.servers import agentenv_exe
from kits.warm_cli import run_agentenv

FINAL = ("passed", "failed", "error", "cancelled", "interrupted")


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This environment without any AGENTENV_* variable (so the project is found from the cwd)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_") or k == "AGENTENV_SANDBOX_DEFAULT"}
    env.update(extra or {})
    return env


def cli(cwd: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120,
        check: bool = False, fresh: bool = False) -> subprocess.CompletedProcess:
    """Run `agentenv ARGS` in `cwd` and wait for it (stdin closed, output captured as text); forked from the warm
    process (kits/warm_cli.py) unless `fresh`."""
    proc = run_agentenv(list(args), cwd=cwd, env=env or clean_env(), timeout=timeout, fresh=fresh)
    if check:
        assert proc.returncode == 0, _describe(args, proc.returncode, proc.stdout, proc.stderr)
    return proc


def _describe(args, rc, out, err) -> str:
    return f"agentenv {' '.join(args)} exited {rc}\n--- stdout\n{out}\n--- stderr\n{err}"


class Background:
    """`agentenv ARGS` running in the background; output goes to files (no pipe to fill up)."""

    _count = 0

    def __init__(self, cwd: Path, *args: str, env: dict[str, str] | None = None, out_dir: Path | None = None,
                 default_sigint: bool = False):
        Background._count += 1
        out_dir = Path(out_dir or cwd.parent / f"{cwd.name}-out")
        out_dir.mkdir(parents=True, exist_ok=True)
        stem = f"{Background._count:03d}-{args[0] if args else 'agentenv'}"
        self.args, self.cwd = args, cwd
        self.stdout_path = out_dir / f"{stem}.out"
        self.stderr_path = out_dir / f"{stem}.err"
        self._out = open(self.stdout_path, "wb")
        self._err = open(self.stderr_path, "wb")
        # default_sigint: SIGINT as a terminal delivers it, even when these tests run as a
        # background job (whose children inherit an ignored SIGINT, so Python sets no handler).
        preexec = (lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)) if default_sigint else None
        self.proc = subprocess.Popen([agentenv_exe(), *args], cwd=cwd, env=env or clean_env(),
                                     stdin=subprocess.DEVNULL, stdout=self._out, stderr=self._err,
                                     preexec_fn=preexec)
        self.pid = self.proc.pid

    @property
    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait(self, timeout: float = 120) -> int:
        try:
            rc = self.proc.wait(timeout)
        finally:
            self._out.close()
            self._err.close()
        return rc

    def wait_to_be_hub(self, timeout: float = 60) -> None:
        """Until this command is the project's hub. A command a test runs before that may become the hub itself,
        and then (as the hub does) serve this one to its end before it exits: a test that polls `runs list`
        while a long run starts waits first."""
        wait_until(lambda: (hub_info(self.cwd) or {}).get("pid") == self.pid, timeout,
                   what=f"`agentenv {' '.join(self.args[:2])}` to be the hub")

    def expect(self, rc: int = 0, timeout: float = 120) -> "Background":
        got = self.wait(timeout)
        assert got == rc, _describe(self.args, got, self.stdout, self.stderr)
        return self

    def kill9(self) -> None:
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
        self.wait(30)

    def stop(self) -> None:
        """Best-effort cleanup at the end of a test."""
        if self.alive():
            self.proc.kill()
        try:
            self.wait(30)
        except subprocess.TimeoutExpired:
            pass


def wait_until(predicate: Callable[[], Any], timeout: float = 60, interval: float = 0.1, what: str = "") -> Any:
    """Poll `predicate` until it returns something truthy; fail after `timeout` seconds.

    A predicate that runs a command (`runs list`, `runs show`: ~0.3 s of CPU each) is polled at most a third of
    the time (the pause is twice its duration): polled back to back, it took most of a core from the very work
    it waits for, on a two-core machine running three test workers."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        began = time.monotonic()
        last = predicate()
        if last:
            return last
        time.sleep(max(interval, 2 * (time.monotonic() - began)))
    raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate} (last: {last!r})")


def runs_json(cwd: Path, env: dict[str, str] | None = None) -> list[dict]:
    proc = cli(cwd, "runs", "list", "--json", "--limit", "10000", env=env, check=True)
    return json.loads(proc.stdout)


def show_json(cwd: Path, run_id: str, env: dict[str, str] | None = None) -> dict:
    proc = cli(cwd, "runs", "show", run_id, "--json", env=env, check=True)
    return json.loads(proc.stdout)


def hub_info(cwd: Path) -> dict | None:
    try:
        return json.loads((cwd / ".agentenv" / "hub.json").read_text())
    except (OSError, ValueError):
        return None


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped) is not alive
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def sandbox_folders(cwd: Path) -> list[str]:
    root = cwd / ".agentenv" / "sandboxes"
    return sorted(p.name for p in root.iterdir()) if root.is_dir() else []


def gate(marker: Path, seconds: int = 60) -> str:
    """A shell snippet (a subshell) that waits up to `seconds` for `marker` to exist: status 0, else 1."""
    m = shlex.quote(str(marker))
    return f"(for i in $(seq {seconds * 20}); do [ -f {m} ] && exit 0; sleep 0.05; done; exit 1)"


def bash_check(step_id: str, command: str, **fields: Any) -> dict:
    """A verify_sandbox step with one bash_cmd_succeeds criterion."""
    return {"id": step_id, "type": "verify_sandbox", "criteria": [{"type": "bash_cmd_succeeds", "bash_cmd": command}],
            **fields}


def deploy(step_id: str = "box", name: str = "box", **fields: Any) -> dict:
    return {"id": step_id, "type": "deploy_sandbox", "sandbox_name": name, **fields}


def write_bundle(root: Path, name: str, tasks: dict[str, list[dict]],
                 artifacts: dict[str, dict[str, str | bytes]] | None = None) -> Path:
    """A bundle folder `root/name` with tasks/<task>.json and artifacts/<name>/<files>."""
    folder = root / name
    (folder / "tasks").mkdir(parents=True, exist_ok=True)
    (folder / "README.md").write_text(f"# {name}: a bundle written by a test\n")
    for task_name, steps in tasks.items():
        (folder / "tasks" / f"{task_name}.json").write_text(json.dumps(steps, indent=2))
    for art_name, files in (artifacts or {}).items():
        art = folder / "artifacts" / art_name
        art.mkdir(parents=True, exist_ok=True)
        for rel, data in files.items():
            target = art / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(data, bytes):
                target.write_bytes(data)
            else:
                target.write_text(data)
    return folder


def slow_bundle(root: Path, marker: Path) -> Path:
    """A bundle `slow` whose task's second step waits for `marker` (so a test can act while it runs)."""
    return write_bundle(root, "slow", {"slow": [
        deploy(), bash_check("wait", gate(marker, 120), depends_on=["box"]),
    ]})


def run_id_of(bg: Background, cwd: Path, task_name: str | None = None, timeout: float = 60) -> str:
    """The id of the run a background `agentenv run` started (the newest run of the task).

    Polls only once a hub runs (`bg` itself, or a long-lived one): a poll that found no hub would
    become the hub itself, and then stay up (its process not exiting) until bg's run is over.
    """
    wait_until(lambda: (info := hub_info(cwd)) and _alive(info.get("pid")), timeout,
               what="a hub to be up")

    def find():
        rows = runs_json(cwd)
        rows = [r for r in rows if task_name is None or r.get("task_name") == task_name]
        return rows[0]["run_id"] if rows else None
    return wait_until(find, timeout, what="the run to be recorded")


def step_status(run: dict, step_id: str) -> str | None:
    return ((run.get("steps") or {}).get(step_id) or {}).get("status")


# -- in-process ---------------------------------------------------------------------------------
class InProcessHub:
    """This test process as the hub of a project in `root` (real DuckDB file, real runner)."""

    def __init__(self, root: Path, config_overrides: dict | None = None):
        from agentenv_local.config import load_config
        from agentenv_local.hub import connect
        from agentenv_local.hub.session import LocalSession

        (root / ".agentenv").mkdir(exist_ok=True)
        self.root = root
        config = load_config(root, overrides=config_overrides, environ=clean_env())
        session = connect(start=root, config=config, defer_linger=False)
        assert isinstance(session, LocalSession), "this test process must become the hub"
        self.session = session
        self.store = self.session.store
        self._tasks = 0

    def task(self, steps: list[dict], task_id: str | None = None) -> str:
        self._tasks += 1
        task_id = task_id or f"@local/test/task{self._tasks}"
        self.store.documents.put("tasks", task_id, {"steps": steps})
        return task_id

    def submit(self, task_id: str, keep: bool = False, **kwargs: Any) -> str:
        """Start a run of a stored task; `keep` and the other `RunOptions` fields go in its options."""
        from agentenv_local.tasks.options import RunOptions

        return self.session.call("runner.submit", task_id=task_id, options=RunOptions(keep=keep), **kwargs)["run_id"]

    def wait(self, run_id: str, timeout: float = 60, statuses: tuple[str, ...] = FINAL) -> dict:
        return wait_until(lambda: (r := self.store.runs.get(run_id)) and r["status"] in statuses and r,
                          timeout, interval=0.02, what=f"run {run_id} to reach {statuses}")

    def run(self, steps: list[dict], timeout: float = 60, **kwargs: Any) -> dict:
        return self.wait(self.submit(self.task(steps), **kwargs), timeout)

    def close(self) -> None:
        self.session.close()


def store_text(db: Path) -> str:
    """Every row of every table of a store file, as text (catches values DuckDB stores compressed)."""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        tables = [r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'").fetchall()]
        return "\n".join(repr(con.execute(f'SELECT * FROM "{t}"').fetchall()) for t in tables)
    finally:
        con.close()
