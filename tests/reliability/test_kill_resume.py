"""kill -9 of the hub at random points of the examples/support run, after its env and agents were deployed,
then `agentenv runs resume RUN` (issue 12: 4 of 9 killed runs ended in `error` on resume, because the env and
agents the journal recorded had died with the hub).

Each trial: every run resumes to the end and passes like an unkilled run; no completed step is lost (every
journal entry from before the kill is still there, every step that had passed is passed); the only completed
steps that run again are the ones the resume rule runs again on purpose (docs/tasks/running.md, "Resume"):
what lived in the dead env and agents (the deploys, the data loads, the tool-access change and the
conversation, whose tool calls changed the env), never the verifiers.
"""

from __future__ import annotations

import os
import random
import shutil
import time
from pathlib import Path

import duckdb
import pytest
from kits.hub import Background, cli, hub_info, wait_until

SUPPORT = Path(__file__).resolve().parents[2] / "examples" / "support"
STEPS = ["deploy", "seed_mail", "seed_crm", "lock_down", "solver", "customer", "judge", "chat", "grade", "outcome"]
# What lived in the env and the agents a killed hub took with it: run again on resume when it had completed.
REDONE = {"deploy", "seed_mail", "seed_crm", "lock_down", "solver", "customer", "judge", "chat"}
TRIALS = 20


def _journal(project: Path, run_id: str) -> list[tuple[str, int, str]]:
    """(step, generation, status) of the run's journal, read from the store while no hub holds it."""
    con = duckdb.connect(str(project / ".agentenv" / "store.duckdb"), read_only=True)
    try:
        rows = con.execute("SELECT step_id, generation, status FROM step_journal WHERE run_id = ? ORDER BY seq",
                           [run_id]).fetchall()
    finally:
        con.close()
    return [(s, g, st) for s, g, st in rows]


def _run_ids(project: Path) -> set[str]:
    con = duckdb.connect(str(project / ".agentenv" / "store.duckdb"), read_only=True)
    try:
        return {r[0] for r in con.execute("SELECT run_id FROM runs").fetchall()}
    finally:
        con.close()


def _wait_gone(pid: int) -> None:
    wait_until(lambda: not Path(f"/proc/{pid}").exists() or "State:\tZ" in Path(f"/proc/{pid}/status").read_text(),
               timeout=30, interval=0.02, what=f"pid {pid} to die")


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("kill-resume")
    project = root / "proj"
    project.mkdir()
    shutil.copytree(SUPPORT, project / "support", symlinks=False)  # its shared files, copied in
    baseline = cli(project, "run", "./support", timeout=120)  # an unkilled run passes (and stores the bundle)
    assert baseline.returncode == 0 and "passed" in baseline.stdout, baseline.stdout + baseline.stderr
    return project


@pytest.mark.timeout(600)
def test_kill9_of_the_hub_after_deploys_then_resume_finishes_every_run(project):
    rng = random.Random(12)
    started = time.monotonic()
    outcomes = []
    for trial in range(TRIALS):
        point = rng.choice(STEPS[:-1])  # after the last step the run is over: nothing to kill
        delay = rng.choice([0.0, 0.0, 0.01, 0.05])
        long_lived = trial % 4 == 3  # every fourth trial kills an `agentenv up` hub under a client
        before = _run_ids(project)
        hub_pid = None
        if long_lived:
            cli(project, "up", "--detach", check=True)
            hub_pid = hub_info(project)["pid"]
        bg = Background(project, "run", "./support")
        try:
            wait_until(lambda b=bg, p=point: f"step {p} passed" in b.stdout or not b.alive(), timeout=60,
                       interval=0.005, what=f"step {point} to pass")
            time.sleep(delay)
            victim = hub_pid or bg.pid
            if Path(f"/proc/{victim}").exists():
                os.kill(victim, 9)
            bg.wait(60) if long_lived else bg.kill9()
            if hub_pid:
                _wait_gone(hub_pid)
        finally:
            bg.stop()
        (run_id,) = _run_ids(project) - before
        journal = _journal(project, run_id)
        passed_before = {s for s, _, st in journal if st == "success"}
        if passed_before >= set(STEPS):  # the kill came after the run was over
            outcomes.append((point, "finished before the kill"))
            continue

        resumed = cli(project, "runs", "resume", run_id, timeout=120)
        assert resumed.returncode == 0, f"trial {trial} (killed after {point}):\n{resumed.stdout}\n{resumed.stderr}"
        assert "passed (grade: 1, outcome: 1)" in resumed.stdout, resumed.stdout
        after = _journal(project, run_id)
        assert after[:len(journal)] == journal  # nothing recorded before the kill was lost
        again = [s for s, g, st in after[len(journal):] if st == "success"]
        assert set(again) | passed_before == set(STEPS)  # every step passed, before or after the kill
        assert len(again) == len(set(again))  # none twice in the resume
        # Completed before the kill and run again: exactly what lived in the dead env and agents.
        assert set(again) & passed_before == REDONE & passed_before, (trial, point, again, passed_before)
        outcomes.append((point, "resumed"))
    assert sum(1 for _, o in outcomes if o == "resumed") >= TRIALS - 2, outcomes
    print(f"{TRIALS} trials in {time.monotonic() - started:.1f}s: {outcomes}")
