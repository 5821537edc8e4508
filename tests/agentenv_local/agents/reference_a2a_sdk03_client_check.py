"""Run from .venv-ref: a2a-sdk 0.3's ClientFactory client (the SDK the reference is built on) against an agent of
ours at BASE_URL that follows test_a2a_sdk_clients.PLAN. Prints one JSON line with what it saw.

    .venv-ref/bin/python reference_a2a_sdk03_client_check.py http://127.0.0.1:PORT

send, get, cancel, stream and resubscribe go through the SDK's client; 0.3 has no list method (the SDK's client has
none), so ``tasks/list`` is sent as a plain JSON-RPC call on the same HTTP client and each task it returns is
validated with the SDK's own Task model.
"""

import asyncio
import json
import sys
import uuid

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientJSONRPCError
from a2a.types import (
    Message,
    MessageSendConfiguration,
    Part,
    Task,
    TaskIdParams,
    TaskQueryParams,
    TaskStatusUpdateEvent,
    TextPart,
)


def message(text: str, context_id: str) -> Message:
    return Message(message_id=uuid.uuid4().hex, role="user", context_id=context_id,
                   parts=[Part(root=TextPart(text=text))])


async def last_task(events) -> tuple[Task, list[str]]:
    kinds, task = [], None
    async for event in events:
        task, update = event if isinstance(event, tuple) else (None, event)
        kinds.append("task" if update is None else update.kind)
    return task, kinds


async def main(base: str) -> None:
    seen: dict = {}
    async with httpx.AsyncClient(timeout=60) as http:
        card = await A2ACardResolver(http, base).get_agent_card()   # validated against the SDK's AgentCard
        seen["card"] = [card.name, card.protocol_version, card.preferred_transport]
        plain = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
        streaming = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(card)
        ctx = "sdk03-" + uuid.uuid4().hex[:8]
        # send (blocking), then get
        done, _ = await last_task(plain.send_message(message("hello", ctx)))
        got = await plain.get_task(TaskQueryParams(id=done.id))
        seen["send"] = [done.status.state.value, done.status.message.parts[0].root.text]
        seen["get"] = [got.id == done.id, got.status.state.value, [m.role.value for m in got.history or []]]
        # stream
        streamed, kinds = await last_task(streaming.send_message(message("streamed", ctx)))
        seen["stream"] = [kinds[0], kinds[-1], "artifact-update" in kinds, streamed.status.state.value,
                          streamed.artifacts[0].parts[0].root.text]
        # a slow task: non-blocking send, resubscribe while working, cancel (the stream ends canceled)
        slow, _ = await last_task(plain.send_message(
            message("slow one", ctx), configuration=MessageSendConfiguration(blocking=False)))
        for _ in range(600):   # until its progress update is out: nothing more happens until the cancel
            status = (await plain.get_task(TaskQueryParams(id=slow.id))).status
            if status.state.value == "working" and status.message is not None:
                break
            await asyncio.sleep(0.02)
        subscription = streaming.resubscribe(TaskIdParams(id=slow.id))
        first = await anext(subscription)
        first_state = first[0].status.state.value   # now: the SDK keeps updating that Task object in place
        canceled = await plain.cancel_task(TaskIdParams(id=slow.id))
        rest = [update async for _task, update in subscription]
        seen["subscribe"] = [first_state,
                             [u.status.state.value for u in rest if isinstance(u, TaskStatusUpdateEvent)],
                             rest[-1].final]
        seen["cancel"] = canceled.status.state.value
        # list (plain JSON-RPC: the SDK has no list call), each task parsed by the SDK's Task model
        answer = (await http.post(card.url, json={"jsonrpc": "2.0", "id": 1, "method": "tasks/list",
                                                  "params": {"contextId": ctx, "includeArtifacts": True}})).json()
        tasks = [Task.model_validate(t) for t in answer["result"]["tasks"]]
        seen["list"] = [[t.id for t in tasks] == [slow.id, streamed.id, done.id], answer["result"]["totalSize"],
                        [t.status.state.value for t in tasks]]
        # errors, by code
        errors = {}
        for name, call in [("get_unknown", plain.get_task(TaskQueryParams(id="nope"))),
                           ("cancel_done", plain.cancel_task(TaskIdParams(id=done.id)))]:
            try:
                await call
                errors[name] = None
            except A2AClientJSONRPCError as e:
                errors[name] = e.error.code
        for method in ("tasks/pushNotificationConfig/get", "agent/getAuthenticatedExtendedCard"):
            reply = (await http.post(card.url, json={"jsonrpc": "2.0", "id": 2, "method": method,
                                                     "params": {"id": done.id}})).json()
            errors[method] = reply["error"]["code"]
        seen["errors"] = errors
    print(json.dumps(seen))


asyncio.run(main(sys.argv[1]))
