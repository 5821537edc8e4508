"""The store under faults (issue 12): a disk that fills up during runs, a damaged store file, and
names that are not UTF-8. Each is one clear error (exit 1, no traceback) that says what to do,
and a full disk leaves the store openable: once space is freed, the earlier runs are all there.

Real parts only: the real CLI in subprocesses, real DuckDB files, a real small tmpfs for the
full disk (needs root, as on CI; skipped elsewhere rather than faked).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import duckdb
import pytest
from kits.warm_cli import run_agentenv

pytestmark = pytest.mark.timeout(300)


def agentenv(project: Path, *args: str, extra_env: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_")}
    env.update(extra_env or {})
    return run_agentenv(list(args), cwd=project, env=env, timeout=120)


def run_hello(project: Path) -> subprocess.CompletedProcess:
    return agentenv(project, "run", "hello", "--sandbox", "process")


def run_ids(project: Path) -> list[str]:
    done = agentenv(project, "runs", "list", "--json", "--limit", "1000")
    assert done.returncode == 0, done.stderr
    return [r["run_id"] for r in json.loads(done.stdout)]


def assert_clear(done: subprocess.CompletedProcess, *needles: str) -> None:
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    for needle in needles:
        assert needle in done.stderr, done.stderr


# -- a full disk during runs -------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)],
                          capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=False)


def fill(disk: Path, leave: int, name: str) -> None:
    """Write a filler file so that about `leave` bytes stay free on `disk`."""
    stat = os.statvfs(disk)
    size = stat.f_bavail * stat.f_frsize - leave
    if size > 0:
        with open(disk / name, "wb") as f:
            try:
                f.write(b"\0" * size)
            except OSError:
                pass


def test_a_disk_that_fills_during_runs_fails_clearly_and_keeps_the_store(small_disk):
    project = small_disk / "proj"
    project.mkdir()
    assert run_hello(project).returncode == 0
    before = run_ids(project)
    # Less and less room, down to none: runs write the store (and its WAL) until the disk is full.
    failures = 0
    for step, leave in enumerate((400_000, 150_000, 60_000, 20_000, 4_096, 0)):
        fill(small_disk, leave, f"filler-{step}")
        for _ in range(2):
            done = run_hello(project)
            if done.returncode != 0:
                failures += 1
                # before the fix: DuckDB's TransactionException/FatalException traceback, or a hang
                assert_clear(done, "o space left on", "df -h")
        listed = agentenv(project, "runs", "list")
        if listed.returncode != 0:
            assert_clear(listed, "o space left on", "df -h")
    assert failures, "the disk never filled up: the test proves nothing"
    for filler in small_disk.glob("filler-*"):
        filler.unlink()
    after = run_ids(project)  # the store opens again once there is room
    assert set(before) <= set(after)
    assert run_hello(project).returncode == 0
    assert len(run_ids(project)) == len(after) + 1


# -- a damaged store -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def store_with_a_run(tmp_path_factory):
    """A project whose store holds one passed run (copied for each kind of damage)."""
    project = tmp_path_factory.mktemp("template") / "proj"
    project.mkdir()
    assert run_hello(project).returncode == 0
    return project


def _damage(template: Path, tmp_path: Path, how) -> Path:
    project = tmp_path / "proj"
    shutil.copytree(template, project)
    how(project / ".agentenv" / "store.duckdb")
    return project


def _truncate(path: Path) -> None:
    with open(path, "r+b") as f:
        f.truncate(100_000)


def _garbage(path: Path) -> None:
    path.write_bytes(os.urandom(300_000))


def _corrupt_blocks(path: Path) -> None:
    with open(path, "r+b") as f:  # the first data blocks, past DuckDB's headers
        f.seek(12_288)
        f.write(os.urandom(200_000))


def _drop(table: str):
    def drop(path: Path) -> None:
        con = duckdb.connect(str(path))
        con.execute(f"DROP TABLE {table}")
        con.close()
    return drop


@pytest.mark.parametrize("how", [_truncate, _garbage, _corrupt_blocks, _drop("runs"), _drop("step_journal"),
                                 _drop("events")], ids=["truncated", "garbage", "corrupt-blocks", "no-runs-table",
                                                        "no-journal-table", "no-events-table"])
def test_a_damaged_store_is_one_clear_error(store_with_a_run, tmp_path, how):
    project = _damage(store_with_a_run, tmp_path, how)
    store = project.resolve() / ".agentenv" / "store.duckdb"
    for args in (("runs", "list"), ("run", "hello", "--sandbox", "process")):
        done = agentenv(project, *args)
        # before the fix: IOException / CatalogException tracebacks
        assert_clear(done, f"the store {store} is damaged", f"mv {store} {store}.damaged",
                     "no copy of the run journal outside this file")
    # Doing what the hint says gives a working, empty store.
    store.rename(store.with_name("store.duckdb.damaged"))
    assert run_ids(project) == []
    assert run_hello(project).returncode == 0


# -- names that are not UTF-8 ------------------------------------------------------------------
def test_a_state_folder_whose_path_is_not_utf8(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    home = os.fsdecode(os.fsencode(str(tmp_path)) + b"/st\xffate")
    done = agentenv(project, "runs", "list", extra_env={"AGENTENV_HOME": home})
    assert_clear(done, "is not valid UTF-8", "st\\xffate")  # before: RuntimeError std::bad_cast


def test_output_with_a_name_that_is_not_utf8_does_not_crash(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    home = os.fsencode(str(tmp_path)) + b"/st\xffate"
    os.mkdir(home)
    with open(home + b"/config.toml", "w") as f:
        f.write("[hub]\nlinger_s = 1\n")
    # A strict UTF-8 stdout (as in most locales): printing the path crashed click.echo before.
    done = agentenv(project, "config", "show", extra_env={"AGENTENV_HOME": os.fsdecode(home),
                                                           "PYTHONIOENCODING": "utf-8"})
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "st\\udcffate" in done.stdout
