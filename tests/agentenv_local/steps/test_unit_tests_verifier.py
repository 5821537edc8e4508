"""run_container_unit_tests_verifier: a test command in a process sandbox, scored by exit code or
by a reward file, its output stored as one file-bundle artifact."""

from __future__ import annotations

import asyncio

import pytest

from agentenv_local.artifacts import read_files
from agentenv_local.errors import StepError, ValidationError
from agentenv_local.sandbox_api import ExecResult
from agentenv_local.steps.unit_tests_verifier import (
    RunContainerUnitTestsVerifierStep,
    parse_reward,
)
from agentenv_local.tasks.model import parse_task

TYPE = "run_container_unit_tests_verifier"


@pytest.fixture
def deployed(run):
    """A run with one process sandbox named "sandbox" (pinned: these tests look into its folder)."""
    run.execute(run.step({"id": "sb", "type": "deploy_sandbox", "sandbox_type": "process"}))
    return run


def verify(run, **fields) -> dict:
    """Run the verifier; its verification, with the one row and the stored output files."""
    fields.setdefault("id", "tests")
    run.execute(run.step({"type": TYPE, **fields}))
    verification = run.metadata["verifications"][fields.get("verifier_id") or fields["id"]]
    [row] = verification["results"]
    ref = row["output_artifact"]
    doc = run.store.documents.find("artifacts", ref["id"], ref["version"])
    return {**verification, "row": row, "files": read_files(run.store, doc), "doc": doc}


def test_passing_command_scores_1_and_stores_its_output(deployed):
    v = verify(deployed, command="echo all good; echo warn >&2", env_vars={"WHO": "x"})
    assert v["score"] == 1.0 and v["step_id"] == "tests"
    row = v["row"]
    assert row["result"] is True and row["score"] == 1.0 and row["exit_code"] == 0 and row["timed_out"] is False
    assert row["reward_source"] == "exit_code" and row["skipped"] is False
    assert row["justification"].startswith("exit 0; score 1 by exit code; stdout: all good; stderr: warn")
    assert v["files"] == {"stdout.txt": b"all good\n", "stderr.txt": b"warn\n"}
    assert v["doc"]["id"] == "run-0001__tests-verifier-output" and v["doc"]["body"]["type"] == "file_artifact_universe"
    assert {"id": v["doc"]["id"], "version": 1, "type": "file_artifact_universe", "step_id": "tests",
            "kind": "verifier_output"} in deployed.metadata["artifacts"]


def test_failing_command_scores_0(deployed):
    v = verify(deployed, command="echo '1 failed, 3 passed'; exit 3", verifier_id="unit")
    assert v["score"] == 0.0 and v["row"]["result"] is False and v["row"]["exit_code"] == 3
    assert "exit 3; score 0 by exit code; stdout: 1 failed, 3 passed" in v["row"]["justification"]


def test_env_vars_and_working_directory(deployed):
    v = verify(deployed, command='test "$GREETING" = hello && test "$PWD" = /app || { echo "$PWD"; exit 1; }',
               env_vars={"GREETING": "hello"})
    assert v["score"] == 1.0, v["row"]["justification"]  # (the process sandbox rewrites /app to its folder)
    v = verify(deployed, id="t2", command='test "$GREETING" = hello && test -f .sandbox.json',
               env_vars={"GREETING": "hello"})
    assert v["score"] == 1.0


def test_setup_commands_run_first_and_a_failing_one_scores_0(deployed):
    v = verify(deployed, setup_commands=["echo one > order.txt", "echo two >> order.txt"],
               command="test \"$(cat order.txt | tr '\\n' ' ')\" = 'one two '")
    assert v["score"] == 1.0 and v["files"]["setup-1.stdout.txt"] == b""
    v = verify(deployed, id="t2", setup_commands=["true", "echo cannot install >&2; exit 4", "touch never"],
               command="touch ran")
    assert v["score"] == 0.0 and v["row"]["failed_setup_command_index"] == 1
    assert v["row"]["reward_source"] == "setup"
    assert v["row"]["justification"] == ("setup command 2 of 3 (`echo cannot install >&2; exit 4`) failed: exit 4; "
                                         "stderr: cannot install")
    assert "stdout.txt" not in v["files"] and v["files"]["setup-2.stderr.txt"] == b"cannot install\n"
    root = deployed.sandbox().root
    assert not (root / "never").exists() and not (root / "ran").exists()


def test_timeout_scores_0(deployed):
    v = verify(deployed, command="echo started; sleep 30", timeout_sec=0.5)
    assert v["score"] == 0.0 and v["row"]["timed_out"] is True and v["row"]["reward_source"] == "timeout"
    assert v["row"]["justification"].startswith("timed out after 0.5s; score 0; stdout: started")


@pytest.mark.parametrize("content, score", [
    ("0.75", 0.75), ("1\n", 1.0), ("0", 0.0), ('{"reward": 0.25, "passed": 1}', 0.25), ('{"reward": 1}', 1.0)])
def test_reward_file_decides_the_score(deployed, content, score):
    v = verify(deployed, command=f"printf '%s' '{content}' > /app/logs/reward.txt; exit 1",
               setup_commands=["mkdir -p logs"], reward_path="logs/reward.txt")
    assert v["score"] == score and v["row"]["reward"] == score and v["row"]["reward_source"] == "reward_path"
    assert f"reward {score:g} from /app/logs/reward.txt" in v["row"]["justification"]
    assert v["row"]["result"] is (score == 1.0)


@pytest.mark.parametrize("content, why", [
    ("passed", 'not a number, nor JSON {"reward": x}'), ("1.5", "reward 1.5 is outside [0, 1]"),
    ("-0.1", "reward -0.1 is outside [0, 1]"), ("nan", "reward nan is outside [0, 1]"), ("", "the file is empty"),
    ('{"score": 1}', 'JSON without a "reward" key'), ('{"reward": "1"}', '"reward" must be a number, not "1"'),
    ('{"reward": true}', '"reward" must be a number, not true')])
def test_bad_reward_file_scores_0_and_says_why(deployed, content, why):
    v = verify(deployed, command=f"printf '%s' '{content}' > reward.txt", reward_path="/app/reward.txt")
    assert v["score"] == 0.0 and v["row"]["reward"] is None
    assert why in v["row"]["justification"] and "reward file /app/reward.txt holds" in v["row"]["justification"]


def test_missing_or_stale_reward_file_scores_0(deployed):
    asyncio.run(deployed.sandbox().write_file("/app/reward.txt", b"1"))  # stale: removed before the run
    v = verify(deployed, command="echo no reward written", reward_path="reward.txt")
    assert v["score"] == 0.0
    assert "exit 0; score 0: reward file /app/reward.txt was not written" in v["row"]["justification"]


def test_result_paths_are_stored(deployed):
    v = verify(deployed, command="mkdir -p reports && echo '<xml/>' > reports/junit.xml && echo ok > summary.txt",
               result_paths=["reports", "/app/summary.txt", "nope.json"])
    assert v["score"] == 1.0
    assert v["files"]["results/reports/junit.xml"] == b"<xml/>\n" and v["files"]["results/summary.txt"] == b"ok\n"
    assert sorted(v["row"]["result_files"]) == ["results/reports/junit.xml", "results/summary.txt"]
    assert v["row"]["result_files"]["results/summary.txt"]["size"] == 3
    assert "result path nope.json missing" in v["row"]["justification"]


def test_killed_reason_goes_into_the_justification(deployed, monkeypatch):
    sandbox_cls = type(deployed.sandbox())
    real_exec = sandbox_cls.exec

    async def oom_exec(self, command, **kw):
        result = await real_exec(self, command, **kw)
        if command == "run-tests":
            result = ExecResult(137, "", "Killed", duration_s=0.1)
            result.killed_reason = "out of memory: 512 MiB limit"
        return result

    monkeypatch.setattr(sandbox_cls, "exec", oom_exec)
    v = verify(deployed, command="run-tests")
    assert v["score"] == 0.0 and v["row"]["killed_reason"] == "out of memory: 512 MiB limit"
    assert v["row"]["justification"].startswith("exit 137 (killed: out of memory: 512 MiB limit)")
    reasons = iter(["killed by SIGKILL (the pids limit)"])

    async def sigkill_exec(self, command, **kw):
        result = await real_exec(self, command, **kw)
        if command == "run-tests":
            result = ExecResult(137, "", "", duration_s=0.1)
            result.killed_reason = next(reasons)  # a reason that says "killed" itself is not doubled
        return result

    monkeypatch.setattr(sandbox_cls, "exec", sigkill_exec)
    v = verify(deployed, id="t2", command="run-tests")
    assert v["row"]["justification"] == "exit 137 (killed by SIGKILL (the pids limit)); score 0 by exit code"


def test_users_and_targets(run):
    with pytest.raises(StepError, match="no sandbox is deployed"):
        verify(run, command="true")
    run.execute(run.step({"id": "s1", "type": "deploy_sandbox", "sandbox_type": "process", "sandbox_name": "one"}))
    run.execute(run.step({"id": "s2", "type": "deploy_sandbox", "sandbox_type": "process", "sandbox_name": "two"}))
    with pytest.raises(StepError, match="2 sandboxes are deployed"):
        verify(run, command="true")
    assert verify(run, command="true", container_name="two", user=None)["row"]["sandbox_name"] == "two"
    # A reference Harbor task names the VM and the task container in it: the container is the sandbox here.
    assert verify(run, id="t3", command="true", sandbox_name="one", container_name="two",
                  user=None)["row"]["sandbox_name"] == "two"
    with pytest.raises(StepError, match="cannot run commands as user 'tester'") as info:
        verify(run, command="true", sandbox_name="one", user="tester")
    assert "leave user out" in info.value.hint


def test_config_problems_and_task_validation(run):
    def problems(**fields):
        return run.step({"id": "t", "type": TYPE, **fields}).config_problems()

    assert problems(command="pytest -q") == []
    assert problems(command="  ") == ["command: must be a non-empty command string"]
    assert problems(command="x", setup_commands=["ok", ""]) == [
        "setup_commands[1]: must be a non-empty command string"]
    assert problems(command="x", reward_path="") == [
        "reward_path: must not be empty (leave it out to score by exit code)"]
    assert problems(command="x", sandbox_name="a", container_name="b") == []  # the container wins (see above)
    assert problems(command="x", env_vars={"A=B": "c"}) == ["env_vars: bad variable name(s): 'A=B'"]
    assert RunContainerUnitTestsVerifierStep(id="t", command="x", result_paths="out.xml").result_paths == ["out.xml"]
    with pytest.raises(ValidationError) as info:
        parse_task([{"id": "box", "type": "deploy_sandbox"},
                    {"id": "t", "type": TYPE, "command": ""},
                    {"id": "u", "type": TYPE},
                    {"id": "v", "type": TYPE, "command": "x", "timeout_sec": 0},
                    {"id": "w", "type": TYPE, "command": "x", "timeout": 5}], "task")
    text = "\n".join(info.value.problems)
    assert f"step 't' ({TYPE}): command: must be a non-empty command string" in text
    assert f"step 'u' ({TYPE}): field 'command'" in text
    assert f"step 'v' ({TYPE}): field 'timeout_sec'" in text
    assert f"step 'w' ({TYPE}): field 'timeout'" in text


def test_parse_reward():
    assert parse_reward("0.5") == (0.5, None)
    assert parse_reward(" 1e-1 ") == (0.1, None)
    assert parse_reward('{"reward": 0}') == (0.0, None)
    assert parse_reward("inf")[0] is None and parse_reward("[1]")[1] == 'JSON without a "reward" key'


# -- through the real runner ----------------------------------------------------------------------
# (the `hub` fixture, an InProcessHub, is in conftest.py)
def test_score_is_the_runs_score_in_a_real_run(hub):
    run = hub.run([
        {"id": "box", "type": "deploy_sandbox", "sandbox_type": "process", "sandbox_name": "box"},
        {"id": "tests", "type": TYPE, "setup_commands": ["mkdir -p logs"],
         "command": "echo '{\"reward\": 0.5}' > logs/reward.json", "reward_path": "logs/reward.json"},
    ])
    assert run["status"] in ("passed", "failed"), run.get("error")
    verification = run["context"]["metadata"]["verifications"]["tests"]
    assert verification["score"] == 0.5
    assert run.get("score") == 0.5
