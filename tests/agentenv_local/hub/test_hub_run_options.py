"""Run options travel typed (RunOptions) from a client over the hub socket to the runner, and the store
methods a client may call are an explicit list (wire.STORE_METHODS), the same on both sides."""

from __future__ import annotations

import pytest
from kits.hub import bash_check, deploy

from agentenv_local.errors import HubError, ValidationError
from agentenv_local.hub import wire
from agentenv_local.hub.launch import Job, Launcher, SessionSubmitter
from agentenv_local.tasks.options import RunOptions


def test_run_options_round_trip_and_refuse_what_they_do_not_know():
    options = RunOptions(sandbox="process", agent="scripted", keep=True)
    assert RunOptions.from_wire(wire.decode(wire.encode({"o": options}))["o"]) == options
    assert RunOptions.from_wire(None) == RunOptions()
    assert options.overrides() == {"sandbox": "process", "agent": "scripted"}
    assert RunOptions(keep=True).overrides() == {}
    with pytest.raises(ValidationError, match="unknown run option"):
        RunOptions.from_wire({"sandbox": "process", "sandbx": "podman"})
    with pytest.raises(ValidationError, match="'keep' is true or false"):
        RunOptions.from_wire({"keep": "yes"})
    with pytest.raises(ValidationError, match="'sandbox' is a name"):
        RunOptions.from_wire({"sandbox": 3})


def test_options_sent_over_the_socket_reach_the_run_as_before(hub_and_client):
    hub, client = hub_and_client
    task_id = hub.task([deploy(), bash_check("ok", "true", sandbox_name="box")])
    job = Job(task_id, options=RunOptions(sandbox="process", keep=True))
    launcher = Launcher(SessionSubmitter(client, attach=True), concurrency=1)
    (run_id,) = launcher.launch([job])
    run = hub.wait(run_id)
    assert run["status"] == "passed"
    assert (run["keep"], run["overrides"]) == (True, {"sandbox": "process"})  # stored as before
    assert not run["context"]["metadata"].get("torn_down_sandbox_ids")  # kept: not torn down
    with pytest.raises(ValidationError, match="unknown run option"):
        client.call("runner.submit", task_id=task_id, options={"sandbox": "process", "kepp": True})


def test_the_store_methods_a_client_may_call_are_the_listed_ones(hub_and_client):
    hub, client = hub_and_client
    for namespace, methods in wire.STORE_METHODS.items():
        real = getattr(hub.store, namespace)
        assert all(callable(getattr(real, m, None)) for m in methods), namespace
        assert {"close", "subscribe", "mark_interrupted"}.isdisjoint(methods)
    assert client.store.documents.latest_version("tasks", "nope") == 0
    with pytest.raises(AttributeError, match="no method 'mark_interrupted'"):
        _ = client.store.runs.mark_interrupted  # the attribute itself is refused
    with pytest.raises(HubError, match="unknown hub method"):
        client.call("documents.no_such_method")


def test_the_launcher_keeps_at_most_concurrency_in_flight_and_frees_slots_by_run():
    class Source:
        def __init__(self) -> None:
            self.jobs: list[Job] = []

        def submit(self, job: Job) -> dict:
            self.jobs.append(job)
            return {"run_id": f"r{len(self.jobs)}", "status": "queued", "total_steps": 1}

    source = Source()
    launcher = Launcher(source, concurrency=2)
    launcher.adopt("resumed")
    assert launcher.launch([Job("t", label=str(i)) for i in range(4)]) == ["r1"]
    assert launcher.finished(["resumed"]) and launcher.fill() == ["r2"]
    assert not launcher.finished([]) and launcher.fill() == []
    assert launcher.on_events([{"kind": "run.finished", "run_id": "r1", "body": {"status": "passed"}}])
    assert launcher.fill() == ["r3"]
    assert launcher.started == ["r1", "r2", "r3"] and [launcher.jobs[r].label for r in launcher.started] == \
        ["0", "1", "2"]
    assert launcher.in_flight == {"r2", "r3"} and len(launcher.pending) == 1
