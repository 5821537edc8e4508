"""verify_sandbox: probes and shell checks in a real process sandbox, scored into the run."""

from __future__ import annotations

import asyncio

import pytest

from agentenv_local.errors import StepError


@pytest.fixture
def greeted(deployed):
    sandbox = deployed.sandbox()
    asyncio.run(sandbox.write_file("/app/greeting/hello.txt", b"Hello, world\n"))
    asyncio.run(sandbox.write_file("/app/greeting/empty.txt", b""))
    return deployed


def verification(run, verifier_id):
    return run.metadata["verifications"][verifier_id]


def test_all_criteria_pass(greeted):
    greeted.execute(greeted.step({"id": "check", "type": "verify_sandbox", "criteria": [
        {"type": "probe_file_exists", "paths": ["greeting/hello.txt", "/app/greeting/empty.txt"]},
        {"type": "probe_dir_exists", "paths": ["greeting"]},
        {"type": "probe_file_contains", "paths": ["greeting/hello.txt"], "expected": "[Hh]ello"},
        {"type": "bash_cmd_succeeds",
         "bash_cmd": "test -s greeting/hello.txt && grep -q world /app/greeting/hello.txt"},
    ]}))
    v = verification(greeted, "check")
    assert v["score"] == 1.0 and v["score_aggregator"] == "all_pass" and v["step_id"] == "check"
    rows = v["results"]
    assert [r["criterion_index"] for r in rows] == [0, 1, 2, 3]
    assert all(r["result"] is True and r["score"] == 1 and r["skipped"] is False for r in rows)
    assert rows[2]["justification"] == "greeting/hello.txt contains /[Hh]ello/"
    assert rows[2]["expected"] == "[Hh]ello" and rows[2]["type"] == "probe_file_contains"
    assert rows[3]["justification"] == "exit 0"


def test_failing_criteria_score_zero_with_justifications(greeted):
    greeted.execute(greeted.step({"id": "check", "type": "verify_sandbox", "verifier_id": "fs", "criteria": [
        {"type": "probe_file_exists", "paths": ["greeting/hello.txt", "greeting/missing.txt"]},
        {"type": "probe_dir_exists", "paths": ["greeting/hello.txt"]},
        {"type": "probe_file_contains", "paths": ["greeting/hello.txt", "nope.txt"], "expected": "^bye"},
        {"type": "bash_cmd_succeeds", "bash_cmd": "echo failing on purpose >&2; exit 1"},
        {"type": "probe_file_exists", "paths": ["/etc/passwd"]},
    ]}))
    v = verification(greeted, "fs")
    assert v["score"] == 0.0
    why = [r["justification"] for r in v["results"]]
    assert all(r["result"] is False and r["score"] == 0 for r in v["results"])
    assert why[0] == "missing file(s): greeting/missing.txt"
    assert why[1] == "missing directory(s): greeting/hello.txt"
    assert why[2] == "greeting/hello.txt does not contain /^bye/; nope.txt is missing"
    assert why[3] == "exit 1: failing on purpose"
    assert "only has /app" in why[4]


def test_weighted_average_and_unknown_types_skipped(greeted):
    greeted.execute(greeted.step({"id": "check", "type": "verify_sandbox", "score_aggregator": "weighted_average",
                                  "criteria": [
        {"type": "probe_file_exists", "paths": ["greeting/hello.txt"], "weight": 3, "description": "made it"},
        {"type": "probe_file_exists", "paths": ["absent"], "weight": 1},
        {"type": "probe_screenshot_matches", "image": "x.png"},
    ]}))
    v = verification(greeted, "check")
    assert v["score"] == pytest.approx(0.75)
    skipped = v["results"][2]
    assert skipped["skipped"] is True and "unknown criterion type" in skipped["justification"]
    assert v["results"][0]["description"] == "made it"


def test_shell_timeout_and_base_dir(greeted):
    greeted.execute(greeted.step({"id": "check", "type": "verify_sandbox", "base_dir": "/app/greeting",
                                  "shell_timeout_seconds": 0.5, "criteria": [
        {"type": "probe_file_exists", "paths": ["hello.txt"]},
        {"type": "bash_cmd_succeeds", "bash_cmd": "test -f hello.txt"},
        {"type": "bash_cmd_succeeds", "bash_cmd": "sleep 30"},
    ]}))
    rows = verification(greeted, "check")["results"]
    assert [r["result"] for r in rows] == [True, True, False]
    assert rows[2]["justification"].startswith("timed out after 0.5s")


def test_config_problems(run):
    def problems(criteria, **fields):
        return run.step({"id": "v", "type": "verify_sandbox", "criteria": criteria, **fields}).config_problems()

    assert problems([]) == ["criteria: needs at least one criterion"]
    assert problems([{"type": "probe_file_exists"}]) == ['criteria[0] (probe_file_exists): missing "paths"']
    assert problems([{"type": "probe_file_contains", "paths": ["a"], "expected": "(unclosed"}])[0].startswith(
        "criteria[0] (probe_file_contains).expected: '(unclosed' does not compile")
    assert problems([{"type": "bash_cmd_succeeds", "bash_cmd": ""}]) == [
        "criteria[0] (bash_cmd_succeeds).bash_cmd: must be a non-empty command string"]
    assert problems([{"type": "probe_dir_exists", "paths": []}]) == [
        "criteria[0] (probe_dir_exists).paths: must be a non-empty list of paths"]
    assert problems([{"paths": ["a"]}]) == ['criteria[0]: needs a "type"']
    with pytest.raises(ValueError):  # not an object at all: the field type refuses it
        run.step({"id": "v", "type": "verify_sandbox", "criteria": ["x"]})
    assert problems([{"type": "something_new"}]) == []  # skipped at run time, like the reference
    assert problems([{"type": "probe_dir_exists", "paths": ["a"], "weight": "heavy"}]) == [
        "criteria[0].weight: must be a number, not 'heavy'"]
    with pytest.raises(ValueError):
        run.step({"id": "v", "type": "verify_sandbox", "criteria": [], "score_aggregator": "median"})


def test_cannot_run_without_the_sandbox(run):
    step = run.step({"id": "v", "type": "verify_sandbox", "sandbox_name": "box",
                     "criteria": [{"type": "probe_dir_exists", "paths": ["."]}]})
    with pytest.raises(StepError, match="no sandbox named 'box'"):
        run.execute(step)
    assert "v" not in run.metadata["verifications"]


def test_a_sandbox_gone_under_the_run_is_an_error(deployed):
    asyncio.run(deployed.sandbox().terminate())
    with pytest.raises(StepError, match="is gone"):
        deployed.execute(deployed.step({"id": "v", "type": "verify_sandbox",
                                        "criteria": [{"type": "probe_dir_exists", "paths": ["."]}]}))


def test_agent_target_not_yet(deployed):
    with pytest.raises(StepError, match="agents"):
        deployed.execute(deployed.step({"id": "v", "type": "verify_sandbox", "agent_name": "coder",
                                        "criteria": [{"type": "probe_dir_exists", "paths": ["."]}]}))
