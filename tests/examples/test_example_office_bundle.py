"""examples/office: the mail + crm multi env bundle runs offline, passes, and leaves nothing running.

`agentenv run ./examples/office` in a fresh project (twice: the second run reuses every stored
version), then the run's verifications, the env instances and the processes left behind are checked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "examples" / "office"
EXE = str(Path(sys.executable).with_name("agentenv"))

AGENT_CRITERIA = {"sees_tools", "found_thread", "read_thread", "found_deal", "replied", "deal_moved",
                  "refused_log_activity", "refused_purge_mailbox"}
OUTCOME_CRITERIA = {"deal_won", "stage_change_logged", "reply_sent", "activity_by_trigger",
                    "reminder_by_time_trigger", "refused_calls_had_no_effect"}


def marked_processes(mark: str) -> list[str]:
    """Processes (other than ours) whose environment carries `mark`: what the CLI started and left."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            environ = (proc / "environ").read_bytes()
            if f"OFFICE_TEST_MARK={mark}".encode() in environ.split(b"\0"):
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found.append(f"{proc.name}: {cmdline}")
        except OSError:
            continue
    return found


@pytest.fixture()
def cli(tmp_path):
    mark = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_") or k == "AGENTENV_SANDBOX_DEFAULT"}
    env["OFFICE_TEST_MARK"] = mark

    def run(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
        return subprocess.run([EXE, *args], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=timeout, check=False)

    run.mark = mark
    yield run
    run("down", timeout=60)


def run_id(output: str) -> str:
    line = next(x for x in reversed(output.splitlines()) if ", run " in x)
    return line.rsplit(", run ", 1)[1].split()[0]


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
def test_office_bundle_runs_offline_and_cleans_up(cli):
    for attempt in (1, 2):
        done = cli("run", str(BUNDLE))
        assert done.returncode == 0, f"run {attempt}:\n{done.stdout}\n{done.stderr}"
        if attempt == 2:
            assert "v1 (new)" not in done.stdout and "envs/office: v1, unchanged" in done.stdout, done.stdout

        shown = cli("runs", "show", run_id(done.stdout), "--json")
        assert shown.returncode == 0, shown.stderr
        record = json.loads(shown.stdout)
        assert record["status"] == "passed" and record["score"] == 1.0
        metadata = record["context"]["metadata"]
        plan = metadata["script_results"]["agent"]["plan"]  # the scripted agent (run_code with env_id)
        assert {r["id"] for r in plan} == AGENT_CRITERIA and all(r["result"] for r in plan), plan
        rows = metadata["verifications"]["outcome"]["results"]
        assert {r["id"] for r in rows} == OUTCOME_CRITERIA and all(r["result"] for r in rows), rows
        metadata = record["context"]["metadata"]
        assert metadata["awaited_env_triggers"]["triggers_fired"] == {"log_customer_email": "fired",
                                                                     "review_reminder": "fired"}
        assert metadata["clock_configurations"][0]["mode"] == "stepped"
        assert "snapshot" in metadata["env_snapshotted_universes"]

        instances = cli("env", "instances", "--json")
        assert instances.returncode == 0, instances.stderr
        assert json.loads(instances.stdout) == [], instances.stdout

        deadline = time.monotonic() + 10
        while (left := marked_processes(cli.mark)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not left, f"processes left after run {attempt}: {left}"
