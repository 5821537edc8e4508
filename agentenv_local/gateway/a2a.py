"""A trigger's ``send_nl`` action: an instruction to an executor agent over A2A 0.3 JSON-RPC.

This stays a small client of its own rather than ``agentenv_local.agents.client.A2AClient``: the trigger engine
depends on what it does, which differs from that client's ``prompt`` (no card read, the ``a2a_url`` used as the
RPC URL with ``/a2a`` appended, a message answer accepted, ``tasks/get`` every 2 s, ``TimeoutError`` at the
deadline rather than a timed-out task, ``RuntimeError`` for a refusal or a failed task, every text part of the
answer joined). See docs/environments/triggers.md.
"""

from __future__ import annotations

import asyncio
import secrets

from agentenv_local import jsonrpc

__all__ = ["send_a2a"]


async def send_a2a(executor: dict, instruction: str, context_id: str) -> str | None:
    """A2A 0.3 JSON-RPC ``message/send`` to the executor, then ``tasks/get`` every 2 s until terminal."""
    url = str(executor.get("a2a_url") or "").rstrip("/")
    if not url.endswith("/a2a"):
        url += "/a2a"
    timeout = float(executor.get("timeout_seconds") or 120)
    headers = {"AgentEnv-Role": executor["role"]} if executor.get("role") else {}
    message = {"role": "user", "kind": "message", "messageId": secrets.token_hex(8), "contextId": context_id,
               "parts": [{"kind": "text", "text": instruction}]}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    from agentenv_local.http_clients import async_client

    async with async_client(timeout=timeout, headers=headers) as http:  # an in-hub executor: in-process
        r = await http.post(url, json=jsonrpc.request("message/send", {"message": message}, 1))
        r.raise_for_status()
        body = r.json()
        if "error" in body:
            raise RuntimeError(f"executor refused the message: {body['error']}")
        result = body.get("result") or {}
        while result.get("kind") == "task":
            state = (result.get("status") or {}).get("state")
            if state in ("completed", "failed", "canceled", "rejected"):
                if state != "completed":
                    raise RuntimeError(f"executor task ended {state}")
                break
            if loop.time() > deadline:
                raise TimeoutError(f"executor did not finish in {timeout:g}s")
            await asyncio.sleep(2)
            r = await http.post(url, json=jsonrpc.request("tasks/get", {"id": result.get("id")}, 2))
            result = r.json().get("result") or {}
        return _a2a_text(result)


def _a2a_text(result: dict) -> str | None:
    texts: list[str] = []
    parts = list(result.get("parts") or [])
    for artifact in result.get("artifacts") or []:
        parts += artifact.get("parts") or []
    status_msg = (result.get("status") or {}).get("message") or {}
    parts += status_msg.get("parts") or []
    for part in parts:
        if part.get("kind") == "text" and part.get("text"):
            texts.append(part["text"])
    return "\n".join(texts) or None
