"""snapshot/v1 on the scripted agent over real HTTP (a conversation saved by one agent goes on in another),
snapshot_agent_state saving a conversation into a stored file_artifact_universe, and, in real task runs, a later
deploy_agent restoring it (agent_snapshot_files_artifact_id) so the restored agent recalls what it was told, which
verify_a2a_snapshot then passes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kits.agents import serving_agent
from kits.hub import cli, runs_json, show_json
from kits.servers import run as run_async

from agentenv_local.agents import snapshot
from agentenv_local.agents.client import A2AClient
from agentenv_local.agents.scripted import ScriptedAgent
from agentenv_local.artifacts import read_files
from agentenv_local.errors import StepError, ValidationError

RECALL_PLAN = {"turns": [[{"reply": "noted"}], [{"reply": "you told me: {history.0.input}"}]]}


class NoSnapshotAgent(ScriptedAgent):
    """A scripted agent without snapshot/v1."""

    def card_extensions(self) -> list[dict]:
        return []

    def extra_routes(self) -> list:
        return []


async def ask(url: str, text: str, context_id: str | None = None):
    async with A2AClient(url) as client:
        return await client.prompt(text, context_id=context_id, timeout=30)


def test_the_scripted_agent_saves_a_conversation_and_another_one_goes_on_from_it():
    with serving_agent(ScriptedAgent(plan=RECALL_PLAN)) as first, \
            serving_agent(ScriptedAgent(plan=RECALL_PLAN)) as second:
        planted = run_async(ask(first, "the code is ZEBRA-42"))
        context_id = planted.raw["contextId"]
        objects = run_async(snapshot.save(first, context_id))
        assert set(objects) == {"trajectory"}
        state = json.loads(objects["trajectory"])
        assert state["turns"] == 1 and state["history"] == [{"input": "the code is ZEBRA-42", "reply": "noted"}]
        loaded = run_async(snapshot.load(second, objects, target_context_id="restored"))
        assert loaded == "restored"
        recalled = run_async(ask(second, "what was the code?", context_id="restored"))
        assert recalled.text == "you told me: the code is ZEBRA-42"
        assert run_async(snapshot.load(second, objects)) not in ("restored", "")  # a new context of its own
        with pytest.raises(snapshot.SnapshotError, match="HTTP 404: no conversation 'nope' on this agent"):
            run_async(snapshot.save(first, "nope"))
        with pytest.raises(snapshot.SnapshotError, match="not a agentenv-scripted-snapshot/1 snapshot"):
            run_async(snapshot.load(second, {"trajectory": b'{"format": "other"}'}))
        with pytest.raises(snapshot.SnapshotError, match="unknown snapshot object 'memory'"):
            run_async(snapshot.load(second, {"trajectory": objects["trajectory"], "memory": b"x"}))
        card = run_async(A2AClient(first).card())
    assert any(e["uri"] == "urn:agentenv:snapshot/v1" for e in card["capabilities"]["extensions"])


def test_snapshot_agent_state_stores_the_conversation(run):
    with serving_agent(ScriptedAgent(plan=RECALL_PLAN)) as url:
        run.execute(run.step({"id": "a", "type": "deploy_agent", "a2a_url": url}))
        run.execute(run.step({"id": "p", "type": "prompt_agent", "prompt_id": "plant", "prompt": "the code is Z"}))
        run.execute(run.step({"id": "s", "type": "snapshot_agent_state", "prompt_id": "plant",
                              "artifact_id": "solver-state"}))
        run.execute(run.step({"id": "s2", "type": "snapshot_agent_state"}))  # the latest prompt, a per-run id
    first, second = run.metadata["agent_snapshots"]
    context_id = run.state["prompt_responses"][0]["a2a_context_id"]
    assert first == {"id": "solver-state", "version": 1, "source_agent_name": "default-agent",
                     "source_context_id": context_id, "capture_step_id": "s"}
    assert second["id"] == f"{run.run_id}__s2-agent-state" and second["source_context_id"] == context_id
    doc = run.store.documents.find("artifacts", "solver-state", None)
    assert doc["body"]["type"] == "file_artifact_universe"
    files = read_files(run.store, doc)
    assert json.loads(files["trajectory"])["history"] == [{"input": "the code is Z", "reply": "noted"}]


def test_snapshot_agent_state_refusals(run):
    with serving_agent(NoSnapshotAgent(plan=RECALL_PLAN)) as url:
        run.execute(run.step({"id": "a", "type": "deploy_agent", "a2a_url": url}))
        run.execute(run.step({"id": "p", "type": "prompt_agent", "prompt_id": "plant", "prompt": "hi"}))
        run.execute(run.step({"id": "s", "type": "snapshot_agent_state"}))  # per-run capture: skipped
        assert "agent_snapshots" not in run.metadata
        with pytest.raises(StepError, match="agent 'default-agent' does not support snapshot/v1") as info:
            run.execute(run.step({"id": "s2", "type": "snapshot_agent_state", "artifact_id": "kept"}))
        assert "scripted agent" in (info.value.hint or "")
    assert run.store.documents.find("artifacts", "kept", None) is None
    with serving_agent(ScriptedAgent(plan=RECALL_PLAN)) as url:
        run.execute(run.step({"id": "b", "type": "deploy_agent", "agent_name": "other", "a2a_url": url}))
        with pytest.raises(StepError, match="agent 'other' has not been prompted in this run"):
            run.execute(run.step({"id": "s3", "type": "snapshot_agent_state", "agent_name": "other"}))
        with pytest.raises(StepError, match="no prompt response 'nope' in this run"):
            run.execute(run.step({"id": "s4", "type": "snapshot_agent_state", "agent_name": "other",
                                  "prompt_id": "nope"}))
    with pytest.raises(ValidationError) as bad:
        run.execute(run.step({"id": "s5", "type": "snapshot_agent_state", "env_id": "e",
                              "universe_artifact_id": "u"}))
    assert "per-service state capture" in bad.value.problems[0]


JUDGE_PLAN = [{"check": {"input": "data.response", "contains": "ZEBRA-42"}, "name": "recall"}, {"verdict": {}}]


def recall_task(load_into: str = "scripted") -> list[dict]:
    return [
        {"id": "solver", "type": "deploy_agent", "agent_name": "solver", "config": {"plan": RECALL_PLAN}},
        {"id": "plant", "type": "prompt_agent", "agent_name": "solver", "prompt_id": "plant",
         "prompt": "the code is ZEBRA-42"},
        {"id": "snap", "type": "snapshot_agent_state", "agent_name": "solver", "prompt_id": "plant",
         "artifact_id": "solver-state"},
        {"id": "restored", "type": "deploy_agent", "agent_name": "restored", "a2a_agent_id": load_into,
         "config": {"plan": RECALL_PLAN}, "agent_snapshot_files_artifact_id": "solver-state",
         "agent_snapshot_target_context_id": "restored-conversation"},
        {"id": "recall", "type": "prompt_agent", "agent_name": "restored", "prompt_id": "recall",
         "prompt": "what was the code?", "context_id": "restored-conversation"},
        {"id": "judge", "type": "deploy_agent", "agent_name": "judge", "config": {"plan": JUDGE_PLAN}},
        {"id": "grade", "type": "rubrics_verifier", "prompt_id": "recall", "verifier_id": "recall-judge",
         "criteria": [{"id": "recall", "criterion": "names the code ZEBRA-42"}],
         "use_agent_judge": True, "judge_agent_name": "judge"},
        {"id": "verdict", "type": "verify_a2a_snapshot", "a2a_agent_id": "scripted",
         "rubric_verifier_id": "recall-judge"},
    ]


def run_task(project: Path, name: str, steps: list[dict]):
    """`agentenv task create` + `agentenv task run`: the steps as a stored task (as the reference's validator builds
    one), so an artifact made by an earlier step of the run may be named by a later one."""
    path = project / f"{name}.json"
    path.write_text(json.dumps(steps))
    cli(project, "task", "create", str(path), "--id", name, check=True)
    return cli(project, "task", "run", "--id", name)


def test_a_snapshot_restored_by_deploy_agent_recalls_and_verify_a2a_snapshot_passes(tmp_path: Path):
    project = tmp_path / "proj"
    project.mkdir()
    out = run_task(project, "recall", recall_task())
    assert out.returncode == 0, out.stdout + out.stderr
    context = show_json(project, runs_json(project)[0]["run_id"])["context"]
    recalled = next(r for r in context["prompt_responses"] if r["prompt_id"] == "recall")
    assert recalled["response"] == "you told me: the code is ZEBRA-42"
    assert recalled["a2a_context_id"] == "restored-conversation"
    assert context["metadata"]["agent_loaded_snapshots"] == [
        {"agent_name": "restored", "id": "solver-state", "version": 1, "context_id": "restored-conversation"}]
    verdict = context["metadata"]["verifications"]["a2a_snapshot"]
    assert verdict["passed"] is True and verdict["save"] and verdict["load"] and verdict["recall"]


def test_deploy_agent_refuses_to_load_a_snapshot_it_cannot(tmp_path: Path):
    project = tmp_path / "proj"
    project.mkdir()
    no_snapshot = tmp_path / "nosnap.py"
    no_snapshot.write_text("from agentenv_local.agents.scripted import ScriptedAgent\n\n\n"
                           "class NoSnapshot(ScriptedAgent):\n    def card_extensions(self):\n        return []\n")
    out = run_task(project, "nosnap", recall_task(load_into=f"{no_snapshot}:NoSnapshot")[:5])
    assert out.returncode == 1
    assert ("cannot load snapshot 'solver-state': agent 'restored' does not support snapshot/v1"
            in out.stdout + out.stderr)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "notes.txt").write_text("x")
    cli(project, "artifact", "put", str(tmp_path / "notes"), "--id", "not-a-snapshot", check=True)
    out = run_task(project, "wrong", [
        {"id": "restored", "type": "deploy_agent", "agent_name": "restored", "config": {"plan": RECALL_PLAN},
         "agent_snapshot_files_artifact_id": "not-a-snapshot"}])
    assert out.returncode == 1
    assert "artifact 'not-a-snapshot' v1 is not an agent snapshot: unknown file(s) notes.txt" in out.stdout + out.stderr
