"""A2A streaming over real HTTP: message/stream and SendStreamingMessage (SSE events of JSON-RPC responses),
tasks/resubscribe and SubscribeToTask, the errors, a client that leaves mid-stream, and a2a-sdk's own streaming
client (from .venv-ref) against our agent."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import threading

import httpx2
import pytest
from kits.agents import REF_PYTHON, run, serving_agent, serving_app

from agentenv_local.agents import Agent, TaskProgress, TaskRequest, TaskResult
from agentenv_local.agents.client import A2AClient, A2AProtocolError, A2ARpcError


class Stepper(Agent):
    """A streaming agent: two progress updates, then an answer with structured output."""

    name = "stepper"

    async def run(self, request: TaskRequest):
        yield TaskProgress.text("step 1")
        yield TaskProgress.text("step 2")
        yield TaskResult.builder().succeeded().add_text(f"finished: {request.text}").add_structured_output(
            {"n": 2}).build()


class Plain(Agent):
    name = "plain"

    async def run(self, request: TaskRequest) -> TaskResult:
        return TaskResult.text(f"plain: {request.text}")


class Gated(Agent):
    """Says "step 1", then waits until the test opens the gate named by the request's text."""

    name = "gated"

    def __init__(self) -> None:
        super().__init__()
        self.gates: dict[str, threading.Event] = {}

    def gate(self, name: str) -> threading.Event:
        return self.gates.setdefault(name, threading.Event())

    async def run(self, request: TaskRequest):
        yield TaskProgress.text("step 1")
        gate = self.gate(request.text)
        while not gate.is_set():
            await asyncio.sleep(0.01)
        yield TaskProgress.text("step 2")
        yield TaskResult.text(f"released: {request.text}")


def _msg(text: str, dialect: str = "0.3", **extra) -> dict:
    if dialect == "0.3":
        return {"kind": "message", "messageId": f"m-{text}", "role": "user", "parts": [{"kind": "text", "text": text}],
                **extra}
    return {"messageId": f"m-{text}", "role": "ROLE_USER", "parts": [{"text": text}], **extra}


def _body(method: str, params: dict, req_id) -> dict:
    return {"jsonrpc": "2.0", "id": req_id, "method": method, "params": params}


def _parse_sse(text: str) -> list[dict]:
    """The JSON of each SSE event's data (comment lines skipped)."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        data = [line[5:].removeprefix(" ") for line in block.split("\n") if line.startswith("data:")]
        if data:
            events.append(json.loads("\n".join(data)))
    return events


def _sse_post(base: str, method: str, params: dict, req_id="s-1") -> tuple[httpx2.Response, list[dict]]:
    """POST a streaming request, read the whole answer (it ends after the final event); (response, events)."""
    with httpx2.Client(timeout=30) as h:
        answer = h.post(base + "/a2a", json=_body(method, params, req_id), headers={"Accept": "text/event-stream"})
    events = _parse_sse(answer.text) if answer.headers["content-type"].startswith("text/event-stream") else []
    return answer, events


async def _sse_events(http: httpx2.AsyncClient, base: str, method: str, params: dict, req_id):
    """Yield each event's JSON as it arrives."""
    async with http.stream("POST", base + "/a2a", json=_body(method, params, req_id),
                           headers={"Accept": "text/event-stream"}) as answer:
        assert answer.headers["content-type"].startswith("text/event-stream")
        data: list[str] = []
        async for line in answer.aiter_lines():
            if line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
            elif not line and data:
                yield json.loads("\n".join(data))
                data = []


def _texts(message: dict | None) -> list[str]:
    return [p["text"] for p in (message or {}).get("parts", []) if "text" in p]


# --- message/stream and SendStreamingMessage -----------------------------------------------------------------

def test_message_stream_03_sends_task_updates_artifact_then_one_final_event():
    with serving_agent(Stepper()) as base:
        answer, events = _sse_post(base, "message/stream", {"message": _msg("hi", contextId="ctx-s")}, req_id=7)
        with httpx2.Client() as h:
            got = h.post(base + "/a2a", json=_body("tasks/get", {"id": events[0]["result"]["id"]}, 8)).json()
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/event-stream")
    assert all(e["jsonrpc"] == "2.0" and e["id"] == 7 and "error" not in e for e in events)
    results = [e["result"] for e in events]
    assert [r["kind"] for r in results] == ["task", "status-update", "status-update", "status-update",
                                            "artifact-update", "status-update"]
    task = results[0]
    assert task["status"]["state"] == "submitted" and task["contextId"] == "ctx-s"
    assert [m["role"] for m in task["history"]] == ["user"]
    updates = [r for r in results if r["kind"] == "status-update"]
    assert [u["status"]["state"] for u in updates] == ["working", "working", "working", "completed"]
    assert [u["final"] for u in updates] == [False, False, False, True]
    assert [_texts(u["status"].get("message")) for u in updates[1:3]] == [["step 1"], ["step 2"]]
    assert all(r["taskId"] == task["id"] and r["contextId"] == "ctx-s" for r in results[1:])
    final = updates[-1]["status"]["message"]
    assert final["role"] == "agent" and final["kind"] == "message"
    assert final["parts"][0] == {"kind": "text", "text": "finished: hi"}
    assert final["parts"][1] == {"kind": "data", "data": {"structured_output": {"n": 2}}}
    artifact = results[4]
    assert artifact["lastChunk"] is True and artifact["artifact"]["parts"] == final["parts"]
    # the stream is the same task tasks/get reads
    assert got["result"]["status"]["state"] == "completed"
    assert got["result"]["artifacts"][0]["artifactId"] == artifact["artifact"]["artifactId"]
    assert got["result"]["status"]["message"] == final


def test_send_streaming_message_10_uses_the_10_shapes():
    with serving_agent(Stepper()) as base:
        answer, events = _sse_post(base, "SendStreamingMessage", {"message": _msg("yo", "1.0")}, req_id="r-10")
    assert answer.headers["content-type"].startswith("text/event-stream")
    assert all(e["id"] == "r-10" for e in events)
    results = [e["result"] for e in events]
    assert [next(iter(r)) for r in results] == ["task", "statusUpdate", "statusUpdate", "statusUpdate",
                                                "artifactUpdate", "statusUpdate"]
    assert all(len(r) == 1 for r in results)
    task = results[0]["task"]
    assert task["status"]["state"] == "TASK_STATE_SUBMITTED" and "kind" not in task
    updates = [r["statusUpdate"] for r in results if "statusUpdate" in r]
    assert [u["status"]["state"] for u in updates] == ["TASK_STATE_WORKING"] * 3 + ["TASK_STATE_COMPLETED"]
    assert all("final" not in u and "kind" not in u and u["taskId"] == task["id"] for u in updates)
    assert [_texts(u["status"].get("message")) for u in updates[1:]] == [["step 1"], ["step 2"], ["finished: yo"]]
    final = updates[-1]["status"]["message"]
    assert final["role"] == "ROLE_AGENT" and final["parts"][1] == {"data": {"structured_output": {"n": 2}}}
    assert results[4]["artifactUpdate"]["artifact"]["parts"] == final["parts"]


@pytest.mark.parametrize("protocol", ["0.3", "1.0"])
def test_our_client_streams_a_plain_agent(protocol):
    async def go(base):
        async with A2AClient(base, protocol=protocol) as client:
            card = await client.card()
            return card, [r async for r in client.stream("x", context_id="c-plain")]

    with serving_agent(Plain()) as base:
        card, results = run(go(base))
    assert card["capabilities"]["streaming"] is True
    if protocol == "0.3":
        assert [r["kind"] for r in results] == ["task", "status-update", "artifact-update", "status-update"]
        assert [r["status"]["state"] for r in results if "status" in r] == ["submitted", "working", "completed"]
        assert [r["final"] for r in results if r["kind"] == "status-update"] == [False, True]
        assert results[-1]["final"] is True and _texts(results[-1]["status"]["message"]) == ["plain: x"]
        assert results[0]["contextId"] == "c-plain"
    else:
        assert [next(iter(r)) for r in results] == ["task", "statusUpdate", "artifactUpdate", "statusUpdate"]
        inner = [next(iter(r.values())) for r in results]
        assert [i["status"]["state"] for i in inner if "status" in i] == ["TASK_STATE_SUBMITTED",
                                                                          "TASK_STATE_WORKING",
                                                                          "TASK_STATE_COMPLETED"]
        assert _texts(inner[-1]["status"]["message"]) == ["plain: x"] and inner[0]["contextId"] == "c-plain"


def test_bad_stream_params_are_one_jsonrpc_error():
    with serving_agent(Stepper()) as base:
        missing, _ = _sse_post(base, "message/stream", {}, req_id=3)
        bad_part, _ = _sse_post(base, "SendStreamingMessage", {"message": {
            "messageId": "m", "role": "ROLE_USER", "parts": [{"text": 5}]}}, req_id=4)
        no_id, _ = _sse_post(base, "tasks/resubscribe", {}, req_id=5)

        async def via_client():
            async with A2AClient(base) as client:
                with pytest.raises(A2ARpcError) as err:
                    async for _ in client.stream([]):
                        pass
                return err.value

        client_err = run(via_client())
    for answer, req_id, field in ((missing, 3, "params.message"), (bad_part, 4, "params.message.parts[0].text"),
                                  (no_id, 5, "params.id")):
        assert answer.headers["content-type"].startswith("application/json")
        body = answer.json()
        assert body["id"] == req_id and body["error"]["code"] == -32602
        assert body["error"]["data"]["field"] == field
    assert client_err.code == -32602 and client_err.data["field"] == "params.message.parts"


# --- tasks/resubscribe and SubscribeToTask --------------------------------------------------------------------

@pytest.mark.parametrize("dialect", ["0.3", "1.0"])
def test_resubscribe_to_a_running_task_gets_the_remaining_updates(dialect):
    agent = Gated()
    method = "tasks/resubscribe" if dialect == "0.3" else "SubscribeToTask"
    name = f"resub-{dialect}"

    async def go(base):
        async with A2AClient(base, protocol=dialect) as client, httpx2.AsyncClient(timeout=30) as http:
            task = await client.send(name)
            for _ in range(500):   # until the agent has said "step 1" and waits at its gate
                task = await client.get_task(task.id)
                if task.text == "step 1":
                    break
                await asyncio.sleep(0.01)
            assert task.state == "working" and task.text == "step 1"
            seen = []
            async for event in _sse_events(http, base, method, {"id": task.id}, req_id="sub-1"):
                seen.append(event)
                if len(seen) == 1:
                    agent.gate(name).set()   # the rest happens only once the subscription is open
            return task.id, seen

    with serving_agent(agent) as base:
        task_id, seen = run(go(base))
    assert all(e["id"] == "sub-1" for e in seen)
    results = [e["result"] for e in seen]
    if dialect == "0.3":
        first, rest = results[0], results[1:]
        assert first["kind"] == "task" and first["id"] == task_id
        assert first["status"]["state"] == "working" and _texts(first["status"]["message"]) == ["step 1"]
        assert [r["kind"] for r in rest] == ["status-update", "artifact-update", "status-update"]
        assert _texts(rest[0]["status"]["message"]) == ["step 2"] and rest[0]["final"] is False
        assert rest[-1]["final"] is True and rest[-1]["status"]["state"] == "completed"
        assert _texts(rest[-1]["status"]["message"]) == [f"released: {name}"]
    else:
        assert [next(iter(r)) for r in results] == ["task", "statusUpdate", "artifactUpdate", "statusUpdate"]
        first = results[0]["task"]
        assert first["id"] == task_id and first["status"]["state"] == "TASK_STATE_WORKING"
        assert _texts(results[1]["statusUpdate"]["status"]["message"]) == ["step 2"]
        last = results[-1]["statusUpdate"]
        assert last["status"]["state"] == "TASK_STATE_COMPLETED"
        assert _texts(last["status"]["message"]) == [f"released: {name}"]


@pytest.mark.parametrize("protocol", ["0.3", "1.0"])
def test_our_client_resubscribes_to_a_running_task(protocol):
    agent = Gated()
    name = f"client-resub-{protocol}"

    async def go(base):
        async with A2AClient(base, protocol=protocol) as client:
            task = await client.send(name)
            for _ in range(500):   # until the agent waits at its gate
                task = await client.get_task(task.id)
                if task.text == "step 1":
                    break
                await asyncio.sleep(0.01)
            seen = []
            async for result in client.resubscribe(task.id):
                seen.append(result)
                if len(seen) == 1:
                    agent.gate(name).set()
            with pytest.raises(A2ARpcError) as ended:
                async for _ in client.resubscribe(task.id):
                    pass
            return task.id, seen, ended.value.code

    with serving_agent(agent) as base:
        task_id, seen, ended_code = run(go(base))
    first = seen[0] if protocol == "0.3" else seen[0]["task"]
    assert first["id"] == task_id
    last = seen[-1] if protocol == "0.3" else seen[-1]["statusUpdate"]
    assert last["status"]["state"] in ("completed", "TASK_STATE_COMPLETED")
    assert _texts(last["status"]["message"]) == [f"released: {name}"]
    assert ended_code == -32004


def test_a_reader_that_falls_behind_loses_the_oldest_updates_never_the_last():
    from agentenv_local.agents.streaming import StatusUpdate, UpdateFanout

    fanout = UpdateFanout(maxsize=3)
    slow = fanout.subscribe()
    for i in range(10):
        fanout.publish(StatusUpdate("working", None, f"t{i}"))
    fanout.publish(StatusUpdate("completed", None, "t-end"))

    async def drain():
        return [await slow.next(1) for _ in range(3)]

    kept = run(drain())
    assert [u.timestamp for u in kept] == ["t8", "t9", "t-end"] and kept[-1].final
    assert slow.dropped == 8
    slow.close()
    assert len(fanout) == 0


def test_resubscribe_unknown_or_ended_task_is_an_error():
    with serving_agent(Plain()) as base:
        unknown_03, _ = _sse_post(base, "tasks/resubscribe", {"id": "nope"}, req_id=1)
        unknown_10, _ = _sse_post(base, "SubscribeToTask", {"id": "nope"}, req_id=2)
        with httpx2.Client() as h:
            done = h.post(base + "/a2a", json=_body("message/send", {"message": _msg("z")}, 3)).json()["result"]
        ended, _ = _sse_post(base, "tasks/resubscribe", {"id": done["id"]}, req_id=4)
    assert done["status"]["state"] == "completed"
    assert unknown_03.json()["error"]["code"] == -32001 and unknown_03.json()["id"] == 1
    assert unknown_10.json()["error"]["code"] == -32001 and unknown_10.json()["id"] == 2
    assert ended.json()["error"]["code"] == -32004 and "completed" in ended.json()["error"]["message"]


# --- leaving a stream -------------------------------------------------------------------------------------

def test_a_client_that_leaves_mid_stream_does_not_cancel_the_task():
    agent = Gated()
    app = agent.app()
    runtime = app.state.runtime

    async def go(base):
        async with A2AClient(base) as client:
            seen = []
            async with contextlib.aclosing(client.stream("leaver")) as events:
                async for result in events:
                    seen.append(result)
                    if _texts(result.get("status", {}).get("message")) == ["step 1"]:
                        break   # leave mid-stream: aclosing closes the HTTP response
            task_id = seen[0]["id"]
            record = runtime.tasks[task_id]
            for _ in range(1000):   # the server notices the disconnect and drops the subscription
                if len(record.updates) == 0:
                    break
                await asyncio.sleep(0.01)
            subscribers = len(record.updates)
            state_after_leaving = (await client.get_task(task_id)).state
            agent.gate("leaver").set()
            done = await client.wait(task_id, timeout=30)
            return seen, subscribers, state_after_leaving, done

    with serving_app(app) as base:
        seen, subscribers, state_after_leaving, done = run(go(base))
    assert [r["kind"] for r in seen] == ["task", "status-update", "status-update"]
    assert subscribers == 0 and state_after_leaving == "working"
    assert done.state == "completed" and done.text == "released: leaver"
    assert all(len(r.updates) == 0 for r in runtime.tasks.values())


def test_client_stream_rejects_answers_that_are_not_event_streams():
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, PlainTextResponse, Response
    from starlette.routing import Route

    card = {"name": "fake", "url": "", "protocolVersion": "0.3.0"}
    mode = {"value": ""}

    async def rpc(request):
        req_id = (await request.json())["id"]
        if mode["value"] == "json":
            return JSONResponse({"jsonrpc": "2.0", "id": req_id, "result": {"kind": "task"}})
        if mode["value"] == "text":
            return PlainTextResponse("hello")
        if mode["value"] == "bad-data":
            return Response(b"data: {not json\n\n", media_type="text/event-stream")
        if mode["value"] == "wrong-id":
            return Response(b'data: {"jsonrpc": "2.0", "id": "other", "result": {}}\n\n',
                            media_type="text/event-stream")
        task = {"kind": "task", "id": "t", "contextId": "c", "status": {"state": "working"}}
        return Response(b"data: " + json.dumps({"jsonrpc": "2.0", "id": req_id, "result": task}).encode() + b"\n\n",
                        media_type="text/event-stream")   # "short": ends before a final update

    async def card_route(_request):
        return JSONResponse(card)

    app = Starlette(routes=[Route("/.well-known/agent-card.json", card_route), Route("/a2a", rpc, methods=["POST"])])

    async def go(base):
        fields = {}
        async with A2AClient(base) as client:
            for m in ("json", "text", "bad-data", "wrong-id", "short"):
                mode["value"] = m
                with pytest.raises(A2AProtocolError) as err:
                    async for _ in client.stream("x"):
                        pass
                fields[m] = err.value.field
        return fields

    with serving_app(app) as base:
        card["url"] = base + "/a2a"
        fields = run(go(base))
    assert fields == {"json": "response", "text": "response", "bad-data": "event.data", "wrong-id": "event.id",
                      "short": "stream"}


# --- a2a-sdk's streaming client against our agent ----------------------------------------------------------

REFERENCE_STREAM_CHECK = '''
import asyncio, json, sys, uuid

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, TaskArtifactUpdateEvent, TaskStatusUpdateEvent, TextPart


async def main(base):
    async with httpx.AsyncClient(timeout=30) as http:
        card = await A2ACardResolver(http, base).get_agent_card()
        client = ClientFactory(ClientConfig(streaming=True, httpx_client=http)).create(card)
        message = Message(message_id=uuid.uuid4().hex, role=Role.user, context_id="sdk-ctx",
                          parts=[Part(root=TextPart(text="from the sdk"))])
        kinds, progress, finals, task = [], [], [], None
        async for item in client.send_message(message):
            task, update = item
            if update is None:
                kinds.append("task")
            elif isinstance(update, TaskStatusUpdateEvent):
                kinds.append("status-update")
                finals.append(update.final)
                if update.status.message and not update.final:
                    progress += [p.root.text for p in update.status.message.parts if p.root.kind == "text"]
            elif isinstance(update, TaskArtifactUpdateEvent):
                kinds.append("artifact-update")
        texts = [p.root.text for p in task.status.message.parts if p.root.kind == "text"]
        artifacts = [p.root.text for a in task.artifacts or [] for p in a.parts if p.root.kind == "text"]
        print(json.dumps({"streaming": card.capabilities.streaming, "kinds": kinds, "finals": finals,
                          "progress": progress, "state": task.status.state.value, "texts": texts,
                          "artifacts": artifacts, "context": task.context_id}))


asyncio.run(main(sys.argv[1]))
'''


def _reference_a2a_sdk() -> bool:
    if not REF_PYTHON.exists():
        return False
    probe = subprocess.run([str(REF_PYTHON), "-c", "import a2a.client, httpx"], check=False, capture_output=True,
                           timeout=60)
    return probe.returncode == 0


@pytest.mark.skipif(not _reference_a2a_sdk(), reason=".venv-ref with a2a-sdk is missing (the reference's A2A "
                                                     "client); create it to run this compatibility check")
def test_a2a_sdk_streaming_client_receives_our_events(tmp_path):
    script = tmp_path / "reference_a2a_stream_check.py"
    script.write_text(REFERENCE_STREAM_CHECK)
    with serving_agent(Stepper()) as base:
        out = subprocess.run([str(REF_PYTHON), str(script), base], check=False, capture_output=True, text=True,
                             timeout=120)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["streaming"] is True
    assert seen["kinds"] == ["task", "status-update", "status-update", "status-update", "artifact-update",
                             "status-update"]
    assert seen["finals"] == [False, False, False, True]
    assert seen["progress"] == ["step 1", "step 2"]
    assert seen["state"] == "completed" and seen["texts"] == ["finished: from the sdk"]
    assert seen["artifacts"] == ["finished: from the sdk"] and seen["context"] == "sdk-ctx"


def test_keepalive_comments_while_a_task_is_quiet(monkeypatch):
    from agentenv_local.agents import streaming

    monkeypatch.setattr(streaming, "KEEPALIVE_S", 0.05)
    agent = Gated()

    async def go(base):
        lines = []
        async with httpx2.AsyncClient(timeout=30) as http, http.stream(
                "POST", base + "/a2a", json=_body("message/stream", {"message": _msg("quiet")}, "k")) as answer:
            async for line in answer.aiter_lines():
                lines.append(line)
                if line.startswith(":"):
                    agent.gate("quiet").set()   # a comment came while the task waited: let it finish
        async with A2AClient(base) as client:   # our client skips the comments
            agent.gate("again").set()
            results = [r async for r in client.stream("again")]
        return lines, results

    with serving_agent(agent) as base:
        lines, results = run(go(base))
    assert ": keepalive" in lines
    events = _parse_sse("\n".join(lines) + "\n\n")
    assert events[-1]["result"]["final"] is True and events[-1]["result"]["status"]["state"] == "completed"
    assert results[-1]["final"] is True and _texts(results[-1]["status"]["message"]) == ["released: again"]
