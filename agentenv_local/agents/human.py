"""The built-in ``human`` agent: a person is the agent.

Every message the agent receives (A2A ``message/send``) becomes an open question; the turn waits, for as long
as its timeout allows (config ``timeout_seconds``, default 3 hours), until someone answers it. People and tools
answer over extra routes on the agent's own app (extension ``urn:agentenv-local:human/v1``):

    GET  /ext/human/pending                      {"pending": [{task_id, context_id, text, data, asked_at,
                                                  expires_at, conversation}]}, oldest first
    POST /ext/human/reply                        {task_id, text, data?, end_conversation?}
                                                  -> {"status": "answered", ...}
                                                  404 no such question, 409 already answered / withdrawn
    GET  /ext/human/conversation?context_id=C    {"context_id", "conversation": [...]}; without context_id every
                                                  context: {"conversations": {context_id: [...]}}

A conversation entry is ``{"role": "asker", task_id, text, data, at, status: open|answered|canceled|timed_out}``
(what the agent was sent) or ``{"role": "human", task_id, text, data, at}`` (the answer). A reply with
``end_conversation`` adds the data part ``{"end_conversation": true}``, so ``prompt_agent`` stops a
conversation where the person is the user side. Cancelling the task (or its timeout) withdraws the question.

The ``agentenv human`` command answers from a terminal; in a task, ``deploy_agent`` with
``"a2a_agent_id": "human"`` serves one.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import Field

from .base import Agent
from .types import (
    END_CONVERSATION_KEY,
    AgentConfig,
    DataPart,
    TaskRequest,
    TaskResult,
    TextPart,
)

HUMAN_V1 = "urn:agentenv-local:human/v1"
PENDING_PATH = "/ext/human/pending"
REPLY_PATH = "/ext/human/reply"
CONVERSATION_PATH = "/ext/human/conversation"
TRAJECTORY_FORMAT = "agentenv-human/1"
DEFAULT_TIMEOUT_S = 3 * 3600
MAX_REMEMBERED = 1000  # answered/withdrawn task ids (for a clear 409) and conversations kept


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


class HumanConfig(AgentConfig):
    #: how long a question waits for its answer (then the turn fails with framework.timeout)
    timeout_seconds: int = Field(default=DEFAULT_TIMEOUT_S, ge=1)


class ReplyError(Exception):
    def __init__(self, status: int, detail: str):
        super().__init__(detail)
        self.status = status
        self.detail = detail


@dataclass
class _Question:
    task_id: str
    context_id: str
    text: str
    data: dict[str, Any]
    asked_at: float
    expires_at: float
    entry: dict[str, Any]
    answer: asyncio.Future = field(repr=False)

    def to_json(self, conversation: list[dict[str, Any]]) -> dict[str, Any]:
        return {"task_id": self.task_id, "context_id": self.context_id, "text": self.text, "data": self.data,
                "asked_at": _iso(self.asked_at), "expires_at": _iso(self.expires_at),
                "conversation": conversation}


class HumanAgent(Agent):
    name = "human"
    description = ("A person answers: each message waits until someone replies (`agentenv human reply`, or "
                   f"POST {REPLY_PATH}).")
    config_model = HumanConfig
    input_modes = ("text", "data")
    output_modes = ("text", "data")

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        self._open: dict[str, _Question] = {}  # task id -> question, in the order asked
        self._closed: OrderedDict[str, str] = OrderedDict()  # task id -> why it is no longer open
        self._conversations: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()

    # --- the turn -------------------------------------------------------------------------------------------

    async def run(self, request: TaskRequest) -> TaskResult:
        now = time.time()
        entry = {"role": "asker", "task_id": request.task_id, "text": request.text, "data": request.data,
                 "at": _iso(now), "status": "open"}
        question = _Question(request.task_id, request.context_id, request.text, request.data, now,
                             now + request.config.timeout_seconds, entry, asyncio.get_running_loop().create_future())
        self._conversation(request.context_id).append(entry)
        self._open[request.task_id] = question
        request.trajectory.set_format(TRAJECTORY_FORMAT)
        request.trajectory.append({"type": "question", "text": request.text, "data": request.data,
                                   "asked_at": entry["at"]})
        try:
            text, data = await question.answer
        except asyncio.CancelledError:
            why = "timed_out" if time.time() >= question.expires_at - 0.5 else "canceled"
            entry["status"] = why
            self._remember(request.task_id, why)
            if not question.answer.done():
                question.answer.cancel()
            raise
        finally:
            self._open.pop(request.task_id, None)
        request.trajectory.append({"type": "answer", "text": text, "data": data,
                                   "ended_conversation": bool(data.get(END_CONVERSATION_KEY))})
        parts: list[Any] = [TextPart(text=text)] if text else []
        if data:
            parts.append(DataPart(data=data))
        return TaskResult.success(parts)

    # --- answering ------------------------------------------------------------------------------------------

    def pending(self) -> list[dict[str, Any]]:
        """The open questions, oldest first, each with its context's conversation so far."""
        return [q.to_json([dict(e) for e in self._conversations.get(q.context_id, [])])
                for q in sorted(self._open.values(), key=lambda q: q.asked_at)]

    def reply(self, task_id: Any, text: Any = "", data: Any = None, end_conversation: Any = False) -> dict[str, Any]:
        """Answer the open question of ``task_id``; raises ``ReplyError`` (400/404/409) when it cannot."""
        if not isinstance(task_id, str) or not task_id:
            raise ReplyError(400, "task_id: must be a non-empty string (see GET /ext/human/pending)")
        if text is None:
            text = ""
        if not isinstance(text, str):
            raise ReplyError(400, "text: must be a string")
        if data is not None and not isinstance(data, dict):
            raise ReplyError(400, "data: must be a JSON object")
        if not isinstance(end_conversation, bool):
            raise ReplyError(400, "end_conversation: must be true or false")
        data = dict(data or {})
        if end_conversation:
            data[END_CONVERSATION_KEY] = True
        if not text and not data:
            raise ReplyError(400, "text: an answer needs some text (or data, or end_conversation: true)")
        question = self._open.get(task_id)
        if question is None or question.answer.done():
            why = self._closed.get(task_id) or ("answered" if question is not None else None)
            if why == "answered":
                raise ReplyError(409, f"the question of task {task_id!r} was already answered")
            if why:
                raise ReplyError(409, f"the question of task {task_id!r} is no longer open: it was "
                                      f"{why.replace('_', ' ')} before an answer came")
            raise ReplyError(404, f"no question with task_id {task_id!r} is waiting here; the open ones are "
                                  f"at GET {PENDING_PATH}")
        now = time.time()
        question.entry["status"] = "answered"
        self._conversation(question.context_id).append(
            {"role": "human", "task_id": task_id, "text": text, "data": data, "at": _iso(now)})
        self._remember(task_id, "answered")
        question.answer.set_result((text, data))
        return {"status": "answered", "task_id": task_id, "context_id": question.context_id,
                "end_conversation": bool(data.get(END_CONVERSATION_KEY))}

    def conversation(self, context_id: str | None = None) -> dict[str, Any]:
        if context_id is None:
            return {"conversations": {c: [dict(e) for e in entries] for c, entries in self._conversations.items()}}
        if context_id not in self._conversations:
            raise ReplyError(404, f"no conversation with context_id {context_id!r} here")
        return {"context_id": context_id, "conversation": [dict(e) for e in self._conversations[context_id]]}

    def _conversation(self, context_id: str) -> list[dict[str, Any]]:
        entries = self._conversations.get(context_id)
        if entries is None:
            entries = self._conversations[context_id] = []
            while len(self._conversations) > MAX_REMEMBERED:
                oldest = next(iter(self._conversations))
                if any(q.context_id == oldest for q in self._open.values()):
                    break
                self._conversations.pop(oldest)
        else:
            self._conversations.move_to_end(context_id)
        return entries

    def _remember(self, task_id: str, why: str) -> None:
        self._closed[task_id] = why
        while len(self._closed) > MAX_REMEMBERED:
            self._closed.popitem(last=False)

    # --- the HTTP surface -----------------------------------------------------------------------------------

    def card_extensions(self) -> list[dict[str, Any]]:
        return [{"uri": HUMAN_V1, "description": "A person answers this agent's messages: list the open questions, "
                                                 "reply to one, read a conversation.",
                 "params": {"endpoint": PENDING_PATH,
                            "methods": {
                                "pending": {"method": "GET", "endpoint": PENDING_PATH,
                                            "response": {"required": ["pending"]}},
                                "reply": {"method": "POST", "endpoint": REPLY_PATH,
                                          "request": {"required": ["task_id", "text"],
                                                      "optional": ["data", "end_conversation"]}},
                                "conversation": {"method": "GET", "endpoint": CONVERSATION_PATH,
                                                 "request": {"optional": ["context_id"]}}}}}]

    def extra_routes(self) -> list[Any]:
        from starlette.requests import Request
        from starlette.responses import JSONResponse
        from starlette.routing import Route

        async def pending(_request: Request) -> JSONResponse:
            return JSONResponse({"pending": self.pending()})

        async def reply(request: Request) -> JSONResponse:
            try:
                body = json.loads(await request.body() or b"{}")
            except (ValueError, UnicodeDecodeError):
                return JSONResponse({"detail": "the body is not valid JSON"}, status_code=400)
            if not isinstance(body, dict):
                return JSONResponse({"detail": "the body must be a JSON object"}, status_code=400)
            unknown = set(body) - {"task_id", "text", "data", "end_conversation"}
            if unknown:
                return JSONResponse({"detail": f"unknown field(s): {', '.join(sorted(unknown))} (accepted: data, "
                                               "end_conversation, task_id, text)"}, status_code=400)
            try:
                return JSONResponse(self.reply(body.get("task_id"), body.get("text", ""), body.get("data"),
                                               body.get("end_conversation", False)))
            except ReplyError as e:
                return JSONResponse({"detail": e.detail}, status_code=e.status)

        async def conversation(request: Request) -> JSONResponse:
            try:
                return JSONResponse(self.conversation(request.query_params.get("context_id")))
            except ReplyError as e:
                return JSONResponse({"detail": e.detail}, status_code=e.status)

        return [Route(PENDING_PATH, pending, methods=["GET"]),
                Route(REPLY_PATH, reply, methods=["POST"]),
                Route(CONVERSATION_PATH, conversation, methods=["GET"])]
