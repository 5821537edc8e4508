"""Run from .venv-ref: the reference stack's A2A client (a2a-sdk 0.3, as the reference's agent-env uses) against an
agent at BASE_URL. Prints one JSON line with what it saw.

    .venv-ref/bin/python reference_a2a_client_check.py http://127.0.0.1:PORT
"""

import asyncio
import json
import sys
import uuid

import httpx
from a2a.client import A2ACardResolver, A2AClient
from a2a.types import (
    GetTaskRequest,
    Message,
    MessageSendConfiguration,
    MessageSendParams,
    Part,
    SendMessageRequest,
    TaskQueryParams,
    TextPart,
)


async def main(base: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        card = await A2ACardResolver(http, base).get_agent_card()   # validates the card against a2a-sdk's model
        client = A2AClient(http, agent_card=card)
        message = Message(message_id=uuid.uuid4().hex, role="user", context_id="ref-ctx",
                          parts=[Part(root=TextPart(text="from the reference"))])
        sent = await client.send_message(SendMessageRequest(
            id="1", params=MessageSendParams(message=message, configuration=MessageSendConfiguration(blocking=False))))
        task = sent.root.result
        for _ in range(300):
            got = await client.get_task(GetTaskRequest(id="2", params=TaskQueryParams(id=task.id)))
            task = got.root.result
            if task.status.state.value in ("completed", "failed", "canceled"):
                break
            await asyncio.sleep(0.05)
        texts = [p.root.text for p in (task.status.message.parts if task.status.message else [])
                 if p.root.kind == "text"]
        extensions = [e.uri for e in (card.capabilities.extensions or [])]
        print(json.dumps({"card_name": card.name, "card_url": card.url, "extensions": extensions,
                          "state": task.status.state.value, "texts": texts, "context": task.context_id}))


asyncio.run(main(sys.argv[1]))
