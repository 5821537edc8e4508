"""The deploy_env step on a hub's loop: its record in deployed_envs, artifact loading, teardown."""

from __future__ import annotations

from kits.data_plane import rpc
from kits.env_deploy import EXAMPLES, admin, on_hub, put_env


def test_deploy_env_step_loads_an_artifact_and_tears_down(session):
    from agentenv_local.artifacts import put_artifact
    from agentenv_local.steps.env import DeployEnvStep
    from agentenv_local.tasks.context import StepContext, new_state

    put_env(session.store, "echo", EXAMPLES / "echo", module="server.py:Echo", environment_name="echo")
    put_artifact(session.store, "greeting", {"hello.txt": b"hello world"})
    step = DeployEnvStep(id="env", env_id="echo", artifact_id="greeting", metadata={"purpose": "test"})
    state = new_state()
    ctx = StepContext(session.hub.services, "run-test", step, state)
    on_hub(session, step.execute(ctx))
    [record] = state["deployed_envs"]
    assert record["step_id"] == "env" and record["metadata"] == {"purpose": "test"}
    assert ctx.deployed_env("echo") is record
    exported = rpc(record["gateway_url"] + "/svc/mcp-echo/agentenv", "data/get", {}, headers=admin(session, record))
    assert {"file": "hello.txt", "size": 11} in exported["result"]["parts"][0]["data"]["loaded"], exported

    on_hub(session, step.execute(ctx))  # a retry replaces its instance
    first, second = state["deployed_envs"]
    assert first["torn_down"] is True and second["instance_id"] != first["instance_id"]
    on_hub(session, step.teardown(ctx))
    assert second["torn_down"] is True
    assert session.hub.envs.instances("running") == []


def test_deploy_env_step_notes_env_state_fields_it_cannot_honour():
    # The reference's external env state store has no local counterpart: the field is accepted (a reference
    # task validates) and the run notes it once, instead of ignoring it silently.
    from agentenv_local.steps.env import DeployEnvStep

    step = DeployEnvStep(id="env", env_id="x", env_state_type="local_postgres")
    assert step.config_problems() == []
    [note] = step.cloud_only_notes()
    assert "env_state_type" in note and "no local meaning" in note
