"""The verify_a2a_* steps against real agents over real A2A HTTP: the scripted agent passes what it can (and the
system-prompt probe says it needs a model), a bare agent and a scripted agent with a mangling config fail each
check with a row saying what is wrong; verdicts land in metadata.verifications and on the agent's record metadata.
One task runs them end to end through `agentenv run`."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from kits.agents import serving_agent
from kits.env_steps import Notebook, deployed_env
from kits.hub import cli, runs_json, show_json, write_bundle
from kits.servers import run as run_async
from kits.servers import serving_app
from pydantic import field_validator

from agentenv_local.agents.client import A2AClient
from agentenv_local.agents.scripted import ScriptedAgent, ScriptedConfig
from agentenv_local.errors import StepError
from agentenv_local.steps.agent_checks import AGENT_METADATA, NEEDS_MODEL


class ManglingConfig(ScriptedConfig):
    """An agent-config that takes name and role but keeps neither as given."""

    @field_validator("name", "role")
    @classmethod
    def mangle(cls, value: str | None) -> str | None:
        return None if value is None else value.upper() + "!"


class ManglingAgent(ScriptedAgent):
    config_model = ManglingConfig


def bare_agent_app():
    """An A2A agent with a thin card (no description, version, modes, skills, extensions) that answers every
    JSON-RPC method, unknown ones too, with a completed task."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def card(request: Request) -> JSONResponse:
        return JSONResponse({"name": "bare", "url": str(request.base_url).rstrip("/") + "/a2a",
                             "protocolVersion": "0.3", "capabilities": {}})

    async def rpc(request: Request) -> JSONResponse:
        body = await request.json()
        task = {"id": "t1", "contextId": "c1", "kind": "task",
                "status": {"state": "completed", "message": {"role": "agent", "messageId": "m1", "kind": "message",
                                                             "parts": [{"kind": "text", "text": "done"}]}}}
        return JSONResponse({"jsonrpc": "2.0", "id": body.get("id"), "result": task})

    return Starlette(routes=[Route("/.well-known/agent-card.json", card), Route("/a2a", rpc, methods=["POST"])])


def verdict(run, key: str) -> dict:
    return run.metadata["verifications"][key]


def failing(run, key: str) -> list[str]:
    return [r["justification"] for r in verdict(run, key)["results"] if not r["result"] and not r.get("skipped")]


def check(run, kind: str, **fields) -> dict:
    run.execute(run.step({"id": f"v-{kind}", "type": kind, "a2a_agent_id": "scripted", **fields}))
    return run.metadata["verifications"]


def deploy(run, url: str, **fields) -> None:
    run.execute(run.step({"id": "agent", "type": "deploy_agent", "a2a_agent_id": "scripted", "a2a_url": url,
                          **fields}))


def prompt(run, prompt_id: str, text: str = "go") -> None:
    run.execute(run.step({"id": f"p-{prompt_id}", "type": "prompt_agent", "prompt_id": prompt_id, "prompt": text}))


@contextlib.contextmanager
def notebook_and_agent(run, plan: list, agent_cls: type = ScriptedAgent):
    with deployed_env(run, "nb", {"notebook": Notebook()}), serving_agent(agent_cls(plan=plan)) as url:
        deploy(run, url, env_ids=["nb"])
        yield url


PLAN = [{"tool": "add_note", "args": {"text": "{input}"}, "save_as": "n"}, {"reply": "noted {n} ({input})"}]


def test_the_scripted_agent_passes_the_checks_it_can_and_the_verdicts_are_stamped(run):
    async def card_and_config(url: str) -> tuple[dict, dict]:
        async with A2AClient(url) as client:
            return await client.card(), await client.agent_config_get()

    with notebook_and_agent(run, PLAN) as url:
        prompt(run, "p1", "hello")
        name_before = run_async(card_and_config(url))[0]["name"]
        for kind in ("verify_a2a_agent_card", "verify_a2a_agent_config_identity", "verify_a2a_role",
                     "verify_a2a_agent_mcp", "verify_a2a_trajectory", "verify_a2a_skill_config",
                     "verify_a2a_peer_agents"):
            check(run, kind)
        check(run, "verify_a2a_core_protocol", prompt_id="p1")
        check(run, "verify_a2a_modalities", probes=[{"modality": "text", "prompt_id": "p1", "expected": "NOTED 1"}])
        card, config = run_async(card_and_config(url))
    keys = ("a2a_agent_card", "a2a_agent_config_identity", "a2a_role", "a2a_agent_mcp", "a2a_trajectory",
            "a2a_skill_config", "a2a_peer_agents", "a2a_core_protocol", "a2a_modalities")
    assert {k: verdict(run, k)["passed"] for k in keys} == dict.fromkeys(keys, True)
    assert verdict(run, "a2a_agent_mcp")["tools_invoked"] == 1
    assert verdict(run, "a2a_trajectory")["task_id"] == verdict(run, "a2a_agent_mcp")["task_id"]
    # the probes put identity and role back
    assert name_before == "default-agent" and card["name"] == name_before and config["role"] is None
    stamped = run.store.records.find(AGENT_METADATA, "scripted")["body"]
    assert stamped["validated_agent_card"]["passed"] is True
    assert stamped["agent_card"]["name"] == name_before
    assert stamped["validated_a2a_protocol"]["tasks/get"] == {"supported": True}
    assert stamped["validated_role_via_agent_config"]["passed"] is True
    extensions = stamped["validated_a2a_extensions"]
    for name in ("agent-config", "mcp-config", "trajectory", "skill-config", "peer-agents"):
        assert extensions[f"urn:agentenv:{name}/v1"]["supported"] is True, name
    assert stamped["validated_modalities"]["input"]["text"]["supported"] is True


def test_checks_that_the_scripted_agent_cannot_pass_say_why(run):
    with notebook_and_agent(run, [{"reply": "I only reply"}]):
        prompt(run, "p1")
        check(run, "verify_a2a_system_prompt", timeout_seconds=30, poll_interval_seconds=0.1)
        check(run, "verify_a2a_agent_mcp", timeout_seconds=30, poll_interval_seconds=0.1)
        check(run, "verify_a2a_install")
        check(run, "verify_a2a_modalities", probes=[{"modality": "image", "prompt_id": "p1", "expected": "a cat"},
                                                    {"modality": "audio", "prompt_id": "p9", "expected": "x"}])
        with pytest.raises(StepError, match="no verifier 'recall-judge' has run"):
            check(run, "verify_a2a_snapshot", rubric_verifier_id="recall-judge")
        run.metadata["verifications"]["recall-judge"] = {"results": [{"id": "recall", "score": 0, "result": False}]}
        check(run, "verify_a2a_snapshot", rubric_verifier_id="recall-judge")
    [why] = failing(run, "a2a_system_prompt")
    assert NEEDS_MODEL in why and "I only reply" in why
    assert failing(run, "a2a_agent_mcp") == ["0 tool call(s) in the task's trajectory"]
    assert failing(run, "a2a_install")[0].startswith("no agent named 'install-test-agent' was deployed")
    modalities = verdict(run, "a2a_modalities")
    assert modalities["input"]["image"]["reason"] == "no_ingestion_evidence"
    assert modalities["input"]["audio"]["reason"] == "probe_step_did_not_run"
    assert failing(run, "a2a_snapshot") == ["no snapshot_agent_state step saved one",
                                            "rubric 'recall-judge' criterion 'recall'"]
    stamped = run.store.records.find(AGENT_METADATA, "scripted")["body"]
    assert stamped["validated_system_prompt"]["passed"] is False
    assert stamped["validated_a2a_extensions"]["urn:agentenv:snapshot/v1"]["supported"] is False


def test_a_mangling_agent_config_fails_identity_role_and_system_prompt(run):
    with notebook_and_agent(run, [{"reply": "ok"}], ManglingAgent):
        check(run, "verify_a2a_agent_config_identity")
        check(run, "verify_a2a_role")
        check(run, "verify_a2a_system_prompt", timeout_seconds=30)
    [identity] = failing(run, "a2a_agent_config_identity")
    assert "the card shows 'IDENTITYNAME-" in identity
    [role] = failing(run, "a2a_role")
    assert role.startswith("set 'validator-role-") and "read back 'VALIDATOR-ROLE-" in role
    [system_prompt] = failing(run, "a2a_system_prompt")
    assert system_prompt.startswith("answered 'ok' (completed)") and NEEDS_MODEL in system_prompt


def test_a_bare_agent_fails_every_check_with_a_reason(run):
    with serving_app(bare_agent_app()) as url:
        deploy(run, url)
        prompt(run, "p1")
        for kind in ("verify_a2a_agent_card", "verify_a2a_agent_config_identity", "verify_a2a_role",
                     "verify_a2a_trajectory", "verify_a2a_skill_config", "verify_a2a_peer_agents",
                     "verify_a2a_system_prompt"):
            check(run, kind)
        check(run, "verify_a2a_core_protocol", prompt_id="p1")
        check(run, "verify_a2a_core_protocol", prompt_id="never-sent")
        run.metadata["verifications"]["recall-judge"] = {"results": [{"id": "recall", "score": 1, "result": True}]}
        check(run, "verify_a2a_snapshot", rubric_verifier_id="recall-judge")
    assert failing(run, "a2a_agent_card") == [f"{f} is missing or empty" for f in (
        "description", "version", "capabilities", "defaultInputModes", "defaultOutputModes", "skills")]
    for key, name in (("a2a_agent_config_identity", "agent-config"), ("a2a_role", "agent-config"),
                      ("a2a_trajectory", "trajectory"), ("a2a_skill_config", "skill-config"),
                      ("a2a_peer_agents", "peer-agents")):
        assert f"the card does not list urn:agentenv:{name}/v1" in failing(run, key), key
    assert failing(run, "a2a_system_prompt") == [
        "agent-config/v1 is not on the card or its set does not list system_prompt"]
    assert failing(run, "a2a_snapshot") == ["no deployed agent lists urn:agentenv:snapshot/v1",
                                            "no snapshot_agent_state step saved one"]
    # the last core-protocol run: no response for the prompt id, and the unknown method is answered, not refused
    assert failing(run, "a2a_core_protocol") == ["no prompt response 'never-sent': did its prompt_agent step run?",
                                                 "no task to read", "error code None"]


def test_an_agent_that_is_not_deployed_is_a_step_error(run):
    with pytest.raises(StepError, match="no agent deployed from 'scripted'") as info:
        check(run, "verify_a2a_agent_card")
    assert "deploy_agent" in (info.value.hint or "")


def test_the_checks_in_a_task_run(tmp_path: Path):
    project = tmp_path / "proj"
    project.mkdir()
    write_bundle(project, "b", {"t": [
        {"id": "agent", "type": "deploy_agent", "config": {"plan": [{"reply": "hi {input}"}]}},
        {"id": "p1", "type": "prompt_agent", "prompt_id": "p1", "prompt": "there"},
        {"id": "card", "type": "verify_a2a_agent_card", "a2a_agent_id": "scripted"},
        {"id": "core", "type": "verify_a2a_core_protocol", "a2a_agent_id": "scripted", "prompt_id": "p1"},
        {"id": "traj", "type": "verify_a2a_trajectory", "a2a_agent_id": "scripted"},
    ]})
    cli(project, "run", "./b", check=True)
    context = show_json(project, runs_json(project)[0]["run_id"])["context"]
    verifications = context["metadata"]["verifications"]
    assert [verifications[k]["passed"] for k in ("a2a_agent_card", "a2a_core_protocol", "a2a_trajectory")] == [
        True, True, True]
    assert verifications["a2a_trajectory"]["task_id"] == context["prompt_responses"][0]["a2a_task_id"]
