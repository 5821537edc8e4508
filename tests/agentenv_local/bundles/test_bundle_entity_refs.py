"""Every step field that names a bundle entity resolves to the bundle's own entity: the fields each step type
declares match the reference's `entity_refs` (read live from the installed reference), list and nested places
resolve, and a deploy_env whose artifact_id is the bundle's own artifact runs and loads it (real `agentenv`
subprocesses, a real env through the gateway)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from kits.hub import cli
from kits.servers import REF_PYTHON

from agentenv_local.bundles import load_bundle
from agentenv_local.tasks.entity_refs import declared_paths
from agentenv_local.tasks.model import step_types

SUPPORT = Path(__file__).resolve().parents[3] / "examples" / "support"

# The reference's paths that our loader resolves by a form of its own (bundles/loader.py): load_artifact's
# `artifacts` list (bare names or {"id"}) and a `skills` list (skill names, {"id"} or {"skill_artifact_id"}).
RESOLVED_BY_SHAPE = {"artifacts[].id", "skills[].skill_artifact_id"}
# Left undeclared on purpose (steps/agent.py says why): a snapshot the same task saves, not yet stored before it.
NOT_DECLARED = {("deploy_agent", "agent_snapshot_files_artifact_id")}

DUMP_REFS = """
import json
from agent_env.task_step.registry import get_task_step_registry
reg = get_task_step_registry()
print(json.dumps({name: [(r.path, r.kind.value, r.role.value) for r in (reg[name].entity_refs or ())]
                  for name in reg}))
"""


def _reference_refs() -> dict[str, list[list[str]]]:
    if not REF_PYTHON.is_file():
        pytest.skip("the reference (agentenv-framework) is not installed in .venv-ref: run scripts/setup.sh --test")
    done = subprocess.run([str(REF_PYTHON), "-c", DUMP_REFS], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_every_entity_field_the_reference_declares_is_declared_here():
    ours = step_types(None)
    missing = []
    checked = 0
    for step_type, refs in _reference_refs().items():
        cls = ours.get(step_type)
        if cls is None:  # a step type we do not have: nothing to resolve
            continue
        for path, kind, role in refs:
            if path in RESOLVED_BY_SHAPE or (step_type, path) in NOT_DECLARED:
                continue
            checked += 1
            # An output names what the step writes, which a later step of the task may read.
            declared = declared_paths(cls, kind if role == "input" else f"output_{kind}")
            if path not in declared and path.removesuffix("[]") not in declared:  # env_ids means env_ids[]
                missing.append(f"{step_type}: {role} {kind} {path}")
    assert not missing, missing
    assert checked >= 40  # the check saw the reference's declarations, not an empty registry


def _bundle(root: Path, steps: list[dict]) -> Path:
    (root / "tasks").mkdir(parents=True)
    (root / "tasks" / "t.json").write_text(json.dumps(steps))
    for name in ("cli-tool", "notes"):
        (root / "artifacts" / name).mkdir(parents=True)
        (root / "artifacts" / name / "x.txt").write_text(name)
    shutil.copytree(SUPPORT / "envs" / "mail", root / "envs" / "mail")
    return root


def test_list_and_nested_fields_resolve_to_the_bundles_entities(tmp_path):
    root = _bundle(tmp_path / "b", [
        {"id": "env", "type": "deploy_env", "env_id": "mail", "artifact_id": "notes"},
        {"id": "agent", "type": "deploy_agent", "agent_name": "a", "env_ids": ["mail"]},
        {"id": "skills", "type": "add_skills", "agent_name": "a", "cli_artifact_ids": ["cli-tool", "@local/x/y"],
         "file_artifact_universe_ids": ["notes"], "skills": [{"name": "s", "description": "d", "body": "x"}]},
        {"id": "triggers", "type": "register_agent_triggers", "agent_name": "a", "triggers": [
            {"when": {"type": "env_trigger", "env_id": "mail", "trigger_id": "t1"}, "actions": [{"type": "end"}]},
            {"when": {"type": "any", "of": [{"type": "env_trigger", "env_id": "mail", "trigger_id": "t2"}]},
             "actions": [{"type": "end"}]}]},
        {"id": "snap", "type": "snapshot_agent_state", "agent_name": "a", "env_id": "mail"},
        {"id": "down", "type": "teardown_sandboxes", "env_ids": ["mail"]},
    ])
    bundle = load_bundle(root)
    env, notes, tool = bundle.envs["mail"].id, bundle.artifacts["notes"].id, bundle.artifacts["cli-tool"].id
    steps = {s["id"]: s for s in bundle.tasks["t"].steps}
    assert steps["env"]["env_id"] == env and steps["env"]["artifact_id"] == notes  # the bug this fixes
    assert steps["agent"]["env_ids"] == [env]
    assert steps["skills"]["cli_artifact_ids"] == [tool, "@local/x/y"]  # a store id is left as written
    assert steps["skills"]["file_artifact_universe_ids"] == [notes]
    whens = [t["when"] for t in steps["triggers"]["triggers"]]
    assert whens[0]["env_id"] == env and whens[1]["of"][0]["env_id"] == env
    assert steps["snap"]["env_id"] == env and steps["down"]["env_ids"] == [env]
    raw = json.loads((root / "tasks" / "t.json").read_text())
    assert raw[2]["cli_artifact_ids"][0] == "cli-tool"  # the file's own data is never rewritten


VERIFY = '''
import json
from mcp import Client


async def verify(mcp_url, run):
    async with Client(mcp_url) as client:
        result = await client.call_tool("read_email", {"email_id": "e-02"})
    email = result.structured_content or json.loads(result.content[0].text)
    email = email.get("result", email)
    return [{"id": "seeded", "result": "maria" in str(email.get("from", "")).lower(),
             "description": "deploy_env loaded the bundle's mail seed"}]
'''


def test_deploy_env_loads_the_bundles_own_artifact(tmp_path):
    root = tmp_path / "seeded"
    (root / "tasks").mkdir(parents=True)
    shutil.copytree(SUPPORT / "envs" / "mail", root / "envs" / "mail")
    shutil.copytree(SUPPORT / "artifacts" / "mail-seed", root / "artifacts" / "mail-seed")
    (root / "artifacts" / "check").mkdir()
    (root / "artifacts" / "check" / "verify.py").write_text(VERIFY)
    (root / "tasks" / "t.json").write_text(json.dumps([
        {"id": "env", "type": "deploy_env", "env_id": "mail", "artifact_id": "mail-seed"},
        {"id": "check", "type": "env_outcome_verifier", "env_id": "mail", "file_artifact_id": "check"},
    ]))
    done = cli(tmp_path, "run", "./seeded", "--json", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    [run] = json.loads(done.stdout)
    assert run["status"] == "passed", run
    assert run["context"]["metadata"]["verifications"]["check"]["score"] == 1
    task = json.loads(cli(tmp_path, "task", "get", "--id", run["task_id"], check=True).stdout)
    [deploy] = [s for s in task if s["id"] == "env"]  # the stored steps
    assert deploy["artifact_id"].endswith("/seeded/mail-seed") and deploy["artifact_version"] == 1  # pinned
