"""The env release gate steps against a real gateway (HTTP, and MCP through the mcp client) in front of
tiny envs written here with our SDK: a good env passes every gate; a tool with a bad schema, a data plane that
loses data and a non-JSON assessment fail with a row naming what is wrong; the verdicts land on the env's
record metadata."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kits.env_steps import Notebook, deployed_env, example

from agentenv_local.env import add_data, environment_card, tool
from agentenv_local.steps import env_checks


@environment_card(name="leaky", description="Loses notes; one tool takes an untyped parameter.")
class Leaky(Notebook):
    @add_data
    def add(self, parts: list) -> None:  # loses all but the first note of a load
        for part in parts:
            self.notes.extend(part.data["notes"][:1])

    @tool()
    def tag(self, label: Any) -> str:  # no type, no description: not a portable schema
        """Tag the notebook."""
        return str(label)


GATES = ["verify_env_card", "verify_env_core_protocol", "verify_mcp_tool_schema", "verify_spec_conformance"]


def run_gates(run, env_id: str) -> dict:
    for i, kind in enumerate(GATES):
        run.execute(run.step({"id": f"g{i}", "type": kind, "env_id": env_id}))
    run.execute(run.step({"id": "gate", "type": "validation_gate_aggregator", "env_id": env_id,
                          "required_gates": ["environment_card", "env_core_protocol", "mcp_tool_schema",
                                             "spec_conformance"]}))
    return run.metadata["verifications"]


def failing(verifications: dict, gate: str) -> list[str]:
    return [r["justification"] for r in verifications[gate]["results"] if not r["result"]]


def test_a_good_env_passes_every_gate_and_keeps_its_data(run):
    env = Notebook()
    env.notes.extend(["a", "b", "c"])
    with deployed_env(run, "nb", {"notebook": env}):
        verifications = run_gates(run, "nb")
    for gate in ("environment_card", "env_core_protocol", "mcp_tool_schema", "spec_conformance"):
        assert verifications[gate]["passed"] is True, (gate, failing(verifications, gate))
        assert verifications[gate]["score"] == 1
    assert env.notes == ["a", "b", "c"]  # the round trip left the data as it was
    assert run.metadata["validation_gate"]["passed"] is True
    stamped = run.store.records.get("env_metadata", "nb@v1")["body"]
    assert stamped["validation_gate"]["passed"] is True
    assert set(stamped["gates"]) == {"environment_card", "env_core_protocol", "mcp_tool_schema", "spec_conformance"}


def test_examples_pass_the_schema_and_spec_gates(run):
    with deployed_env(run, "office", {"mail": example("mail"), "crm": example("crm")}):
        run.execute(run.step({"id": "s", "type": "verify_mcp_tool_schema", "env_id": "office"}))
        run.execute(run.step({"id": "c", "type": "verify_spec_conformance", "env_id": "office"}))
        run.execute(run.step({"id": "card", "type": "verify_env_card", "env_id": "office"}))
    v = run.metadata["verifications"]
    assert v["mcp_tool_schema"]["passed"], failing(v, "mcp_tool_schema")
    assert v["mcp_tool_schema"]["total_tools"] > 5
    assert v["spec_conformance"]["passed"], failing(v, "spec_conformance")
    assert v["environment_card"]["card"]["children"] == ["mail", "crm"]


def test_a_broken_env_fails_with_rows_naming_what_is_wrong(run):
    env = Leaky()
    env.notes.extend(["a", "b"])
    with deployed_env(run, "leaky", {"leaky": env}):
        verifications = run_gates(run, "leaky")
    schema = failing(verifications, "mcp_tool_schema")
    assert len(schema) == 1 and "property 'label' has no type" in schema[0]
    assert [r["tool"] for r in verifications["mcp_tool_schema"]["results"] if not r["result"]] == ["tag"]
    [lost] = failing(verifications, "env_core_protocol")
    assert "data lost or changed" in lost and "2 item(s) became 1" in lost
    assert verifications["environment_card"]["passed"] is True
    gate = run.metadata["validation_gate"]
    assert gate["passed"] is False and gate["failed_gates"] == ["env_core_protocol", "mcp_tool_schema"]
    assert run.store.records.get("env_metadata", "leaky@v1")["body"]["validation_gate"]["passed"] is False


def test_assessment_gate_from_the_agents_reply(run):
    with deployed_env(run, "nb", {"notebook": Notebook()}):
        good = {"results": [{"tool_name": "add_note", "passed": True, "error": "", "justification": "kept it"}]}
        run.state["prompt_responses"].append({"prompt_id": "assess", "response": json.dumps(good)})
        run.execute(run.step({"id": "a", "type": "verify_mcp_env_assessment", "env_id": "nb", "prompt_id": "assess"}))
        assert run.metadata["verifications"]["mcp_tool_correctness"]["passed"] is True
        bad = {"results": [{"tool_name": "add_note", "passed": False, "error": "dropped the write",
                            "justification": ""}]}
        run.state["prompt_responses"].append({"prompt_id": "assess", "response": json.dumps(bad)})
        run.execute(run.step({"id": "a", "type": "verify_mcp_env_assessment", "env_id": "nb", "prompt_id": "assess"}))
        assert failing(run.metadata["verifications"], "mcp_tool_correctness") == ["dropped the write"]
        run.state["prompt_responses"].append({"prompt_id": "assess", "response": "all tools work!"})
        run.execute(run.step({"id": "a", "type": "verify_mcp_env_assessment", "env_id": "nb", "prompt_id": "assess"}))
        [why] = failing(run.metadata["verifications"], "mcp_tool_correctness")
        assert why.startswith("invalid JSON")
        # the default required gates: the schema gate never ran, so it is missing
        run.execute(run.step({"id": "g", "type": "validation_gate_aggregator", "env_id": "nb"}))
    gate = run.metadata["validation_gate"]
    assert gate["missing_gates"] == ["mcp_tool_schema"] and gate["failed_gates"] == ["mcp_tool_correctness"]


@pytest.mark.parametrize(("schema", "problem"), [
    ({"type": "array"}, "root type"),
    ({"type": "object", "properties": {"x": {}}}, "'x' has no type"),
    ({"type": "object", "properties": {"x": {"type": "array"}}}, "without items"),
    ({"type": "object", "properties": {}, "required": ["y"]}, "not in properties"),
    ({"type": "object", "properties": {"x": {"anyOf": [{"type": ["a", "b"]}]}}}, "variant with a type array"),
])
def test_schema_problems(schema, problem):
    assert any(problem in p for p in env_checks.schema_problems(schema))


def test_portable_schemas_pass():
    schema = {"type": "object", "properties": {"x": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                                               "y": {"$ref": "#/$defs/Y"}},
              "required": ["y"], "$defs": {"Y": {"type": "integer"}}}
    assert env_checks.schema_problems(schema) == []
