"""The hub's socket API as a client sees it: this test process is the hub, and also connects to
itself over the unix socket like another command would."""

from __future__ import annotations

import json
import socket

import pytest
from kits.hub import bash_check, clean_env, deploy

from agentenv_local.errors import AgentenvError, ConflictError, HubError, NotFoundError
from agentenv_local.query import Query


def test_store_calls_round_trip_bytes_queries_and_errors(hub_and_client):
    hub, client = hub_and_client
    data = bytes(range(256)) * 4
    client.store.objects.put("blobs/raw", data)
    assert client.store.objects.get("blobs/raw") == data
    assert hub.store.objects.get("blobs/raw") == data

    client.store.documents.put("tasks", "t", {"steps": [], "n": 1})
    client.store.documents.put("tasks", "t", {"steps": [], "n": 2})
    docs = client.store.documents.query(Query("tasks").where("n", "gte", 2))
    assert [(d["id"], d["version"]) for d in docs] == [("t", 2)]

    # Errors raised in the hub arrive as the same types, with their hints.
    with pytest.raises(ConflictError):
        client.store.documents.put("tasks", "t", {"steps": []}, version=2)
    with pytest.raises(NotFoundError) as missing:
        client.store.runs.get("nope")
    assert missing.value.hint
    with pytest.raises(HubError, match="not callable through the hub"):
        client.call("runs.mark_interrupted", lambda owner: False)
    with pytest.raises(HubError, match="not callable through the hub"):
        client.call("events._flush_loop")
    with pytest.raises(HubError, match="unknown hub method"):
        client.call("runner.explode")
    with pytest.raises(AgentenvError, match="TypeError"):
        client.store.documents.put("tasks")  # wrong arguments: an error, not a dead connection
    assert client.call("hub.status")["pid"] == hub.session.hub._op_status()["pid"]


def test_a_malformed_line_gets_an_error_and_the_connection_lives_on(hub_and_client):
    hub, _ = hub_and_client
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(hub.root / ".agentenv" / "hub.sock"))
    f = sock.makefile("rwb")
    try:
        f.write(b"this is not json\n")
        f.flush()
        assert json.loads(f.readline())["error"]["message"] == "malformed request"
        f.write(json.dumps({"id": 7, "method": "hub.hello"}).encode() + b"\n")
        f.flush()
        answer = json.loads(f.readline())
        assert answer["id"] == 7 and answer["result"]["pid"]
    finally:
        f.close()
        sock.close()


def _submit_and_watch(client, task_id: str, stream) -> tuple[dict, list[str]]:
    """Submit a run of `task_id` and collect the kinds of its events on `stream` until it finishes."""
    try:
        run = client.call("runner.submit", task_id=task_id, attach=True)
        seen: list[str] = []
        while not seen or seen[-1] != "run.finished":
            event = stream.get(timeout=30)
            assert event is not None, f"no run.finished; saw {seen}"
            if event.get("run_id") == run["run_id"]:
                seen.append(event["kind"])
    finally:
        stream.close()
    return run, seen


def test_a_client_sees_live_events_and_a_run_it_submitted(hub_and_client):
    hub, client = hub_and_client
    task_id = hub.task([deploy(), bash_check("ok", "true", sandbox_name="box")])
    run, seen = _submit_and_watch(client, task_id, client.subscribe())
    assert seen[0] == "run.queued" and "step.started" in seen and "verification" in seen
    assert client.store.runs.get(run["run_id"])["status"] == "passed"


def test_closing_a_client_that_waits_on_a_run_interrupts_it(hub_and_client, tmp_path):
    from kits.hub import gate, step_status, wait_until

    from agentenv_local.config import load_config
    from agentenv_local.hub import connect

    hub, _ = hub_and_client
    release = tmp_path / "release"
    task_id = hub.task([deploy(), bash_check("wait", gate(release, 60), sandbox_name="box")])
    other = connect(start=hub.root, config=load_config(hub.root, environ=clean_env()), become_hub=False)
    run = other.call("runner.submit", task_id=task_id, attach=True)
    wait_until(lambda: step_status(hub.store.runs.get(run["run_id"]), "wait") == "running", what="the slow step")
    other.close()  # like a killed command: the hub interrupts what it was waiting on
    final = hub.wait(run["run_id"])
    release.touch()
    assert final["status"] == "interrupted"
    assert "stopped before it finished" in final["error"]
    # A run submitted without attach is not tied to the connection.
    loose = connect(start=hub.root, config=load_config(hub.root, environ=clean_env()), become_hub=False)
    free = loose.call("runner.submit", task_id=hub.task([deploy(), bash_check("ok", "true", sandbox_name="box")]))
    loose.close()
    assert hub.wait(free["run_id"])["status"] == "passed"


def test_a_subscription_gets_only_the_kinds_it_asks_for(hub_and_client):
    hub, client = hub_and_client
    task_id = hub.task([deploy(), bash_check("ok", "true", sandbox_name="box")])
    _, seen = _submit_and_watch(client, task_id, client.subscribe(kinds=["run.", "verification"]))
    assert seen[0] == "run.queued" and "verification" in seen
    assert all(kind.startswith("run.") or kind == "verification" for kind in seen)  # no step.* came
