"""The built-in human agent over real HTTP: a message waits as an open question until a person replies on
/ext/human/reply; end_conversation; replies that cannot land (unknown, answered, withdrawn, malformed);
cancelling while it waits; a timeout; the card's extension."""

from __future__ import annotations

import asyncio

import httpx2 as httpx
from kits.agents import run, serving_agent

from agentenv_local.agents.client import A2AClient
from agentenv_local.agents.human import (
    CONVERSATION_PATH,
    HUMAN_V1,
    PENDING_PATH,
    REPLY_PATH,
    HumanAgent,
)


async def _pending(http: httpx.AsyncClient, count: int = 1, timeout: float = 10) -> list[dict]:
    """Poll the open questions until there are `count` of them."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        got = (await http.get(PENDING_PATH)).json()["pending"]
        if len(got) >= count or loop.time() > deadline:
            return got
        await asyncio.sleep(0.02)


def test_a_question_waits_until_a_person_replies_and_the_task_completes_with_the_text():
    async def go(base):
        async with A2AClient(base) as client, httpx.AsyncClient(base_url=base, timeout=10) as http:
            task = await client.send("what is 6 x 7?", context_id="c1")
            [question] = await _pending(http)
            await asyncio.sleep(0.2)
            still = await client.get_task(task.id)  # nobody answered: it keeps waiting
            answered = await http.post(REPLY_PATH, json={"task_id": task.id, "text": "42"})
            done = await client.wait(task, timeout=10)
            again = await http.post(REPLY_PATH, json={"task_id": task.id, "text": "43"})
            # A second turn of the same context sees the conversation so far.
            second = await client.send("and 6 x 8?", context_id="c1")
            [question2] = await _pending(http)
            await http.post(REPLY_PATH, json={"task_id": second.id, "text": "48", "data": {"confidence": 0.9}})
            done2 = await client.wait(second, timeout=10)
            conversation = (await http.get(CONVERSATION_PATH, params={"context_id": "c1"})).json()
            everything = (await http.get(CONVERSATION_PATH)).json()
            unknown_context = await http.get(CONVERSATION_PATH, params={"context_id": "nope"})
            trajectory = await client.trajectory_get(task_id=task.id)
            left = (await http.get(PENDING_PATH)).json()
            return (question, still, answered, done, again, question2, done2, conversation, everything,
                    unknown_context, trajectory, left)

    with serving_agent(HumanAgent()) as base:
        (question, still, answered, done, again, question2, done2, conversation, everything, unknown_context,
         trajectory, left) = run(go(base))
    assert question["text"] == "what is 6 x 7?" and question["context_id"] == "c1"
    assert question["asked_at"].endswith("Z") and question["expires_at"] > question["asked_at"]
    assert [e["role"] for e in question["conversation"]] == ["asker"]
    assert still.state == "working"
    assert answered.status_code == 200
    assert answered.json() == {"status": "answered", "task_id": done.id, "context_id": "c1",
                               "end_conversation": False}
    assert done.state == "completed" and done.text == "42" and done.data == {}
    assert again.status_code == 409 and "already answered" in again.json()["detail"]
    assert [(e["role"], e["text"]) for e in question2["conversation"]] == [
        ("asker", "what is 6 x 7?"), ("human", "42"), ("asker", "and 6 x 8?")]
    assert done2.text == "48" and done2.data == {"confidence": 0.9}
    entries = conversation["conversation"]
    assert [(e["role"], e["text"]) for e in entries] == [
        ("asker", "what is 6 x 7?"), ("human", "42"), ("asker", "and 6 x 8?"), ("human", "48")]
    assert [e.get("status") for e in entries] == ["answered", None, "answered", None]
    assert list(everything["conversations"]) == ["c1"]
    assert unknown_context.status_code == 404 and "nope" in unknown_context.json()["detail"]
    assert [e["type"] for e in trajectory["trajectory"]] == ["question", "answer"]
    assert left == {"pending": []}


def test_end_conversation_adds_the_data_part_prompt_agent_stops_on():
    async def go(base):
        async with A2AClient(base) as client, httpx.AsyncClient(base_url=base, timeout=10) as http:
            task = await client.send("anything else?", context_id="c")
            await _pending(http)
            reply = await http.post(REPLY_PATH, json={"task_id": task.id, "text": "no, thanks",
                                                      "end_conversation": True})
            done = await client.wait(task, timeout=10)
            only_end = await client.send("sure?", context_id="c")
            await _pending(http)
            await http.post(REPLY_PATH, json={"task_id": only_end.id, "end_conversation": True})
            done2 = await client.wait(only_end, timeout=10)
            return reply.json(), done, done2

    with serving_agent(HumanAgent()) as base:
        reply, done, done2 = run(go(base))
    assert reply["end_conversation"] is True
    assert done.state == "completed" and done.text == "no, thanks" and done.data == {"end_conversation": True}
    assert done2.state == "completed" and done2.text == "" and done2.data == {"end_conversation": True}


def test_replies_that_cannot_land_get_clear_errors():
    async def go(base):
        async with A2AClient(base) as client, httpx.AsyncClient(base_url=base, timeout=10) as http:
            unknown = await http.post(REPLY_PATH, json={"task_id": "no-such-task", "text": "hi"})
            task = await client.send("hello?", context_id="c")
            await _pending(http)
            bad = {
                "no_task": await http.post(REPLY_PATH, json={"text": "hi"}),
                "empty": await http.post(REPLY_PATH, json={"task_id": task.id, "text": ""}),
                "text_type": await http.post(REPLY_PATH, json={"task_id": task.id, "text": 5}),
                "data_type": await http.post(REPLY_PATH, json={"task_id": task.id, "text": "x", "data": [1]}),
                "end_type": await http.post(REPLY_PATH, json={"task_id": task.id, "text": "x",
                                                              "end_conversation": "yes"}),
                "extra": await http.post(REPLY_PATH, json={"task_id": task.id, "text": "x", "mood": "ok"}),
                "not_json": await http.post(REPLY_PATH, content=b"{nope", headers={"content-type": "application/json"}),
                "not_object": await http.post(REPLY_PATH, json=["x"]),
            }
            still = (await http.get(PENDING_PATH)).json()["pending"]
            await http.post(REPLY_PATH, json={"task_id": task.id, "text": "fine"})
            done = await client.wait(task, timeout=10)
            return unknown, bad, still, done

    with serving_agent(HumanAgent()) as base:
        unknown, bad, still, done = run(go(base))
    assert unknown.status_code == 404
    assert "no question with task_id 'no-such-task'" in unknown.json()["detail"]
    assert PENDING_PATH in unknown.json()["detail"]
    assert {k: r.status_code for k, r in bad.items()} == {k: 400 for k in bad}
    assert "task_id" in bad["no_task"].json()["detail"]
    assert "needs some text" in bad["empty"].json()["detail"]
    assert "unknown field(s): mood" in bad["extra"].json()["detail"]
    assert len(still) == 1  # the bad replies answered nothing
    assert done.text == "fine"


def test_cancelling_while_it_waits_withdraws_the_question():
    async def go(base):
        async with A2AClient(base) as client, httpx.AsyncClient(base_url=base, timeout=10) as http:
            task = await client.send("are you there?", context_id="c")
            await _pending(http)
            canceled = await client.cancel(task.id)
            await asyncio.sleep(0.1)
            left = (await http.get(PENDING_PATH)).json()["pending"]
            late = await http.post(REPLY_PATH, json={"task_id": task.id, "text": "yes!"})
            final = await client.get_task(task.id)
            conversation = (await http.get(CONVERSATION_PATH, params={"context_id": "c"})).json()
            # the agent still answers the next turn of that context
            nxt = await client.send("now?", context_id="c")
            await _pending(http)
            await http.post(REPLY_PATH, json={"task_id": nxt.id, "text": "now"})
            done = await client.wait(nxt, timeout=10)
            return canceled, left, late, final, conversation, done

    with serving_agent(HumanAgent()) as base:
        canceled, left, late, final, conversation, done = run(go(base))
    assert canceled.state == "canceled" and final.state == "canceled"
    assert left == []
    assert late.status_code == 409 and "no longer open: it was canceled" in late.json()["detail"]
    assert conversation["conversation"][0]["status"] == "canceled"
    assert done.text == "now"


def test_a_question_nobody_answers_times_out_and_the_card_advertises_the_extension():
    async def go(base):
        async with A2AClient(base) as client, httpx.AsyncClient(base_url=base, timeout=10) as http:
            card = await client.card()
            await client.agent_config_set(timeout_seconds=1)
            task = await client.send("quick?", context_id="c")
            [question] = await _pending(http)
            done = await client.wait(task, timeout=10)
            late = await http.post(REPLY_PATH, json={"task_id": task.id, "text": "too late"})
            return card, question, done, late

    with serving_agent(HumanAgent()) as base:
        card, _question, done, late = run(go(base))
    [ext] = [e for e in card["capabilities"]["extensions"] if e["uri"] == HUMAN_V1]
    assert ext["params"]["methods"]["reply"] == {"method": "POST", "endpoint": REPLY_PATH, "request": {
        "required": ["task_id", "text"], "optional": ["data", "end_conversation"]}}
    assert card["name"] == "human"
    assert done.state == "failed" and done.error["error_code"] == "framework.timeout"
    assert late.status_code == 409 and "timed out" in late.json()["detail"]
