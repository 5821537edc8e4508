"""reset_env, modify_env_tool_access, sync_env_clock, register_env_triggers and apply_server_config against a
real gateway (served over HTTP) in front of the in-process mail and crm example envs."""

from __future__ import annotations

import time

import pytest
from kits.data_plane import rpc
from kits.env_steps import data_of, deployed_env, example, http, seed, step_call_tool

from agentenv_local.env import Env, environment_card, extension, tool
from agentenv_local.errors import StepError


@pytest.fixture
def office(run):
    """mail + crm behind one gateway, both seeded; the run's deployed_envs points at it."""
    with deployed_env(run, "office", {"mail": example("mail"), "crm": example("crm")}) as (base, gw):
        rpc(base, "data/add", {"parts": [{"kind": "data", "data": seed("mail")}]}, child="mail")
        rpc(base, "data/add", {"parts": [{"kind": "data", "data": seed("crm")}]}, child="crm")
        yield run, base, gw


def step(run, **fields):
    return run.step({"id": fields.pop("id", "s"), **fields})


def test_unknown_env_lists_the_deployed_ones(office):
    run, _, _ = office
    with pytest.raises(StepError, match=r"env 'nope' is not deployed in this run \(deployed: office\)"):
        run.execute(step(run, type="reset_env", env_id="nope"))


def test_reset_env_empties_every_service_and_skips_those_without_reset(run):
    @environment_card(name="plain")
    class Plain(Env):
        @tool()
        def ping(self) -> str:
            """Answer pong."""
            return "pong"

    with deployed_env(run, "mixed", {"crm": example("crm"), "plain": Plain()}) as (base, _):
        rpc(base, "data/add", {"parts": [{"kind": "data", "data": seed("crm")}]}, child="crm")
        assert data_of(base, "crm")["accounts"]
        run.execute(step(run, type="reset_env", env_id="mixed"))
        assert data_of(base, "crm") == {"accounts": [], "contacts": [], "deals": [], "activities": []}
    assert run.metadata["env_resets"] == [{"env_id": "mixed", "step_id": "s", "reset": ["crm"], "skipped": ["plain"]}]


def test_modify_env_tool_access_disables_and_enables(office):
    run, base, _ = office
    run.execute(step(run, type="modify_env_tool_access", env_id="office", action="disable", role="agent",
                     tools=["send_email"]))
    refused = step_call_tool(base, "send_email", {"to": ["a@x.example"], "subject": "s", "body": "b"}, role="agent")
    assert refused == {"error": "Tool 'send_email' is disabled for role 'agent'"}
    with http(base) as h:
        assert h.get("/state").json()["roles"]["agent"] == {"disabled": ["send_email"], "allowed": []}
    run.execute(step(run, id="s2", type="modify_env_tool_access", env_id="office", action="enable", role="agent",
                     tools="*"))
    changes = run.metadata["tool_access_changes"]
    assert [(c["action"], c["role"], c["tools"]) for c in changes] == [
        ("disable", "agent", ["send_email"]), ("enable", "agent", "*")]
    assert changes[0]["result"] == {"role": "agent", "disabled": ["send_email"], "allowed": []}


def test_modify_env_tool_access_config_problems(run):
    def problems(**kw):
        return step(run, type="modify_env_tool_access", env_id="e", action="disable", role="r", **kw).config_problems()

    assert problems(tools="*") == [] and problems(tools=["a"]) == []
    assert problems(tools="echo") == ["tools: a list of tool names or \"*\", not 'echo'"]
    assert problems(tools=[]) == ["tools: name at least one tool (or \"*\" for every tool)"]
    with pytest.raises(ValueError):
        step(run, type="modify_env_tool_access", env_id="e", action="hide", role="r", tools="*")


@environment_card(name="synced")
class Synced(Env):
    """A server with its own clock/v1 extension: it records the URL it was told to read time from."""

    def __init__(self):
        self.synced_to = None

    @tool()
    def noop(self) -> str:
        """Nothing."""
        return "ok"

    @extension("urn:agentenv:clock/v1", op="sync_time", method="POST")
    def sync_time(self, env_get_time_url: str) -> dict:
        self.synced_to = env_get_time_url
        return {"ok": True}


def test_sync_env_clock_arms_the_gateway_and_syncs_servers_that_advertise_it(run):
    synced = Synced()
    with deployed_env(run, "clocked", {"synced": synced, "crm": example("crm")}) as (base, _):
        run.execute(step(run, type="sync_env_clock", env_id="clocked", virtual_time="2025-03-10T09:00:00Z",
                         mode="frozen"))
        with http(base) as h:
            assert h.get("/clock/time").json() == {"virtual_time": "2025-03-10T09:00:00Z"}
        assert synced.synced_to == base + "/clock/time"
        [config] = run.metadata["clock_configurations"]
        assert config["synced_services"] == ["synced"] and config["skipped_services"] == ["crm"]
        assert config["t0"] == "2025-03-10T09:00:00Z" and config["mode"] == "frozen"
        with pytest.raises(StepError, match="crm of env 'clocked' do not advertise urn:agentenv:clock/v1"):
            run.execute(step(run, id="strict", type="sync_env_clock", env_id="clocked",
                             virtual_time="2025-03-10T09:00:00Z", tolerate_missing_sync_time=False))


def test_sync_env_clock_checks_and_surfaces_gateway_refusals(office):
    run, _, _ = office
    bad = step(run, type="sync_env_clock", env_id="office", virtual_time="2025-03-10")
    assert bad.config_problems() == ["virtual_time: '2025-03-10' is not RFC3339 (YYYY-MM-DDThh:mm:ss[.fff](Z|+hh:mm))"]
    # past the config check (the runner's), the gateway's own 400 message comes through
    with pytest.raises(StepError, match=r"-> 400\): invalid RFC3339 virtual_time '2025-03-10'"):
        __import__("asyncio").run(bad.execute(run.ctx(bad)))
    assert step(run, type="sync_env_clock", env_id="o", virtual_time="2025-03-10T09:00:00Z",
                step_seconds=5).config_problems() == ["step_seconds: only goes with mode \"stepped\""]


MIRROR = {"id": "mirror", "when": {"type": "action", "tool": "search_emails"},
          "actions": [{"type": "tool", "tool": "find_account", "args": {"name": "acme"}}]}


def test_register_env_triggers_and_await_fired(office):
    run, base, _ = office
    s = step(run, type="register_env_triggers", env_id="office", triggers=[MIRROR], watch_roles=["agent"],
             await_fired=["mirror"], await_timeout_seconds=20)
    import threading

    calling = threading.Event()

    def provoke():
        time.sleep(0.5)
        calling.set()
        step_call_tool(base, "search_emails", {"query": "pipeline"}, role="agent")

    threading.Thread(target=provoke, daemon=True).start()
    run.execute(s)
    assert calling.is_set()  # the step returned only after the call that fires the trigger was made
    assert run.metadata["registered_env_triggers"] == {"office": ["mirror"]}
    assert run.metadata["awaited_env_triggers"] == {"s": {"mirror": "fired"}}
    with http(base) as h:
        [trigger] = h.get("/triggers/state").json()["triggers"]
    assert trigger["status"] == "fired"


def test_await_fired_timing_out_names_the_trigger(office):
    run, _, _ = office
    with pytest.raises(StepError, match=r"trigger\(s\) 'mirror' on env 'office' did not fire within 0.6s "
                                        r"\(status: mirror=armed\)"):
        run.execute(step(run, type="register_env_triggers", env_id="office", triggers=[MIRROR],
                         await_fired=["mirror"], await_timeout_seconds=0.6))


def test_register_env_triggers_surfaces_the_gateways_400(office):
    run, _, _ = office
    bad = {"id": "x", "when": {"type": "nope"}, "actions": []}
    with pytest.raises(StepError, match=r"registering triggers on env 'office' failed \(POST /triggers/register "
                                        r"-> 400\): trigger 'x': when.type must be"):
        run.execute(step(run, type="register_env_triggers", env_id="office", triggers=[bad]))


def test_register_env_triggers_config_and_not_yet(office):
    run, _, _ = office
    assert step(run, type="register_env_triggers", env_id="o", triggers=[MIRROR],
                await_fired=["other"]).config_problems() == ["await_fired: 'other' not among this step's trigger ids"]
    assert step(run, type="register_env_triggers", env_id="o", triggers=[]).config_problems() == [
        "triggers: list at least one trigger"]
    with pytest.raises(StepError, match="no agent named 'boss' is deployed in this run"):
        run.execute(step(run, type="register_env_triggers", env_id="office", triggers=[MIRROR],
                         executor_agent_name="boss"))
    s = step(run, type="register_env_triggers", env_id="o", triggers=[MIRROR],
             executor={"a2a_url": "http://127.0.0.1:9"}, executor_hours={"boss": {"start": "09:00", "end": "17:00"}})
    assert s.body()["executor"] == {"a2a_url": "http://127.0.0.1:9", "timeout_seconds": 120,
                                    "hours": {"start": "09:00", "end": "17:00"}}


def test_apply_server_config_calls_the_advertised_extension(office):
    run, base, _ = office
    run.execute(step(run, type="apply_server_config", env_id="office", directives=[
        {"service": "crm", "uri": "urn:agentenv:set-errors/v1",
         "args": {"tool_name": "find_account", "error_rate": 1.0, "error_type": "unavailable"}}]))
    failed = step_call_tool(base, "find_account", {"name": "acme"})
    assert failed["isError"] is True and "injected fault" in failed["content"][0]["text"]
    applied = run.metadata["server_configs"]["s"]["applied"]
    assert [(a["service"], a["uri"]) for a in applied] == [("crm", "urn:agentenv:set-errors/v1")]
    # broadcast: every service that advertises it (mail does not; crm does)
    run.execute(step(run, id="clear", type="apply_server_config", env_id="office", directives=[
        {"service": "environment", "uri": "urn:agentenv:set-errors/v1",
         "args": {"tool_name": "find_account", "error_rate": 0}}]))
    assert step_call_tool(base, "find_account", {"name": "acme"})["isError"] is False


def test_apply_server_config_failures(office):
    run, _, _ = office
    with pytest.raises(StepError, match=r"has no service 'billing' \(its services: mail, crm\)"):
        run.execute(step(run, type="apply_server_config", env_id="office",
                         directives=[{"service": "billing", "uri": "urn:x", "args": {}}]))
    with pytest.raises(StepError, match="env 'office' child 'mail' does not advertise urn:agentenv:set-errors/v1"):
        run.execute(step(run, type="apply_server_config", env_id="office",
                         directives=[{"service": "mail", "uri": "urn:agentenv:set-errors/v1", "args": {}}]))
    run.execute(step(run, id="tolerant", type="apply_server_config", env_id="office", tolerate_unadvertised=True,
                     directives=[{"service": "mail", "uri": "urn:agentenv:set-errors/v1", "args": {}}]))
    assert run.metadata["server_configs"]["tolerant"]["skipped"] == [
        {"service": "mail", "uri": "urn:agentenv:set-errors/v1"}]
    # the env's own refusal (a bad body) comes back with its message
    with pytest.raises(StepError, match=r"urn:agentenv:set-errors/v1 on env 'office' child 'crm' failed"):
        run.execute(step(run, id="bad", type="apply_server_config", env_id="office", directives=[
            {"service": "crm", "uri": "urn:agentenv:set-errors/v1", "args": {"error_rate": "lots"}}]))
    assert step(run, type="apply_server_config", env_id="o", directives=[]).config_problems() == [
        "directives: list at least one {service, uri, args}"]
