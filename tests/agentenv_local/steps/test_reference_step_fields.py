"""Every field the reference's step types take is a field of ours (issue 14 item 4), with the reference's types.

The field list comes from the installed reference at test time (reference_step_probe.py, run by .venv-ref's
interpreter): for each step type both have, a step setting one reference field at a time (a value of the field's
type) that the reference's own class accepts must validate with ours too. A field neither knows stays an error
naming it. The cloud-only ones are noted once in the run log (tests/agentenv_local/steps/
test_reference_step_field_runs.py runs the ones that matter locally).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from kits.reference_bundles import reference_package_dir
from kits.servers import REF_PYTHON

from agentenv_local.errors import ValidationError
from agentenv_local.tasks.model import parse_task, step_types

PROBE = Path(__file__).with_name("reference_step_probe.py")

# A step of each type that both accept with no optional field set (what the reference requires, and what ours
# needs to have something to do).
BASES: dict[str, dict[str, Any]] = {
    "prompt_agent": {"prompt": "hi", "user_agent_name": "user"},
    "load_artifact": {"artifacts": [{"id": "a"}], "sandbox_name": "box"},
    "rubrics_verifier": {"criteria": [{"criterion": "is right"}], "prompt_id": "p"},
    "agent_prompt_response_verifier": {"criteria": [{"type": "response_contains", "needles": ["x"]}]},
    "verify_sandbox": {"criteria": [{"type": "file_exists", "path": "/app/x"}]},
    "add_skills": {"skills": [{"name": "s", "description": "d", "body": "do it"}]},
    "peer_agents": {"peerings": [{"source_agent_name": "a", "peer_agent_names": ["b"]}]},
    "register_agent_triggers": {"triggers": [{"when": {"type": "step", "turn": 1}, "actions": [{"type": "end"}]}]},
    "verify_a2a_modalities": {"probes": [{"modality": "image", "prompt_id": "p", "expected": "a cat"}]},
    "collect_artifacts": {"sandbox_name": "box"},
    "snapshot_env": {"env_id": "e"},  # the reference may name an instance or gateway instead: none locally
    "aggregate_verifiers": {"verifier_ids": ["v"]},
    "deploy_human_agent": {"a2a_url": "http://127.0.0.1:9/"},
    "deploy_sandbox": {"sandbox_mode": "vm"},
    # the context must be an artifact here; the task container is a sandbox of its own, named apart
    "run_docker_container": {"docker_context_artifact_id": "ctx", "container_name": "task-container"},
}
# Where ours is stricter than the reference's constructor, on purpose (the reference fails such a step later).
STRICTER: dict[tuple[str, str], str] = {
    ("deploy_env", "artifact_version"): "artifact_version without artifact_id pins nothing",
    ("rubrics_verifier", "use_agent_judge"): "the reference deploys its judge agent from the catalog; a local run "
                                             "needs judge_agent_name, a judge agent the task deploys",
    # run_docker_container: what this machine does not grant, refused before the run (steps/docker_container.py)
    **{("run_docker_container", f): "not granted on this machine" for f in (
        "privileged", "devices", "cap_add", "volumes", "extra_networks", "network", "shm_size")},
    ("run_docker_container", "keep_alive_with_base_command"): "not supported yet; command_override does it",
    ("run_docker_container", "docker_context_url"): "cloud-only: the context must be an artifact",
}

# Values of the right type where the type alone does not make a valid one (an enum, a range, a shape).
BY_NAME: dict[str, Any] = {
    "score_aggregator": "all_pass", "gateway_mode": "performance", "action": "enable",
    "ttl_seconds": 3600, "disk_size_gb": 12.5, "cpu": 1.5, "memory_mb": 2048, "port": 8080, "exposed_ports": [8080],
    "trajectory_filter": {"include_tool_call_results": False, "include_thinking": True},
    "snapshot_config": {"interval_seconds": 30, "max_snapshots": 4},
    "urls": ["file:///tmp/data.csv", {"url": "http://127.0.0.1:9/x", "filename": "x.bin"}],
    "model_params": {"temperature": 0.2}, "user_output_format": {"type": "object"},
    "context_facts_for_judge": {"total": "42"}, "network_policy": {"mode": "allowlist", "allow_hosts": ["a.example"]},
    "skills": [{"name": "s", "description": "d", "body": "do it"}], "env_vars": {"A": "1"},
    "virtual_time": "2026-01-01T00:00:00Z", "executor_hours": {"mon": {"start": 9, "end": 17}},
    "criteria": None, "peerings": None, "triggers": None, "probes": None, "directives": None,  # from BASES
    "version": 2, "retry_config": {"max_retries": 2}, "depends_on": [], "tools": ["read"],
    "sandbox_name": "box", "container_name": "box", "user_agent_name": "user", "sandbox_mode": "vm",
    "artifacts": [{"id": "b"}],
}
BY_TYPE_NAME: dict[tuple[str, str], Any] = {
    ("rubrics_verifier", "output_format"): "rubric_evidence",
    ("prompt_agent", "output_format"): {"type": "object", "properties": {"answer": {"type": "string"}}},
    ("prompt_agent", "max_conversation_turns"): 3,
    ("collect_artifacts", "agent_name"): None,  # another target than the base's sandbox: one per step
    ("collect_artifacts", "env_id"): None,
    ("load_artifact", "env_id"): None,  # with a sandbox target: both refuse two targets
    ("load_artifact", "agent_name"): None,
    ("load_artifact", "artifact_id"): None,  # the base names artifacts (tests/.../test_step_load_artifact.py: id)
    ("load_artifact", "artifact_version"): None,
}


def _value(step_type: str, name: str, annotation: str) -> Any:
    if (step_type, name) in BY_TYPE_NAME:
        return BY_TYPE_NAME[(step_type, name)]
    if name in BY_NAME:
        return BY_NAME[name]
    bare = annotation.removeprefix("Optional[").removesuffix("]") if annotation.startswith("Optional[") else annotation
    if bare == "bool":
        return True
    if bare == "int":
        return 7
    if bare == "float":
        return 2.5
    if bare.startswith("list[int"):
        return [1]
    if bare.startswith("list"):
        return ["x"]
    if bare.startswith("dict"):
        return {"k": "v"}
    return "x"


def _probe(command: dict) -> Any:
    done = subprocess.run([str(REF_PYTHON), str(PROBE)], input=json.dumps(command), capture_output=True, text=True,
                          timeout=120, check=True)
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def reference_fields() -> dict[str, dict[str, dict]]:
    if reference_package_dir() is None:
        pytest.skip("the reference (agentenv-framework) is not installed in .venv-ref: run scripts/setup.sh --test")
    return _probe({"do": "fields"})


def _cases(reference_fields: dict) -> list[tuple[str, str, dict]]:
    """(step type, field, step dict) for every reference field of every type both have."""
    ours = step_types(None)
    cases = []
    for step_type, fields in sorted(reference_fields.items()):
        if step_type not in ours:
            continue
        base = {"id": "s", "type": step_type, **BASES.get(step_type, {})}
        for name, spec in fields.items():
            if spec["required"] and name not in ("id", "version"):
                base.setdefault(name, _value(step_type, name, spec["annotation"]))
        for name, spec in fields.items():
            if name in ("id",) or name in BASES.get(step_type, {}):
                continue
            value = _value(step_type, name, spec["annotation"])
            if value is None:
                continue
            cases.append((step_type, name, {**base, name: value}))
    return cases


def test_every_reference_field_of_a_shared_step_type_validates_with_ours(reference_fields):
    cases = _cases(reference_fields)
    verdicts = _probe({"do": "accepts", "cases": [c for _, _, c in cases]})
    refused_by_ours = []
    checked = 0
    for (step_type, name, case), refused_by_reference in zip(cases, verdicts):
        if refused_by_reference or (step_type, name) in STRICTER:  # says nothing about the field's type
            continue
        checked += 1
        try:
            parse_task([case], "t")
        except ValidationError as exc:
            refused_by_ours.append(f"{step_type}.{name}={case[name]!r}: {exc.problems}")
    assert not refused_by_ours, "\n".join(refused_by_ours)
    shared = [t for t in reference_fields if t in step_types(None)]
    assert len(shared) >= 40 and checked >= 250, (len(shared), checked)


def test_the_reference_float_disk_size_and_dict_facts_keep_their_values(reference_fields):
    task = parse_task([{"id": "box", "type": "deploy_sandbox", "sandbox_name": "box", "sandbox_mode": "vm",
                        "disk_size_gb": 12.5},
                       {"id": "grade", "type": "rubrics_verifier", "prompt_id": "p", "criteria": [{"criterion": "c"}],
                        "context_facts_for_judge": {"total": "42"}, "output_format": "rubric_evidence_with_mistakes"}],
                      "t")
    assert task.step("box").disk_size_gb == 12.5
    grade = task.step("grade")
    assert grade.context_facts_for_judge == {"total": "42"} and grade._facts() == ["total: 42"]
    assert grade.output_format == "rubric_evidence_with_mistakes"


def test_a_field_neither_knows_is_still_an_error_naming_it(reference_fields):
    assert "max_turnz" not in reference_fields["prompt_agent"]
    with pytest.raises(ValidationError) as err:
        parse_task([{"id": "ask", "type": "prompt_agent", "prompt": "hi", "max_turnz": 3}], "t")
    assert any("max_turnz" in p for p in err.value.problems), err.value.problems


@pytest.mark.parametrize("step, problem", [
    ({"type": "prompt_agent", "prompt": "hi", "model_params": {"api_key": "k"}}, "model_params: may not set api_key"),
    ({"type": "prompt_agent", "prompt": "hi", "user_model": "m"}, "user_model, user_output_format"),
    ({"type": "load_artifact", "urls": [{"url": "file:///x", "filename": "../x"}]}, "must be a plain file name"),
    ({"type": "load_artifact", "urls": ["file:///x"], "env_id": "e"}, "urls, env_id"),
    ({"type": "load_artifact", "artifact_from_step_id": "c", "artifact_id": "a"}, "give one source"),
    ({"type": "rubrics_verifier", "prompt_id": "p", "criteria": [{"criterion": "c"}],
      "trajectory_filter": {"evidence_exclude_pattern": "("}}, "evidence_exclude_pattern"),
])
def test_bad_values_of_the_new_fields_are_refused_naming_the_field(step, problem):
    with pytest.raises(ValidationError) as err:
        parse_task([{"id": "s", **step}], "t")
    assert any(problem in p for p in err.value.problems), err.value.problems
