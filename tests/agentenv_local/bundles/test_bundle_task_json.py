"""Task JSON as bundles and `task create` read it: a DAG validated before anything runs.

Every problem is reported at once, each naming the step id and the field.
"""

from __future__ import annotations

import pytest

from agentenv_local.errors import ValidationError
from agentenv_local.tasks.model import load_task_file, parse_task

BOX = {"type": "deploy_sandbox", "sandbox_name": "box"}


def check(**fields) -> dict:
    return {"type": "verify_sandbox", "sandbox_name": "box",
            "criteria": [{"type": "probe_file_exists", "paths": ["x"]}], **fields}


def problems(data) -> list[str]:
    with pytest.raises(ValidationError) as info:
        parse_task(data, "t", source="tasks/t.json")
    assert info.value.message.startswith("tasks/t.json")
    return info.value.problems


def test_edges_default_to_every_earlier_step():
    task = parse_task([{"id": "a", **BOX}, {"id": "b", **check()},
                       {"id": "c", **check(depends_on=["a"])}, {"id": "d", **check(depends_on=[])}], "t")
    assert task.edges == {"a": [], "b": ["a"], "c": ["a"], "d": []}
    assert task.levels() == [["a", "d"], ["b", "c"]]


def test_object_form_and_task_step_id_dependencies():
    task = parse_task({"description": "desc", "steps": [
        {"id": "a", **BOX}, {"id": "b", **check(depends_on=[{"task_step_id": "a"}])}]}, "t")
    assert task.description == "desc" and task.edges["b"] == ["a"]


def test_cycle_forward_reference_self_and_unknown():
    found = problems([
        {"id": "a", **BOX, "depends_on": ["b"]},
        {"id": "b", **check(depends_on=["a"])},
        {"id": "c", **check(depends_on=["d"])},
        {"id": "d", **check(depends_on=[])},
        {"id": "e", **check(depends_on=["e", "ghost"])},
    ])
    assert found == [
        "step 'a': field 'depends_on': 'b' comes later in the task (cycle); list steps after the ones they depend on",
        ("step 'c': field 'depends_on': 'd' comes later in the task (forward reference); "
         "list steps after the ones they depend on"),
        "step 'e': field 'depends_on': a step cannot depend on itself (cycle)",
        "step 'e': field 'depends_on': 'ghost' is not a step of this task",
    ]


def test_implicit_dependency_makes_a_cycle():
    # 'b' has no depends_on, so it waits for every earlier step, 'a' included: a -> b -> a.
    assert "(cycle)" in problems([{"id": "a", **BOX, "depends_on": ["b"]}, {"id": "b", **check()}])[0]


def test_field_problems():
    found = problems([
        {"type": "deploy_sandbox"},
        {"id": "x"},
        "not an object",
        {"id": "u", "type": "no_such_type"},
        {"id": "m", "type": "verify_sandbox", "sandbox_name": "box"},
        {"id": "typo", **BOX, "fail_task_on_eror": False},
        {"id": "r", **BOX, "retry_config": {"max_retries": "many"}},
    ])
    assert "step #1: field 'id': missing or not a non-empty string" in found
    assert "step 'x': field 'type': missing" in found
    assert "step #3: must be an object, got str" in found
    unknown = next(p for p in found if p.startswith("step 'u'"))
    assert "'no_such_type' is not a known step type; known: " in unknown and "verify_sandbox" in unknown
    assert "step 'm' (verify_sandbox): field 'criteria': Field required" in found
    assert ("step 'typo' (deploy_sandbox): field 'fail_task_on_eror': unknown field (typo?); "
            "did you mean 'fail_task_on_error'?") in found
    assert any(p.startswith("step 'r' (deploy_sandbox): field 'retry_config.max_retries'") for p in found)


def test_graph_problems_are_reported_with_field_problems():
    found = problems([
        {"id": "a", **BOX, "depends_on": ["c"]},  # forward reference to a good step
        {"id": "b", "type": "verify_sandbox", "sandbox_name": "box"},  # broken: missing criteria
        {"id": "c", **check(depends_on=["b"])},  # depends on the broken step: not reported again
        {"id": "e", **BOX, "depends_on": []},
        {"id": "e", **BOX, "depends_on": []},
    ])
    assert found == [
        "step 'b' (verify_sandbox): field 'criteria': Field required",
        "step 'e': duplicate step id (ids must be unique in a task)",
        ("step 'a': field 'depends_on': 'c' comes later in the task (forward reference); "
         "list steps after the ones they depend on"),
    ]


def test_retry_anchor_must_be_an_ancestor():
    found = problems([
        {"id": "a", **BOX},
        {"id": "b", **BOX, "sandbox_name": "other", "depends_on": []},
        {"id": "c", **check(depends_on=["a"], retry_config={"go_to_step_id": "b"})},
    ])
    assert found == [("step 'c': field 'retry_config.retry_from_step_id': 'b' must be the step itself or one it "
                      "depends on")]
    ok = parse_task([{"id": "a", **BOX}, {"id": "c", **check(retry_config={"retry_from_step_id": "a"})}], "t")
    assert ok.step("c").retry_config.retry_from_step_id == "a"


def test_shape_problems():
    for data, want in (({"steps": 3}, "a task is a JSON list of steps, got int"),
                       ([], "the task has no steps"), ("x", "got str")):
        with pytest.raises(ValidationError) as info:
            parse_task(data, "t", source="f.json")
        assert want in info.value.message


def test_task_files(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('[\n  {"id": "a",\n   "type": }\n]\n')
    with pytest.raises(ValidationError) as info:
        load_task_file(bad)
    assert info.value.message == f"{bad}: not valid JSON (line 3, column 12: Expecting value)"
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"[\xff]")
    with pytest.raises(ValidationError) as info:
        load_task_file(binary)
    assert "not UTF-8 text" in info.value.message
    with pytest.raises(ValidationError) as info:
        load_task_file(tmp_path / "missing.json")
    assert info.value.message.endswith("missing.json: cannot read it: No such file or directory")
    good = tmp_path / "good.json"
    good.write_text('\ufeff[{"id": "a", "type": "deploy_sandbox", "sandbox_name": "s"}]', encoding="utf-8")
    assert load_task_file(good).id == "good"


def test_unknown_field_hints():
    found = problems([{"id": "a", **BOX, "zzzzzz": 1, "retry_config": {"max_retires": 2}}])
    assert any(p.startswith("step 'a' (deploy_sandbox): field 'zzzzzz': unknown field (typo?); fields: id, ")
               for p in found), found
    assert "step 'a' (deploy_sandbox): field 'retry_config.max_retires': unknown field (typo?)" in found
