"""`agentenv env validate` through the real console script: an env folder is stored, deployed, gated and torn
down by a real run in the hub; a good env passes (exit 0), a broken one fails (exit 1) with the gate and the
fault named; and the gate steps run from a bundle's own task file under `agentenv run`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

BROKEN = '''
from typing import Any

from agentenv_local.env import DataPart, Env, add_data, environment_card, get_data, reset_data, tool


@environment_card(name="leaky", description="Loses what it is loaded with.")
class Leaky(Env):
    def __init__(self):
        self.items = []

    @tool()
    def put(self, item: Any) -> int:
        """Keep an item."""
        self.items.append(item)
        return len(self.items)

    @reset_data
    def reset(self):
        self.items.clear()

    @add_data
    def add(self, parts):
        for part in parts:
            self.items.extend(part.data["items"][:1])

    @get_data
    def export(self):
        return [DataPart(data={"items": list(self.items) or ["seed", "more"]})]
'''


def crm_folder(project) -> Path:
    dest = project.root / "crm"
    shutil.copytree(EXAMPLES / "office" / "envs" / "crm", dest)
    if (dest / "server.py").is_symlink():
        target = (EXAMPLES / "office" / "envs" / "crm" / "server.py").resolve()
        (dest / "server.py").unlink()
        shutil.copy(target, dest / "server.py")
    return dest


def test_a_good_env_folder_passes_and_is_torn_down(project):
    crm_folder(project)
    done = project.cli("env", "validate", "crm")
    assert "Stored crm as env crm v1." in done.stderr
    for gate in ("environment_card", "env_core_protocol", "mcp_tool_schema", "spec_conformance"):
        assert any(line.split()[:2] == [gate, "passed"] for line in done.stdout.splitlines()), done.stdout
    assert "validation gate: passed" in done.stdout
    assert project.json("env", "instances") == []  # the run's teardown removed the instance
    # the stored env by id, one gate, as JSON
    out = project.json("env", "validate", "crm", "--gate", "mcp_tool_schema")
    assert out["passed"] is True and out["validation_gate"]["required_gates"] == ["mcp_tool_schema"]
    assert [g["gate"] for g in out["gates"]] == ["mcp_tool_schema"]
    assert out["verifications"]["mcp_tool_schema"]["total_tools"] == 6


def test_a_broken_env_fails_naming_the_gate_and_the_fault(project):
    (project.root / "leaky").mkdir()
    project.write("leaky/env.toml", 'module = "server.py:Leaky"\n')
    project.write("leaky/server.py", BROKEN)
    done = project.cli("env", "validate", "leaky", code=1)
    lines = {line.split()[0]: line for line in done.stdout.splitlines() if line.split()}
    assert lines["mcp_tool_schema"].split()[1] == "failed" and "property 'item' has no type" in lines["mcp_tool_schema"]
    assert lines["env_core_protocol"].split()[1] == "failed" and "2 item(s) became 1" in lines["env_core_protocol"]
    assert lines["environment_card"].split()[1] == "passed"
    assert "validation gate: FAILED" in done.stdout
    out = project.json("env", "validate", "leaky", code=1)
    assert out["passed"] is False
    assert out["validation_gate"]["failed_gates"] == ["env_core_protocol", "mcp_tool_schema"]


def test_an_unknown_env_is_a_clear_error_and_writes_nothing(project):
    done = project.cli("env", "validate", "nope", code=1)
    assert "no env 'nope' in the store, and no folder of that name" in done.stderr
    assert "Hint:" in done.stderr
    assert project.stored()["documents"] == set() and project.stored()["runs"] == 0


def test_gate_steps_in_a_bundles_task(project):
    bundle = project.copy_hello("gated")
    shutil.rmtree(bundle / "tasks")
    (bundle / "tasks").mkdir()
    shutil.copytree(crm_folder(project), bundle / "envs" / "crm")
    steps = [
        {"id": "deploy", "type": "deploy_env", "env_id": "crm"},
        {"id": "schema", "type": "verify_mcp_tool_schema", "env_id": "crm"},
        {"id": "card", "type": "verify_env_card", "env_id": "crm"},
        {"id": "cli", "type": "build_mcp_cli", "env_id": "crm", "command_name": "crm", "depends_on": ["deploy"]},
        {"id": "gate", "type": "validation_gate_aggregator", "env_id": "crm",
         "required_gates": ["mcp_tool_schema", "environment_card"]},
    ]
    (bundle / "tasks" / "gate.json").write_text(json.dumps(steps))
    [run] = project.json("run", "./gated")
    assert run["status"] == "passed", run
    assert run["context"]["metadata"]["validation_gate"]["passed"] is True
    assert run["context"]["metadata"]["cli_artifact"]["command_name"] == "crm"


def test_the_correctness_gate_from_an_agents_assessment_in_a_run(project):
    bundle = project.copy_hello("assessed")
    shutil.rmtree(bundle / "tasks")
    (bundle / "tasks").mkdir()
    shutil.copytree(crm_folder(project), bundle / "envs" / "crm")
    verdict = ('{{"results": [{{"tool_name": "pipeline_summary", "passed": true, "error": "", '
               '"justification": "it answered"}}, {{"tool_name": "update_deal_stage", "passed": false, '
               '"error": "a closed deal reopened", "justification": ""}}]}}')
    steps = [
        {"id": "deploy", "type": "deploy_env", "env_id": "crm"},
        {"id": "tester", "type": "deploy_agent", "agent_name": "tester", "env_ids": ["crm"],
         "config": {"plan": [{"tool": "pipeline_summary", "args": {}, "save_as": "p"}, {"reply": verdict}]}},
        {"id": "assess", "type": "prompt_agent", "agent_name": "tester", "prompt_id": "assess",
         "prompt": "Check every tool; answer as JSON."},
        {"id": "correctness", "type": "verify_mcp_env_assessment", "env_id": "crm", "prompt_id": "assess"},
        {"id": "schema", "type": "verify_mcp_tool_schema", "env_id": "crm", "depends_on": ["deploy"]},
        {"id": "gate", "type": "validation_gate_aggregator", "env_id": "crm"},
    ]
    (bundle / "tasks" / "assess.json").write_text(json.dumps(steps))
    [run] = project.json("run", "./assessed", code=1)
    rows = run["verifications"]["mcp_tool_correctness"]["results"]
    assert [(r["tool"], r["result"]) for r in rows] == [("pipeline_summary", True), ("update_deal_stage", False)]
    assert rows[1]["justification"] == "a closed deal reopened"
    gate = run["context"]["metadata"]["validation_gate"]
    assert gate["required_gates"] == ["mcp_tool_schema", "mcp_tool_correctness"]
    assert gate["passed"] is False and gate["failed_gates"] == ["mcp_tool_correctness"]
