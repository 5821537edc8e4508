"""Our A2A agents against a2a-sdk's own clients, method for method: 1.x's ClientFactory (transport negotiated from
our card; its 1.0 JSON-RPC transport and its 0.3 compatibility transport) in this venv, and 0.3's client (what the
reference uses) from .venv-ref through reference_a2a_sdk03_client_check.py. The scripted agent is served in the
hub (on this test's loop) and as a `python -m agentenv_local.agents scripted` subprocess, over real HTTP."""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx2
import pytest
from kits.agents import REF_PYTHON, ROOT, run

a2a = pytest.importorskip("a2a", reason="a2a-sdk 1.x is the [a2a] extra: scripts/setup.sh --test installs it")

from a2a.client import ClientConfig, ClientFactory  # noqa: E402 - after the importorskip
from a2a.types import a2a_pb2 as pb  # noqa: E402
from a2a.utils.errors import (  # noqa: E402
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf.json_format import ParseDict  # type: ignore[import-untyped]  # noqa: E402  # no stubs for protobuf

from agentenv_local.hosting.agents.hosted import resolve_spec, serve_in_hub, spawn  # noqa: E402

# "slow ..." stays working (a progress update, then a long sleep) until canceled; anything else is echoed
PLAN = {"plan": {"steps": [{"if": {"input": "text", "contains": "slow"},
                            "then": [{"progress": "started {input}"}, {"sleep": 300}, {"reply": "never"}],
                            "else": [{"reply": "echo: {input}"}]}]}}


async def _hosted(where: str) -> Any:
    return await (serve_in_hub if where == "hub" else spawn)(resolve_spec("scripted"), PLAN)


def _unreachable(hosted: Any, exc: Exception) -> AssertionError:
    """Why an agent just started could not be reached, as far as this process can tell (a CI run once failed
    here with "All connection attempts failed" and nothing more)."""
    proc = hosted._proc
    state = "in the hub" if proc is None else f"its process {proc.pid}: exit code {proc.poll()}"
    return AssertionError(f"the agent at {hosted.url} ({state}) could not be reached: {exc!r} <- "
                          f"{exc.__cause__!r} <- {getattr(exc.__cause__, '__cause__', None)!r}; "
                          f"it printed: {hosted._log[-10:]}")


def _message(text: str, context_id: str) -> pb.Message:
    return pb.Message(message_id=uuid.uuid4().hex, role=pb.Role.ROLE_USER, context_id=context_id,
                      parts=[pb.Part(text=text)])


async def _events(stream: AsyncIterator[pb.StreamResponse]) -> list[pb.StreamResponse]:
    return [event async for event in stream]


def _kind(event: pb.StreamResponse) -> str:
    return str(event.WhichOneof("payload"))


async def _until(check: Callable[[], Awaitable[bool]]) -> None:
    for _ in range(600):
        if await check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the condition never held")


async def _drive_sdk1(base: str, *, dialect: str) -> dict[str, Any]:
    """Every method a2a-sdk 1.x's client calls, through ClientFactory; ``dialect`` "0.3" keeps only the card's 0.3
    interface, so the factory picks its 0.3 compatibility transport."""
    seen: dict[str, Any] = {}
    async with httpx2.AsyncClient() as http:
        raw_card = (await http.get(base + "/.well-known/agent-card.json", headers={"A2A-Version": "1.0"})).json()
    card = ParseDict(raw_card, pb.AgentCard())   # strict: no unknown field allowed
    if dialect == "0.3":
        keep = [i for i in card.supported_interfaces if i.protocol_version == "0.3"]
        del card.supported_interfaces[:]
        card.supported_interfaces.extend(keep)
    streaming = ClientFactory(ClientConfig(streaming=True)).create(card)
    plain = ClientFactory(ClientConfig(streaming=False)).create(card)
    seen["transport"] = type(plain._transport).__name__  # type: ignore[attr-defined]  # private; which one the factory negotiated from our card
    ctx = f"ctx-{uuid.uuid4().hex[:8]}"
    try:
        # send (blocking, no stream): the completed task comes back
        [reply] = await _events(plain.send_message(pb.SendMessageRequest(message=_message("hello", ctx))))
        done = reply.task
        seen["send"] = (_kind(reply), done.status.state, done.status.message.parts[0].text, done.context_id)
        # get, with history
        got = await plain.get_task(pb.GetTaskRequest(id=done.id))
        seen["get"] = (got.id == done.id, got.status.state, [m.role for m in got.history])
        # stream: the task, then its status updates and artifact, ending with the terminal one
        events = await _events(streaming.send_message(pb.SendMessageRequest(message=_message("streamed", ctx))))
        seen["stream"] = [_kind(e) for e in events]
        last = events[-1].status_update
        seen["stream_end"] = (last.status.state, last.status.message.parts[0].text)
        artifact = next(e.artifact_update for e in events if _kind(e) == "artifact_update")
        seen["stream_artifact"] = artifact.artifact.parts[0].text
        # a slow task: returned while working, then resubscribed to, then canceled (which ends the stream)
        request = pb.SendMessageRequest(message=_message("slow one", ctx),
                                        configuration=pb.SendMessageConfiguration(return_immediately=True))
        [started] = await _events(plain.send_message(request))
        slow_id = started.task.id

        async def working() -> bool:   # its progress update published: nothing more happens until the cancel
            task = await plain.get_task(pb.GetTaskRequest(id=slow_id))
            return task.status.state == pb.TaskState.TASK_STATE_WORKING and task.status.HasField("message")

        await _until(working)
        subscription = streaming.subscribe(pb.SubscribeToTaskRequest(id=slow_id))
        first = await anext(subscription)
        canceled = await plain.cancel_task(pb.CancelTaskRequest(id=slow_id))
        rest = [e async for e in subscription]
        seen["subscribe"] = (_kind(first), first.task.status.state, [_kind(e) for e in rest],
                             rest[-1].status_update.status.state)
        seen["cancel"] = canceled.status.state
        if dialect == "0.3":   # 0.3 has no list method: a2a-sdk's compat transport refuses without asking
            try:
                await plain.list_tasks(pb.ListTasksRequest(context_id=ctx))
                seen["list"] = "listed"
            except NotImplementedError:
                seen["list"] = "NotImplementedError"
        else:
            await _list(plain, ctx, seen, slow_id, done.id)
        # the errors a client of the spec expects, each as its own A2A error type
        errors: dict[str, str] = {}
        calls: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
            ("get_unknown", lambda: plain.get_task(pb.GetTaskRequest(id="nope"))),
            ("cancel_done", lambda: plain.cancel_task(pb.CancelTaskRequest(id=done.id))),
            ("subscribe_done", lambda: _events(streaming.subscribe(pb.SubscribeToTaskRequest(id=done.id)))),
            ("push_create", lambda: plain.create_task_push_notification_config(
                pb.TaskPushNotificationConfig(task_id=done.id, url="http://127.0.0.1:9/hook"))),
            ("push_get", lambda: plain.get_task_push_notification_config(
                pb.GetTaskPushNotificationConfigRequest(task_id=done.id, id="x"))),
            ("push_list", lambda: plain.list_task_push_notification_configs(
                pb.ListTaskPushNotificationConfigsRequest(task_id=done.id))),
            ("push_delete", lambda: plain.delete_task_push_notification_config(
                pb.DeleteTaskPushNotificationConfigRequest(task_id=done.id, id="x"))),
        ]
        if dialect == "1.0":
            calls.append(("list_bad_token", lambda: plain.list_tasks(pb.ListTasksRequest(page_token="not-ours"))))
        for name, call in calls:
            try:
                await call()
                errors[name] = "no error"
            except Exception as e:  # the type is what is checked
                errors[name] = type(e).__name__
        seen["errors"] = errors
        extended = await plain.get_extended_agent_card(pb.GetExtendedAgentCardRequest())
        seen["extended_card"] = extended.name   # the card says there is none: the client keeps the public one
    finally:
        await plain.close()
        await streaming.close()
    return seen


async def _list(plain: Any, ctx: str, seen: dict[str, Any], slow_id: str, first_id: str) -> None:
    """This context's three tasks, newest first, in two pages of two, artifacts only when asked."""
    page1 = await plain.list_tasks(pb.ListTasksRequest(context_id=ctx, page_size=2))
    page2 = await plain.list_tasks(pb.ListTasksRequest(context_id=ctx, page_size=2,
                                                       page_token=page1.next_page_token, include_artifacts=True))
    seen["list"] = ([t.id for t in page1.tasks] + [t.id for t in page2.tasks], page1.total_size,
                    bool(page1.next_page_token), page2.next_page_token,
                    [len(t.artifacts) for t in [*page1.tasks, *page2.tasks]])
    seen["list_ids"] = [slow_id, None, first_id]   # the middle one: the streamed task
    canceled_only = await plain.list_tasks(pb.ListTasksRequest(context_id=ctx,
                                                               status=pb.TaskState.TASK_STATE_CANCELED))
    seen["list_canceled"] = [t.id for t in canceled_only.tasks] == [slow_id]


def _check_sdk1(seen: dict[str, Any], transport: str) -> None:
    S = pb.TaskState
    assert seen["transport"] == transport
    assert seen["send"][:3] == ("task", S.TASK_STATE_COMPLETED, "echo: hello")
    assert seen["get"] == (True, S.TASK_STATE_COMPLETED, [pb.Role.ROLE_USER, pb.Role.ROLE_AGENT])
    assert seen["stream"][0] == "task" and seen["stream"][-1] == "status_update" and "artifact_update" in seen["stream"]
    assert seen["stream_end"] == (S.TASK_STATE_COMPLETED, "echo: streamed")
    assert seen["stream_artifact"] == "echo: streamed"
    assert seen["subscribe"][:2] == ("task", S.TASK_STATE_WORKING)
    assert seen["subscribe"][3] == S.TASK_STATE_CANCELED and set(seen["subscribe"][2]) == {"status_update"}
    assert seen["cancel"] == S.TASK_STATE_CANCELED
    errors = seen["errors"]
    assert errors["get_unknown"] == TaskNotFoundError.__name__
    assert errors["cancel_done"] == TaskNotCancelableError.__name__
    assert errors["subscribe_done"] == UnsupportedOperationError.__name__
    for name in ("push_create", "push_get", "push_list", "push_delete"):
        assert errors[name] == PushNotificationNotSupportedError.__name__, (name, errors)
    assert seen["extended_card"] == "scripted"


@pytest.mark.parametrize("where", ["hub", "subprocess"])
def test_a2a_sdk1_client_speaks_1_0_with_our_agent(where):
    async def go() -> dict[str, Any]:
        hosted = await _hosted(where)
        try:
            return await _drive_sdk1(hosted.url, dialect="1.0")
        except httpx2.ConnectError as exc:
            raise _unreachable(hosted, exc) from exc
        finally:
            await hosted.stop()

    seen = run(go())
    _check_sdk1(seen, "JsonRpcTransport")
    ids, total, more, last_token, artifacts = seen["list"]
    assert len(ids) == 3 == total and len(set(ids)) == 3 and more and last_token == ""
    assert ids[0] == seen["list_ids"][0] and ids[2] == seen["list_ids"][2]
    assert artifacts == [0, 0, 1]   # page 1 without artifacts (the default); page 2 asked for them
    assert seen["list_canceled"]
    assert seen["errors"]["list_bad_token"] == InvalidParamsError.__name__


def test_a2a_sdk1_client_in_its_0_3_compat_mode():
    """The factory picks a2a-sdk's 0.3 compatibility transport from a card offering only 0.3: the 0.3 method
    names (message/send, tasks/get, message/stream, tasks/resubscribe, tasks/cancel, tasks/pushNotificationConfig/*)
    on our agent."""
    async def go() -> dict[str, Any]:
        hosted = await _hosted("hub")
        try:
            return await _drive_sdk1(hosted.url, dialect="0.3")
        finally:
            await hosted.stop()

    seen = run(go())
    _check_sdk1(seen, "CompatJsonRpcTransport")
    assert seen["list"] == "NotImplementedError"   # a2a-sdk's own limit: 0.3 has no list method


def _has_sdk03() -> bool:
    if not REF_PYTHON.exists():
        return False
    return subprocess.run([str(REF_PYTHON), "-c", "import a2a.client"], check=False, capture_output=True,
                          timeout=60).returncode == 0


@pytest.mark.skipif(not _has_sdk03(), reason=".venv-ref lacks a2a-sdk 0.3 (scripts/setup.sh --test installs it)")
@pytest.mark.parametrize("where", ["hub", "subprocess"])
def test_a2a_sdk03_client_with_our_agent(where):
    async def go() -> dict[str, Any]:
        hosted = await _hosted(where)
        try:   # an asyncio subprocess: an agent in the hub runs on this loop and must keep serving meanwhile
            proc = await asyncio.create_subprocess_exec(
                str(REF_PYTHON), str(ROOT / "tests/agentenv_local/agents/reference_a2a_sdk03_client_check.py"),
                hosted.url,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            out, err = await asyncio.wait_for(proc.communicate(), 180)
        finally:
            await hosted.stop()
        assert proc.returncode == 0, err.decode()[-3000:]
        return json.loads(out.decode().strip().splitlines()[-1])

    seen = run(go())
    assert seen["card"] == ["scripted", "0.3.0", "JSONRPC"]
    assert seen["send"] == ["completed", "echo: hello"]
    assert seen["get"] == [True, "completed", ["user", "agent"]]
    assert seen["stream"] == ["task", "status-update", True, "completed", "echo: streamed"]
    assert seen["subscribe"] == ["working", ["canceled"], True]
    assert seen["cancel"] == "canceled"
    assert seen["list"] == [True, 3, ["canceled", "completed", "completed"]]
    assert seen["errors"] == {"get_unknown": -32001, "cancel_done": -32002,
                              "tasks/pushNotificationConfig/get": -32003,
                              "agent/getAuthenticatedExtendedCard": -32007}


def test_each_version_reads_its_card_and_bad_list_params_are_named():
    from kits.agents import serving_agent

    from agentenv_local.agents.scripted import ScriptedAgent

    def rpc(base: str, method: str, params: dict) -> dict:
        body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
        return httpx2.post(base + "/a2a", json=body, headers={"A2A-Version": "1.0"}).json()

    with serving_agent(ScriptedAgent(plan=[{"reply": "ok {input}"}])) as base:
        card_path = base + "/.well-known/agent-card.json"
        v10 = httpx2.get(card_path, headers={"A2A-Version": "1.0"})
        v03 = httpx2.get(card_path)
        ParseDict(v10.json(), pb.AgentCard())   # strict 1.0 parse: raises on any field 1.0 does not define
        with pytest.raises(Exception, match="stateTransitionHistory|url"):
            ParseDict(v03.json(), pb.AgentCard())   # the 0.3 card carries 0.3's fields
        assert v10.headers["vary"] == v03.headers["vary"] == "A2A-Version"
        assert "url" not in v10.json() and v03.json()["url"] == base + "/a2a"
        assert v10.json()["capabilities"]["extendedAgentCard"] is False
        assert {i["protocolVersion"] for i in v10.json()["supportedInterfaces"]} == {"0.3", "1.0"}

        sent = rpc(base, "SendMessage", {"message": {"messageId": "m1", "role": "ROLE_USER", "contextId": "c",
                                                     "parts": [{"text": "x"}]}})
        stamp = sent["result"]["task"]["status"]["timestamp"]
        assert rpc(base, "ListTasks", {"statusTimestampAfter": stamp})["result"]["totalSize"] == 1
        assert rpc(base, "ListTasks", {"statusTimestampAfter": "2999-01-01T00:00:00Z"})["result"] == {
            "tasks": [], "nextPageToken": "", "pageSize": 50, "totalSize": 0}
        listed03 = rpc(base, "tasks/list", {})["result"]["tasks"]
        assert listed03[0]["kind"] == "task" and listed03[0]["status"]["state"] == "completed"
        for params, field in [({"pageSize": 0}, "params.pageSize"), ({"pageSize": 101}, "params.pageSize"),
                              ({"status": "TASK_STATE_DONE"}, "params.status"),
                              ({"statusTimestampAfter": "yesterday"}, "params.statusTimestampAfter"),
                              ({"pageToken": "bm9wZQ"}, "params.pageToken")]:
            error = rpc(base, "ListTasks", params)["error"]
            assert error["code"] == -32602 and error["data"] == {"field": field}, (params, error)
        error = rpc(base, "GetExtendedAgentCard", {})["error"]
        assert error["code"] == -32007 and "not configured" in error["message"]
