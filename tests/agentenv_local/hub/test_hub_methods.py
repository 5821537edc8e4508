"""The hub's own wire methods: one explicit list (wire.HUB_METHODS) that the hub enforces, and one
typed client surface (HubMethods) that sends each exactly as the callers always did."""

from __future__ import annotations

from typing import Any

import pytest
from kits.hub import bash_check, deploy

from agentenv_local.errors import HubError, NotFoundError
from agentenv_local.hub import HubMethods, wire
from agentenv_local.hub.session import Session
from agentenv_local.tasks.options import RunOptions


class _Recorder(Session):
    """A session that keeps what would go on the wire instead of sending it."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, list, dict]] = []

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        self.sent.append((method, list(args), kwargs))
        return [] if method.endswith(".instances") else {}


def _every_call(hub: HubMethods) -> None:
    options = RunOptions(sandbox="process")
    hub.submit_run("t", 2, {"x": 1}, "g", options, attach=True)
    hub.resume_run("r1")
    hub.resume_run("r1", attach=True)
    hub.cancel_run("r1")
    hub.review("rv", "abort")
    hub.attach(["r1", "r2"])
    hub.deploy_env("e", 3, gateway_mode="mcp", resume=None, control_plane_auth=False)
    hub.env_instances(status="running")
    hub.teardown_env("i1")
    hub.env_admin_token("i1")
    hub.bind_env_role("i1", "admin")
    hub.advance_env_clock("i1", 60)
    hub.deploy_agent("scripted", None, runtime="subprocess", config={"a": 1})
    hub.agent_instances(status=None)
    hub.teardown_agent("a1")


def test_each_typed_method_sends_the_request_its_callers_always_sent():
    session = _Recorder()
    _every_call(HubMethods(session))
    options = RunOptions(sandbox="process")
    assert session.sent == [
        ("runner.submit", [], {"task_id": "t", "version": 2, "seed": {"x": 1}, "group_id": "g",
                               "options": options, "attach": True}),
        ("runner.resume", [], {"run_id": "r1"}),
        ("runner.resume", [], {"run_id": "r1", "attach": True}),
        ("runner.cancel", [], {"run_id": "r1"}),
        ("runner.review", [], {"review_id": "rv", "decision": "abort"}),
        ("runner.attach", [], {"run_ids": ["r1", "r2"]}),
        ("envs.deploy", [], {"env_id": "e", "version": 3, "gateway_mode": "mcp", "resume": None,
                             "control_plane_auth": False}),
        ("envs.instances", [], {"status": "running"}),
        ("envs.teardown", ["i1"], {}),
        ("envs.admin_token", ["i1"], {}),
        ("envs.bind_role", ["i1", "admin"], {}),
        ("envs.advance_clock", [], {"instance_id": "i1", "seconds": 60}),
        ("agents.deploy", [], {"agent_id": "scripted", "version": None, "runtime": "subprocess",
                               "config": {"a": 1}}),
        ("agents.instances", [], {"status": None}),
        ("agents.teardown", ["a1"], {}),
    ]


def test_the_typed_surface_covers_the_list_and_the_hub_answers_exactly_the_list(hub_and_client):
    hub, _ = hub_and_client
    listed = {f"{ns}.{name}" for ns, names in wire.HUB_METHODS.items() for name in names}
    assert set(hub.session.hub._ops()) == listed
    session = _Recorder()
    _every_call(HubMethods(session))
    # hub.* is what a connection says before it is a session (hello, status, shutdown)
    assert {method for method, _, _ in session.sent} == {m for m in listed if not m.startswith("hub.")}


def test_typed_calls_over_the_socket_return_records_and_the_hubs_errors(hub_and_client):
    hub, client = hub_and_client
    methods = HubMethods(client)
    assert methods.env_instances() == [] and methods.agent_instances(status="running") == []
    run = methods.submit_run(hub.task([deploy(), bash_check("ok", "true", sandbox_name="box")]),
                             options=RunOptions(sandbox="process"))
    assert hub.wait(run["run_id"])["status"] == "passed"
    with pytest.raises(HubError, match="not running; nothing to cancel"):
        methods.cancel_run(run["run_id"])
    with pytest.raises(NotFoundError):
        methods.cancel_run("no-such-run")
    with pytest.raises(HubError, match="no review 'nope' is pending"):
        methods.review("nope", "continue")
    with pytest.raises(HubError, match="'continue' or 'abort'"):
        methods.review("nope", "maybe")


def test_the_hub_refuses_a_method_off_its_list_with_the_unknown_method_error(hub_and_client, monkeypatch):
    _, client = hub_and_client
    for method in ("hub.close", "runner.load_task", "envs._ops", "agents", ""):
        with pytest.raises(HubError, match="unknown hub method"):
            client.call(method)
    # The list decides, not what the hub happens to have a handler for.
    assert HubMethods(client).agent_instances() == []
    monkeypatch.setitem(wire.HUB_METHODS, "agents", frozenset({"deploy", "teardown"}))
    with pytest.raises(HubError, match="unknown hub method 'agents.instances'"):
        HubMethods(client).agent_instances()
